"""Load suite (`make check-load`): the node suite's testbed and fixtures (tests/node/conftest.py)
on a testbed of its own name, so that it may run next to `make check`."""
import importlib.util
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("node_conftest",
                                               os.path.join(_here, "..", "node", "conftest.py"))
node_conftest = importlib.util.module_from_spec(_spec)
sys.modules["node_conftest"] = node_conftest
_spec.loader.exec_module(node_conftest)
node_conftest.TB_NAME = "ulsload"

testbed = node_conftest.testbed
tb = node_conftest.tb
