"""The benchmark drivers' modules (apps/*.py), imported by path for the tests of this
directory: importing one must not run anything."""
import importlib.util
import os

SRC = os.environ.get("ULS_SRCDIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))


def load(name, as_name=None):
    """apps/NAME.py as a module of its own (a fresh one per call)."""
    spec = importlib.util.spec_from_file_location(
        as_name or name, os.path.join(SRC, "apps", name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
