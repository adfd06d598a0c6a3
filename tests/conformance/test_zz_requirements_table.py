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


def _tree_digest(root):
    """Every file below root and a digest of its bytes."""
    import hashlib
    out = {}
    for p in sorted(Path(root).rglob("*")):
        if p.is_file():
            out[str(p.relative_to(root))] = hashlib.sha1(p.read_bytes()).hexdigest()
    return out


def test_every_mutation_of_our_code_still_changes_it():
    """A mutation that no longer matches the code it was written for (the code moved or was
    rewritten since) changes nothing, so the outcome recorded for it says nothing: every
    mutation of our own sources, applied to a copy of them, changes at least one file.
    (Mutations of lwIP go through lwip-mutate, which fails when its sed changes nothing.)"""
    import shutil
    import tempfile
    sys.path.insert(0, str(HERE))
    import reqtable
    src = HERE.parent.parent
    dirs = ("stack", "server", "filter", "netif", "apps")
    with tempfile.TemporaryDirectory(prefix="uls-mutapply-") as tmp:
        pristine = Path(tmp) / "pristine"
        for d in dirs:
            shutil.copytree(src / d, pristine / d, ignore=shutil.ignore_patterns("*.o", "*.lo", ".libs", ".deps"))
        before = _tree_digest(pristine)
        inert = []
        commands = sorted({t.mutate for t in reqtable.collect()
                           if t.mutate and "lwip-mutate" not in t.mutate})
        for cmd in commands:
            work = Path(tmp) / "work"
            shutil.copytree(pristine, work)
            r = subprocess.run(cmd, shell=True, cwd=work, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
            if r.returncode != 0 or _tree_digest(work) == before:
                inert.append(f"{cmd!r}: exit {r.returncode} {r.stdout.strip()[:200]}")
            shutil.rmtree(work)
    assert not inert, "mutations that change nothing:\n" + "\n".join(inert)
