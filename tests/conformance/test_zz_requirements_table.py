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


# Stands in for tests/conformance/lwip-mutate in the copy: the sed runs on a copy of the
# file as the build tree's lwIP has it (our patches applied) and fails if it changes nothing.
LWIP_MUTATE_STUB = r"""#!/bin/sh
f=$1
shift
tmp=$(mktemp)
cp "$ULS_LWIP_PATCHED/src/$f" "$tmp" || exit 1
sed -i "$@" "$tmp"
if cmp -s "$ULS_LWIP_PATCHED/src/$f" "$tmp"; then
    echo "sed $* changed nothing in $f"; rm -f "$tmp"; exit 1
fi
rm -f "$tmp"
echo "$f" >> stack/patches/9999-mutation.patch
"""


def test_every_mutation_still_changes_what_it_was_written_for():
    """A mutation that no longer matches the code it was written for (the code moved or was
    rewritten since, or a later lwIP patch changed the lines) changes nothing, so the outcome
    recorded for it says nothing: every mutation, applied to a copy of our sources and of
    lwIP as the build tree has it (our patches applied), changes at least one file."""
    import os
    import shutil
    import tempfile
    sys.path.insert(0, str(HERE))
    import reqtable
    src = HERE.parent.parent
    build = Path(os.environ.get("ULS_BUILDDIR") or src / "build")
    lwip = build / "lwip"
    assert (lwip / "src" / "core" / "tcp_in.c").is_file(), f"no patched lwIP in {lwip} (build first)"
    dirs = ("stack", "server", "filter", "netif", "apps")
    env = dict(os.environ, ULS_LWIP_PATCHED=str(lwip))
    with tempfile.TemporaryDirectory(prefix="uls-mutapply-") as tmp:
        pristine = Path(tmp) / "pristine"
        for d in dirs:
            shutil.copytree(src / d, pristine / d, ignore=shutil.ignore_patterns("*.o", "*.lo", ".libs", ".deps"))
        stub = pristine / "tests" / "conformance" / "lwip-mutate"
        stub.parent.mkdir(parents=True)
        stub.write_text(LWIP_MUTATE_STUB)
        stub.chmod(0o755)
        before = _tree_digest(pristine)
        inert = []
        commands = sorted({t.mutate for t in reqtable.collect() if t.mutate})
        for cmd in commands:
            work = Path(tmp) / "work"
            shutil.copytree(pristine, work)
            r = subprocess.run(cmd, shell=True, cwd=work, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, env=env)
            if r.returncode != 0 or _tree_digest(work) == before:
                inert.append(f"{cmd!r}: exit {r.returncode} {r.stdout.strip()[:200]}")
            shutil.rmtree(work)
    assert not inert, "mutations that change nothing:\n" + "\n".join(inert)
