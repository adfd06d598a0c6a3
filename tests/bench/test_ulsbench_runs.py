"""ulsbench as it runs: the receiver's verdict on the wire, and one short sweep of every mode.

The verdict tests speak ulsbench's wire format (version 3, apps/ulsbench.c) from Python to
an `ulsbench server` on the kernel's TCP, inside a network namespace of their own (only its
loopback is used). The Python sender makes the stream pattern of apps/pattern.c itself, so
a receiver that accepted a wrong byte, or named the wrong offset, fails here.

The smoke run is the benchmark itself (`ulsbench --mode raw,kernel,perproc,relay,central`), two
streams per mode for half a second after a short warm-up, on a testbed it builds: every
mode must verify its bytes and write runs that pass the JSON schema, and the plots. The
loss run does the same through the testbed's loss rule (`ulsbench --loss`).
Needs root (namespaces, TAPs).
"""
import json
import os
import struct
import subprocess
import textwrap
import uuid

import pytest

import appmod

SRC = os.environ.get("ULS_SRCDIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("ULS_BUILDDIR") or os.path.join(SRC, "build")
BENCH = os.path.join(BUILD, "apps", "ulsbench")

# The sender side of the wire, run inside the namespace: the pattern of apps/pattern.c
# (word w = T[w mod 8192] XOR K(seed, w / 8192), little-endian), a v3 request, the data
# with at most one byte flipped, and the 40-byte verdict back as JSON.
SENDER = textwrap.dedent(r"""
    import json, socket, struct, sys
    M = (1 << 64) - 1
    def sm(x):
        x = (x + 0x9e3779b97f4a7c15) & M
        x = ((x ^ (x >> 30)) * 0xbf58476d1ce4e5b9) & M
        x = ((x ^ (x >> 27)) * 0x94d049bb133111eb) & M
        return x ^ (x >> 31)
    T = [sm(i ^ 0x756c737461636b) for i in range(8192)]
    def pattern(seed, n):
        words = []
        for blk in range((n + 65535) // 65536):
            k = sm((sm(seed) + blk) & M)
            words.extend(t ^ k for t in T)
        return struct.pack("<%dQ" % len(words), *words)[:n]
    port, seed, n, flip, cut = (int(a) for a in sys.argv[1:6])
    data = bytearray(pattern(seed, n))
    if flip >= 0:
        data[flip] ^= 0x40
    del data[cut:]
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    # magic, version 3, direction 0 (client sends), 2 zero bytes, bytes, seed, ms, warm-up ms
    s.sendall(struct.pack(">IBBxxQQII", 0x554c5342, 3, 0, n, seed, 0, 0) + bytes(data))
    s.shutdown(socket.SHUT_WR)
    v = b""
    while len(v) < 40:
        c = s.recv(40 - len(v))
        if not c:
            break
        v += c
    st, good, measured, t0, t1 = struct.unpack(">IxxxxQQQQ", v)
    print(json.dumps({"status": st, "good": good, "measured": measured,
                      "from_ns": t0, "to_ns": t1}))
""")


@pytest.fixture
def netns():
    name = "ulsbw%s" % uuid.uuid4().hex[:8]
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


def _serve(ns, port, count):
    return subprocess.Popen(["ip", "netns", "exec", ns, BENCH, "server", "--port", str(port),
                             "--count", str(count)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _send(ns, port, seed, n, flip=-1, cut=None):
    r = subprocess.run(["ip", "netns", "exec", ns, "python3", "-c", SENDER, str(port),
                        str(seed), str(n), str(flip), str(n if cut is None else cut)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _wait_listening(ns, port):
    for _ in range(200):
        out = subprocess.run(["ip", "netns", "exec", ns, "ss", "-Htln", "sport = :%d" % port],
                             capture_output=True, text=True).stdout
        if out.strip():
            return
        subprocess.run(["sleep", "0.02"])
    pytest.fail("ulsbench server did not listen")


def test_receiver_verifies_an_intact_stream_and_names_the_first_corrupted_byte(netns):
    port, n = 5901, 1 << 20
    srv = _serve(netns, port, 3)
    try:
        _wait_listening(netns, port)
        ok = _send(netns, port, 12345, n)
        assert ok["status"] == 0 and ok["good"] == n
        # Without a warm-up the whole stream is measured, over a span the receiver saw.
        assert ok["measured"] == n and 0 < ok["from_ns"] <= ok["to_ns"]
        bad = _send(netns, port, 12345, n, flip=700001)
        assert bad["status"] == 1, "a flipped byte was accepted"
        assert bad["good"] == 700001
        short = _send(netns, port, 777, n, cut=n - 65536 - 3)
        assert short["status"] == 2 and short["good"] == n - 65536 - 3
        srv.wait(timeout=30)
        lines = [json.loads(x) for x in srv.stdout.read().splitlines() if x.startswith("{")]
        assert [x["verified"] for x in lines] == [True, False, False]
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()


def test_client_refuses_a_warmup_without_a_time_limit():
    r = subprocess.run([BENCH, "client", "--to", "127.0.0.1:1", "--bytes", "1M",
                        "--warmup", "1"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "--warmup needs --seconds" in r.stderr
    r = subprocess.run([BENCH, "client", "--to", "127.0.0.1:1", "--seconds", "1",
                        "--warmup", "-2"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "bad --warmup" in r.stderr


def test_client_congestion_control_is_for_the_kernels_tcp_only():
    # --congestion sets TCP_CONGESTION on the kernel's sockets; a ulstack node has its own
    r = subprocess.run([BENCH, "client", "--to", "127.0.0.1:1", "--seconds", "1",
                        "--congestion", "cubic", "--ctl", "/nonexistent"],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "--congestion is for a client on the kernel's TCP" in r.stderr
    r = subprocess.run([BENCH, "client", "--to", "127.0.0.1:1", "--seconds", "1",
                        "--congestion", "x" * 16], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "bad --congestion" in r.stderr


def run_sweep(args, out, timeout):
    """`ulsbench ARGS --json OUT` (a sweep, on a testbed of its own), which must succeed:
    returns its CompletedProcess and the JSON document it wrote."""
    env = dict(os.environ, ULS_BUILDDIR=BUILD, ULS_SRCDIR=SRC)
    r = subprocess.run([BENCH, *args, "--json", str(out)], capture_output=True, text=True,
                       timeout=timeout, env=env, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    return r, json.loads(out.read_text())


def test_one_short_run_of_every_mode_verifies_and_writes_schema_and_plots(tmp_path):
    out = tmp_path / "smoke.json"
    _, doc = run_sweep(["--mode", "raw,kernel,perproc,relay,central", "--streams", "2",
                        "--seconds", "0.5", "--warmup", "0.3"], out, 300)
    assert doc["complete"] is True
    assert sorted(x["mode"] for x in doc["runs"]) == ["central", "kernel", "perproc", "raw", "relay"]
    sw = _sweep_module()
    for run in doc["runs"]:
        assert sw.check_run_schema(run) == [], run
        assert run["verified"] is True and run["streams"] == 2
        assert 0 < run["measured_bytes"] <= run["bytes_verified"]
        assert run["aggregate_gbps"] > 0 and run["per_stream_gbps"]["min"] > 0
        # raw has nothing to warm; the TCP modes measured after 0.3 s of it
        assert run["warmup_seconds"] == (0.0 if run["mode"] == "raw" else 0.3)
        if run["mode"] != "raw":
            assert run["measured_bytes"] < run["bytes_verified"]
            # CPU over the measured part, from every process of the point
            w = run["cpu_window"]
            assert w["processes"] >= 3 and w["processes_left_out"] == 0, run
            # Inside the point after its warm-up. Not "<= 0.5": the second sample is
            # taken 0.1 s before the planned end by a loop that sleeps between looks,
            # and on a loaded machine it came later (every process still running, so
            # none left out).
            assert 0 < w["seconds"] < run["wall_seconds"] - run["warmup_seconds"], run
            assert w["cpu_seconds"] > 0, run
            assert run["cpu_s_per_gb_measured"] > 0, run
        # each ulstack mode on the data path it asked for, and who moved its frames
        if run["mode"] in ("perproc", "relay", "central"):
            assert run["datapath"] == ("relay" if run["mode"] == "relay" else "direct"), run
            moved = run["node_frames"]
            if run["mode"] == "relay":
                assert moved["relayed_by_ulsd"] > 0 and moved["direct"] == 0, run
            else:
                assert moved["direct"] > 0 and moved["relayed_by_ulsd"] < 0.01 * moved["direct"], run
    for png in ("aggregate.png", "per_stream.png"):
        with open(tmp_path / png, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_the_smallest_transfer_a_stream_may_ask_for_is_measured(tmp_path):
    """--bytes 64K, one message per stream: a receiver that took it in one read measured
    no span (from = to) and failed the point."""
    _, doc = run_sweep(["--mode", "kernel,perproc", "--streams", "2", "--bytes", "64K"],
                       tmp_path / "small.json", 180)
    assert doc["complete"] is True and len(doc["runs"]) == 2
    for run in doc["runs"]:
        assert run["bytes_verified"] == 2 * 65536 and run["aggregate_gbps"] > 0, run


def test_a_short_loss_run_records_the_rate_and_the_frames_dropped_and_verifies(tmp_path):
    """`ulsbench --loss`: every TCP mode through the testbed's loss rule, offload off (so
    that each frame is one wire segment, the kernel's too): each run records loss_pct and
    the frames the rule dropped during it, and every byte is still verified. A fixed
    2 MiB per stream, so that each point has about 1,400 data frames to drop from."""
    out = tmp_path / "loss.json"
    r, doc = run_sweep(["--loss", "1", "--offload", "off", "--streams", "1",
                        "--bytes", "2M", "--kernel-cc", "cubic"], out, 600)
    assert doc["complete"] is True
    assert sorted(x["mode"] for x in doc["runs"]) == ["central", "kernel", "perproc"]
    sw = _sweep_module()
    for run in doc["runs"]:
        assert sw.check_run_schema(run) == [], run
        assert run["verified"] is True and run["bytes_verified"] == 2 << 20
        assert run["loss_pct"] == 1 and run["offload"] == "off"
        imp = run["impairment"]
        assert run["frames_dropped"] > 0, run
        assert run["frames_dropped"] == imp["dropped"] == sum(
            p["dropped"] for p in imp["ports"].values())
        # Offload off everywhere: the frames the rule saw are wire-sized, the kernel's too.
        assert imp["bytes"] / imp["frames"] < 1600, imp
        # --kernel-cc: the kernel's senders ran the congestion control asked for
        assert run.get("congestion") == ("cubic" if run["mode"] == "kernel" else None), run
        # the rule's drops split by direction, and the senders' own counters, for the modes
        # with one sender and one receiver port (not central, whose relays share a node)
        if run["mode"] in ("kernel", "perproc"):
            lb = run["loss_by_direction"]
            assert lb["data"]["dropped"] + lb["ack"]["dropped"] <= run["frames_dropped"]
            assert lb["data"]["frames"] > lb["ack"]["frames"] > 0, lb
            assert lb["data"]["dropped_per_gb"] == round(
                lb["data"]["dropped"] / (run["bytes_verified"] / 1e9), 2)
            c = run["sender_counters"]
            sent = c["OutSegs"] if run["mode"] == "kernel" else c["tcp_xmit"]
            assert sent >= 1000, c
        else:
            assert "loss_by_direction" not in run
        assert isinstance(run["load_average"], float)
    assert "x kernel" in r.stdout and "loss%" in r.stdout
    assert "(the kernel's congestion control: cubic)" in r.stdout
    assert [row["loss_pct"] for row in doc["loss_summary"]] == [1]
    for png in ("loss.png", "loss_ratio.png"):
        with open(tmp_path / png, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_raw_frames_under_loss_are_lost_at_the_receiver_as_the_rule_dropped_them(tmp_path):
    """The receiving side's view of the loss rule on a TAP port: ulsraw numbers its frames
    and counts the ones that never arrived; at 1% it must miss at least every frame the
    rule says it dropped (more only if the receiving TAP's queue overflowed), counting the
    end frames the rule dropped."""
    _, doc = run_sweep(["--loss", "1", "--mode", "raw", "--streams", "1", "--seconds", "0.5"],
                       tmp_path / "raw.json", 300)
    run = doc["runs"][0]
    assert run["mode"] == "raw" and run["loss_pct"] == 1 and run["raw"]["corrupt"] == 0
    ports = run["impairment"]["ports"]
    dropped = ports["uls1"]["dropped"]
    # The run's total is the rule's count over every port (a frame of the other direction,
    # an ARP answer, may be dropped too); the numbered frames cross uls1.
    assert run["frames_dropped"] == sum(p["dropped"] for p in ports.values()), run
    assert dropped > 0, run
    # The rule drops the sender's end frames as readily as its data frames; the receiver
    # waits for all of them, so the ones it lacks were dropped.
    raw = run["raw"]
    assert 1 <= raw["end_frames_received"] <= raw["end_frames_sent"] == 3, raw
    assert raw["lost"] + raw["end_frames_sent"] - raw["end_frames_received"] >= dropped, run
    # and about 1% of what the sender wrote
    assert 0.005 < dropped / run["impairment"]["ports"]["uls1"]["frames"] < 0.02, run


def _sweep_module():
    return appmod.load("ulsbench_sweep")
