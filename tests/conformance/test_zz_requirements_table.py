"""docs/conformance.md's requirements table is generated from these tests and is current."""

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def test_every_test_names_its_fix_and_mutation_and_the_table_is_current():
    """Every conformance test carries @requirement(fix=..., mutate=...), and the table in
    docs/conformance.md is what tests/conformance/reqtable.py generates from them now."""
    r = subprocess.run([sys.executable, str(HERE / "reqtable.py"), "--check"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert r.returncode == 0, r.stdout
