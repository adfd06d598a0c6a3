"""nginx under ulsrun on node 1, in its default organisation: a master process that opens the
listening socket and forks 2 worker processes (which drop to user nobody and share the
listener), with Debian's stock settings `sendfile on; tcp_nopush on;` (sendfile(2) from a
file to the socket, TCP_CORK). On node 2, curl under ulsrun fetches a 16 MiB file
(hash verified) and wrk under ulsrun (-t2 -c32) loads a small file for 10 s: zero socket
errors, every response 200, requests served by both workers. nginx then stops gracefully on
SIGQUIT.

`daemon off; master_process on;` keeps the master in the foreground, so the PID this suite
records is nginx's own; everything nginx writes (pid file, logs, temp directories) is in a
directory of the test's own.
"""
import os
import re
import signal
import sys
import time

from conftest import SRC, check_copy, make_payload, program, received_file

sys.path.insert(0, os.path.join(SRC, "apps"))
from ulsbench_nginx import nginx_conf  # noqa: E402

PORT = 8080
WORKERS = 2
SECONDS = 10
SMALL_BYTES = 4096
BIG_BYTES = 16 << 20

LOG_FORMAT = '$pid $status $body_bytes_sent "$request"'


def interop_conf(d, workers, servers, log_format=LOG_FORMAT):
    """nginx.conf (apps/ulsbench_nginx.py, which `ulsbench apps` runs nginx with too),
    its error log at level info, its access log in log_format."""
    return nginx_conf(d, workers, log_format, servers, error_level="info")


def served(listen, d, name, data):
    """A server block: the `listen` lines (text, indented, each ending in a newline), root
    d/www, and /NAME.bin from directory data."""
    return (f"    server {{\n{listen}        root {d}/www;\n"
            f"        location = /{name}.bin {{\n            root {data};\n        }}\n    }}\n")


def children(pid):
    """PIDs of the live processes whose parent is `pid`."""
    res = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                res.append(int(entry))
    return res


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def read_pid(path, proc, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(path) as f:
                text = f.read().strip()
            if text:
                return int(text)
        except (OSError, ValueError):
            pass
        assert proc.poll() is None, f"nginx exited:\n{proc.output()}"
        time.sleep(0.05)
    raise AssertionError(f"nginx wrote no {path}:\n{proc.output()}")


def start_nginx_by_address(tb, datadir, name, nbytes, seed, listen, first_server, **ports):
    """nginx (interop_conf(), one worker) under ulsrun on node 1 in OUTDIR/NAME, its access log
    starting with each peer's address: its server's listen line `listen`, a server block
    with the lines `first_server` and root datadir before it, and
    /NAME.bin a file of nbytes (make_payload, seed) in datadir. `ports` gives the port
    numbers the two name ({port} among them); returns (directory, the file's SHA-256, the
    process) once nginx listens on every one."""
    nginx = program("nginx")
    d = os.path.join(tb.outdir, name)
    for sub in ("www", "tmp"):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
    for sub in (d, os.path.join(d, "www")):
        os.chmod(sub, 0o755)
    big = os.path.join(datadir, f"{name}.bin")
    digest = make_payload(big, nbytes, seed=seed)
    os.chmod(big, 0o644)
    first = ("    server {\n" + first_server.format(**ports) +
             f"        root {datadir};\n    }}\n")
    listen = "        " + listen.format(**ports) + "\n"
    text = interop_conf(d, 1, first + served(listen, d, name, datadir),
                        log_format="$remote_addr " + LOG_FORMAT)
    path = os.path.join(d, "nginx.conf")
    with open(path, "w") as f:
        f.write(text)
    server = tb.start(tb.uls(1, [nginx, "-p", d, "-c", path, "-e", os.path.join(d, "error.log")]),
                      f"{name}-n1")
    for port in ports.values():
        tb.wait_listening(1, port, server)
    read_pid(os.path.join(d, "nginx.pid"), server)
    return d, digest, server


def error_log(d, lines=20):
    """The last lines of nginx's error log at level error or worse, for failure messages."""
    try:
        with open(os.path.join(d, "error.log"), errors="replace") as f:
            bad = [line for line in f if re.search(r"\[(error|crit|alert|emerg)\]", line)]
    except OSError:
        return []
    return bad[-lines:]


def moved(before, after):
    """The ulsd counters that changed between two tb.counters(), for failure messages."""
    return {node: {k: v - before[node].get(k, 0) for k, v in after[node].items()
                   if v != before[node].get(k, 0)} for node in after}


def test_nginx_master_and_two_workers_serve_wrk_and_curl_only_200s(tb, datadir):
    nginx, wrk, curl = program("nginx"), program("wrk"), program("curl")
    d = os.path.join(tb.outdir, "nginx")
    os.makedirs(os.path.join(d, "www"))
    os.makedirs(os.path.join(d, "tmp"))
    for sub in (d, os.path.join(d, "www")):
        os.chmod(sub, 0o755)
    small = os.path.join(d, "www", "small.bin")
    with open(small, "wb") as f:
        f.write(bytes(range(256)) * (SMALL_BYTES // 256))
    os.chmod(small, 0o644)
    big = os.path.join(datadir, "big.bin")   # the data directory goes at the end of the session
    big_digest = make_payload(big, BIG_BYTES, seed=8080)
    os.chmod(big, 0o644)
    conf = os.path.join(d, "nginx.conf")
    with open(conf, "w") as f:
        f.write(interop_conf(d, WORKERS, served(f"        listen {PORT};\n", d, "big", datadir)))

    server = tb.start(tb.uls(1, [nginx, "-p", d, "-c", conf, "-e", os.path.join(d, "error.log")]),
                      "nginx-n1")
    tb.wait_listening(1, PORT, server)
    master = read_pid(os.path.join(d, "nginx.pid"), server)
    deadline = time.monotonic() + 10
    while len(children(master)) < WORKERS and time.monotonic() < deadline:
        time.sleep(0.05)
    workers = children(master)
    assert len(workers) == WORKERS, f"nginx master {master} has workers {workers}:\n{server.output()}"
    before = tb.counters()

    # A big file through sendfile, verified.
    out = received_file(datadir, "nginx-big.bin")
    c = tb.start(tb.uls(2, [curl, "-sS", "--fail", "--max-time", "30", "-o", out, "-w", "%{http_code}\n",
                            f"http://{tb.ip(1)}:{PORT}/big.bin"]), "curl-n2")
    rc = c.wait(40)
    assert rc == 0 and c.stdout().strip() == "200", \
        f"{c.output()}\nnginx error log:\n{''.join(error_log(d))}"
    check_copy(out, big_digest, BIG_BYTES)

    w = tb.start(tb.uls(2, [wrk, "-t2", "-c32", f"-d{SECONDS}s", "--timeout", "5s",
                            f"http://{tb.ip(1)}:{PORT}/small.bin"]), "wrk-n2")
    rc = w.wait(SECONDS + 30)
    assert rc == 0, f"{w.output()}\nnginx error log:\n{''.join(error_log(d))}"
    text = w.stdout()
    m = re.search(r"^\s*(\d+) requests in ([\d.]+)(\w+), ", text, re.M)
    assert m and int(m.group(1)) > 0, f"wrk made no request:\n{w.output()}"
    requests = int(m.group(1))
    assert "Socket errors" not in text, \
        f"wrk saw socket errors:\n{text}\nnginx error log:\n{''.join(error_log(d))}\n" \
        f"ulsd counters that moved: {moved(before, tb.counters())}"
    assert "Non-2xx or 3xx responses" not in text, \
        f"wrk saw responses other than 200:\n{text}\nnginx error log:\n{''.join(error_log(d))}"

    # Stop gracefully (SIGQUIT to the master): it waits for its workers, exits 0.
    os.kill(master, signal.SIGQUIT)
    rc = server.wait(15)
    assert rc == 0, f"nginx after SIGQUIT:\n{server.output()}"
    left = [p for p in workers if alive(p)]
    assert not left, f"workers {left} outlived the master"

    with open(os.path.join(d, "access.log")) as f:
        log = [line.split(" ", 3) for line in f.read().splitlines()]
    statuses = {fields[1] for fields in log}
    assert statuses == {"200"}, f"statuses in the access log: {statuses}"
    small_lines = [fields for fields in log if "/small.bin" in fields[3]]
    assert len(small_lines) >= requests, f"access log has {len(small_lines)} small.bin lines, wrk {requests}"
    short = [fields for fields in small_lines if fields[2] != str(SMALL_BYTES)]
    assert not short, f"{len(short)} responses with a short body, e.g. {short[:3]}"
    served_by = {int(fields[0]) for fields in small_lines}
    assert served_by <= set(workers) and len(served_by) == WORKERS, \
        f"requests served by {served_by}, workers {workers}"
    bad = error_log(d)
    assert not bad, "nginx error log:\n" + "".join(bad)

    body = sum(int(fields[2]) for fields in log)
    tb.assert_through_ulstack(before, received={2: body}, sent={1: body})
