"""`ulsbench apps` as it runs: one short run of every program on both stacks, and an
interrupted run that must leave nothing behind.

The smoke run is the benchmark itself (`ulsbench apps --seconds 1`) on a testbed it builds:
every (program, configuration, stack) must have exactly one record that passes the JSON
schema and is verified (each run's check passed: redis-server's command counts, nginx's
access log against wrk, both iperf3 ends' bytes, every echoed ping-pong byte), the ulstack
runs must show frames through both nodes' ulsd, and the plot must be written.
Needs root (namespaces, TAPs) and the programs build-aux/setup-debian installs.
"""
import json
import os
import re
import signal
import subprocess
import time

import appmod

SRC = os.environ.get("ULS_SRCDIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("ULS_BUILDDIR") or os.path.join(SRC, "build")
BENCH = os.path.join(BUILD, "apps", "ulsbench")


def _apps_module():
    return appmod.load("ulsbench_apps")


def _env():
    return dict(os.environ, ULS_BUILDDIR=BUILD, ULS_SRCDIR=SRC)


def test_a_short_run_of_every_app_verifies_on_both_stacks_and_writes_schema_and_plot(tmp_path):
    out = tmp_path / "apps.json"
    r = subprocess.run([BENCH, "apps", "--seconds", "1", "--json", str(out)],
                       capture_output=True, text=True, timeout=600, env=_env(),
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-4000:]
    ap = _apps_module()
    doc = json.loads(out.read_text())
    assert doc["complete"] is True and doc["options"]["seconds"] == 1
    want = sorted((a, c["config"], s) for a in ap.APPS for c in ap.CONFIGS[a]
                  for s in ap.STACKS)
    assert sorted((x["program"], x["config"], x["stack"]) for x in doc["apps"]) == want
    for rec in doc["apps"]:
        assert ap.check_record_schema(rec) == [], rec
        assert rec["verified"] is True and rec["repeats"] == 1, rec
        (run,) = rec["runs"]
        assert run["verified"] is True and run["check"], run
        assert rec["cpu_seconds"] > 0, rec
        if rec["stack"] == "ulstack":
            assert set(run["cpu"]) == {"client", "server", "ulsd"}, run
            for node in ("1", "2"):
                assert run["ulsd_frames"][node]["in"] > 0, run
                assert run["ulsd_frames"][node]["out"] > 0, run
        else:
            assert set(run["cpu"]) == {"client", "server"} and "ulsd_frames" not in run, run
        if rec["program"] in ("redis", "nginx", "pingpong"):
            assert rec["p50_us"] > 0 and rec["p99_us"] >= rec["p50_us"], rec
    assert len(doc["ratios"]) == len(want) // 2
    assert all(x["throughput"] > 0 for x in doc["ratios"])
    # the table: a row per configuration, with the ratio
    assert len(re.findall(r"^\w+ .*\d\.\d\dx", r.stdout, re.M)) == len(want) // 2, r.stdout
    with open(tmp_path / "apps_ratio.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def _start_time(pid):
    """A process's start time (clock ticks since boot), or None when it is gone: with the
    PID it names one process, even if the PID is reused."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return None if fields[0] in ("Z", "X") else int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def _children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def _procs_of_run(workdir):
    """{pid: start time} of the processes whose command line names the run's directory
    (nginx's master; wrk names the URL) and their descendants (nginx's workers, whose
    command line is 'nginx: worker process')."""
    todo = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/cmdline" % entry, "rb") as f:
                    if workdir.encode() in f.read():
                        todo.append(int(entry))
            except OSError:
                pass
    found = {}
    while todo and len(found) < 1000:
        pid = todo.pop()
        t = _start_time(pid)
        if t is not None and pid not in found:
            found[pid] = t
            todo += _children(pid)
    return found


def test_an_interrupted_run_stops_everything_it_started_and_removes_the_testbed(tmp_path):
    """SIGTERM while nginx (master and workers, under ulsrun or on the kernel) serves wrk:
    the driver exits 128+15, and neither nginx's master (its command line names the run's
    directory) nor its workers are left, nor the testbed's namespaces."""
    err = tmp_path / "err"
    with open(err, "w") as fe:
        p = subprocess.Popen([BENCH, "apps", "--apps", "nginx", "--seconds", "20"],
                             stdout=subprocess.DEVNULL, stderr=fe, env=_env(),
                             stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and "running" not in err.read_text():
            assert p.poll() is None, err.read_text()
            time.sleep(0.1)
        text = err.read_text()
        m = re.search(r"logs in (\S+)", text)
        assert m and "running" in text, text
        workdir = m.group(1)
        # Into the run: nginx's master and its 2 workers are up (waited for: a fixed 3 s
        # was a guess a loaded machine could miss).
        deadline = time.monotonic() + 60
        while True:
            started = _procs_of_run(workdir)
            if len(started) >= 3 or time.monotonic() > deadline:
                break
            assert p.poll() is None, err.read_text()
            time.sleep(0.2)
        assert len(started) >= 3, "nginx's master and 2 workers were not running: %s" % started
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert rc == 128 + signal.SIGTERM, err.read_text()
    left = [pid for pid, t in started.items() if _start_time(pid) == t]
    assert left == [], "left running after the interrupt"
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    tb = "ulsbench" + os.environ.get("TB_SUFFIX", "")
    assert not re.search(r"^%s(-|\s|$)" % re.escape(tb), ns, re.M), ns
