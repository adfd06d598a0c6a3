#!/usr/bin/env python3
"""Show that each conformance test can fail: apply its mutation, rebuild, run it.

Every test's @requirement(mutate="SHELL COMMAND") names a change to the source tree that
undoes what makes ulstack meet the requirement (remove a patch, invert a check, configure
the opposite). For each distinct command this script restores a private copy of the tree
(HEAD of this checkout, exported when it starts), runs the command in it, rebuilds incrementally,
runs the tests that name the command against both deployments, and records in
tests/conformance/mutations.json whether they failed as they must. reqtable.py puts the
outcome in docs/conformance.md. Needs root (the tests build a testbed); takes about a
minute per mutation; never run by make check.

    tests/conformance/mutate.py [-k SUBSTRING] [--stale] [--workdir DIR] [--lwip-src DIR]

Outcomes: failed (the test caught the mutation), passed (the test is too weak: fix it),
unchanged (the command changed no file), no-build, timeout.
"""

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reqtable  # noqa: E402

REPO = reqtable.REPO
TIMEOUT = 900
PRISTINE = None  # HEAD's tree, exported at start (see snapshot)


def sh(cmd, **kw):
    return subprocess.run(cmd, shell=isinstance(cmd, str), **kw)


def snapshot(dest):
    """HEAD's files, exported once into dest: the tree every mutation starts from, so that
    edits made in the checkout while this runs change nothing. Returns their paths."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    archive = subprocess.Popen(["git", "-C", str(REPO), "archive", "HEAD"],
                               stdout=subprocess.PIPE)
    sh(["tar", "-x", "-C", str(dest)], stdin=archive.stdout, check=True)
    if archive.wait() != 0:
        sys.exit("mutate: git archive HEAD failed")
    out = sh(["git", "-C", str(REPO), "ls-tree", "-r", "-z", "--name-only", "HEAD"],
             stdout=subprocess.PIPE, check=True)
    return [f for f in out.stdout.decode().split("\0") if f]


def untracked_patches(src, files):
    """Patch files a mutation added (lwip-mutate writes stack/patches/9999-mutation.patch)."""
    known = set(files)
    return sorted(str(p.relative_to(src)) for p in (src / "stack" / "patches").glob("*")
                  if str(p.relative_to(src)) not in known)


def tree_sum(src, files):
    h = hashlib.sha256()
    for f in files + untracked_patches(src, files):
        p = src / f
        h.update(f.encode())
        h.update(p.read_bytes() if p.exists() else b"<absent>")
    return h.hexdigest()


def restore(src, files):
    """Make src hold exactly HEAD's content (the snapshot) of every tracked file; a file whose
    content is put back gets a fresh mtime so that make rebuilds what the last mutation
    changed (a file copied the first time keeps its own mtime)."""
    src.mkdir(parents=True, exist_ok=True)
    if (src / "stack" / "patches").exists():
        for f in untracked_patches(src, files):
            (src / f).unlink()
    for f in files:
        a, b = PRISTINE / f, src / f
        if not a.exists():
            continue
        if not b.exists():
            b.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(a, b)
        elif a.read_bytes() != b.read_bytes():
            shutil.copy(a, b)
            os.utime(b)


def commit():
    return sh(["git", "-C", str(REPO), "rev-parse", "HEAD"], stdout=subprocess.PIPE,
              text=True, check=True).stdout.strip()


def run_tests(src, build, tests, log):
    """Outcome per test and deployment: 'failed' or 'passed' (pytest's junit report)."""
    xml = build / "mutate-junit.xml"
    xml.unlink(missing_ok=True)
    ids = [f"{src}/tests/conformance/{t.file}::{t.name}" for t in tests]
    env = dict(os.environ, ULS_BUILDDIR=str(build), ULS_SRCDIR=str(src),
               TB_SUFFIX=os.environ.get("TB_SUFFIX", "-mut"))
    python = os.environ.get("PYTHON_TESTS", "/usr/bin/python3")  # Debian's, with Scapy
    sh([python, "-m", "pytest", "-p", "no:cacheprovider", "-q", f"--junitxml={xml}"] + ids, env=env, stdout=log, stderr=subprocess.STDOUT,
       timeout=TIMEOUT)
    got = {}
    if xml.exists():
        for c in ET.parse(xml).getroot().iter("testcase"):
            name, _, dep = c.get("name", "").partition("[")
            tags = {child.tag for child in c}
            got.setdefault(name, {})[dep.rstrip("]")] = \
                "failed" if tags & {"failure", "error"} else "passed"
    return got


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-k", default="", help="only tests whose name contains this")
    ap.add_argument("--stale", action="store_true",
                    help="only tests whose mutation has no recorded outcome yet (new or "
                         "changed since the last run)")
    ap.add_argument("--workdir", default="/var/tmp/uls-mutate")
    ap.add_argument("--lwip-src", default=str(REPO / "build" / "lwip-upstream"))
    args = ap.parse_args()

    global PRISTINE
    work = Path(args.workdir)
    src, build, PRISTINE = work / "src", work / "build", work / "pristine"
    rev = commit()
    files = snapshot(PRISTINE)
    by_cmd = {}
    recorded = reqtable.results()
    for t in reqtable.collect():
        if args.stale and recorded.get(t.name, {}).get("mutate") == t.mutate:
            continue
        if t.mutate and args.k in t.name:
            by_cmd.setdefault(t.mutate, []).append(t)
    results = reqtable.results()
    env = dict(os.environ, ULS_BUILD=str(build),
               ULS_CONFIGURE_FLAGS=f"--with-lwip-src={args.lwip_src}",
               ULS_MUTATE_LWIP_UPSTREAM=args.lwip_src)
    restore(src, files)
    if sh([str(src / "build-aux" / "ensure-build")], env=env).returncode != 0:
        sys.exit("mutate: the unmutated tree does not build")
    for i, (cmd, tests) in enumerate(sorted(by_cmd.items()), 1):
        names = ", ".join(t.name for t in tests)
        print(f"[{i}/{len(by_cmd)}] {cmd}\n    {names}", flush=True)
        restore(src, files)
        before = tree_sum(src, files)
        sh(cmd, cwd=src, env=env, check=False)
        outcome, detail = None, {}
        if tree_sum(src, files) == before:
            outcome = "unchanged"
        else:
            with open(work / "last.log", "w") as log:
                b = sh([str(src / "build-aux" / "ensure-build")], env=env, stdout=log,
                       stderr=subprocess.STDOUT)
                if b.returncode != 0:
                    outcome = "no-build"
                else:
                    try:
                        detail = run_tests(src, build, tests, log)
                    except subprocess.TimeoutExpired:
                        outcome = "timeout"
        for t in tests:
            d = detail.get(t.name, {})
            o = outcome or ("failed" if "failed" in d.values() else
                            "passed" if d else "not collected")
            results[t.name] = {"mutate": cmd, "commit": rev, "outcome": o,
                               "deployments": d, "date": time.strftime("%Y-%m-%d")}
            print(f"    {t.name}: {o} {d}", flush=True)
        reqtable.RESULTS.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    restore(src, files)
    ensure = sh([str(src / "build-aux" / "ensure-build")], env=env,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if ensure.returncode != 0:
        print("warning: the work tree did not rebuild unmutated", file=sys.stderr)


if __name__ == "__main__":
    main()
