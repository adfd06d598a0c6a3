"""What the pytest suites share about the testbed script (tests/testbed/testbed)."""
import os
import shlex
import subprocess
import tempfile


def run_testbed(testbed, tb_name, build, *args):
    """Run the testbed script; returns its stdout (the export lines). Output goes through
    files, not pipes: the ulsd daemons `up` starts inherit its stdout, so a pipe would not
    see end-of-file until they exit."""
    env = dict(os.environ, TB_NAME=tb_name, ULS_BUILDDIR=build)
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        r = subprocess.run([testbed, *args], env=env, stdout=out, stderr=err,
                           stdin=subprocess.DEVNULL, timeout=120)
        out.seek(0)
        err.seek(0)
        text, errors = out.read(), err.read()
    assert r.returncode == 0, f"testbed {' '.join(args)}: exit {r.returncode}\n{errors}"
    return text


def parse_exports(text):
    """The `export K=V` lines of `testbed up` as a dict."""
    env = {}
    for line in text.splitlines():
        if line.startswith("export "):
            k, _, v = line[len("export "):].partition("=")
            env[k] = shlex.split(v)[0] if v else ""
    return env
