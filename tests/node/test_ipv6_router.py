"""Processes reach off-link IPv6 peers through the node's default router (docs/ipv6.md).

The testbed comes up with `--ipv6 --router6`: a Linux router on the nodes' bridge
(fe80::1 and 2001:db8:0:1::fe, IPv6 forwarding on in its own namespace only) and a Linux
host behind it on a second prefix (TB_FAR_IP6, 2001:db8:0:2::2). Node 1's ulsd has
`--gw6 fe80::1`, node 2's no router. On ulsd's nodes each case runs on the relay path
(ULS_DATAPATH=relay) and on ulsd's default (the direct path); a node of its own (ulsbench
with NODE OPTIONS, on a testbed `--no-ulsd`) is given `--gw6` itself.

Every transfer checks its bytes (v6peer.py's echoed stream, ulsbench's pattern). Without a
router, a connect to the far host fails at once with ENETUNREACH (Linux's answer when no
route reaches a destination), which is what every process got before `--gw6` existed.
"""
import json
import os
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tblib import BUILD, TESTBED, parse_exports, run_testbed  # noqa: E402

ULSRUN = os.path.join(BUILD, "apps", "ulsrun")
ULSD = os.path.join(BUILD, "server", "ulsd")
ULSBENCH = os.path.join(BUILD, "apps", "ulsbench")
STAT = os.path.join(BUILD, "apps", "ulsstat")
PEER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "v6peer.py")
PYTHON = "/usr/bin/python3"
MIB = 1 << 20


def ns(env, key, argv):
    return ["ip", "netns", "exec", env[key], *argv]


def start(argv):
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, start_new_session=True)


def stop(p):
    if p.poll() is None:
        try:
            os.killpg(p.pid, 9)
        except ProcessLookupError:
            pass
    try:
        out, err = p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        out, err = "", ""
    return out, err


def wait_listening(p, word, stream="stdout"):
    """The server's first line on stream, which says it listens (v6peer.py prints it on
    stdout, ulsbench on stderr)."""
    line = getattr(p, stream).readline()
    assert word in line, f"server did not start: {line!r} {stop(p)}"


@pytest.fixture(scope="module", params=["relay", "default"])
def bed(request):
    name = "ulsgw6r" if request.param == "relay" else "ulsgw6a"
    saved = os.environ.get("ULS_DATAPATH")
    if request.param == "relay":
        os.environ["ULS_DATAPATH"] = "relay"
    else:
        os.environ.pop("ULS_DATAPATH", None)
    try:
        env = parse_exports(run_testbed(TESTBED, name, BUILD, "up", "--nodes", "2",
                                        "--ipv6", "--router6"))
        env["mode"] = request.param
        yield env
    finally:
        run_testbed(TESTBED, name, BUILD, "down")
        if saved is None:
            os.environ.pop("ULS_DATAPATH", None)
        else:
            os.environ["ULS_DATAPATH"] = saved


def far_server(env, port, count=1):
    p = start(ns(env, "TB_FAR_NETNS", [PYTHON, PEER, "server", "--port", str(port),
                                       "--count", str(count)]))
    wait_listening(p, "listening")
    return p


def uls_client(env, node, port, nbytes, udp=False):
    argv = ns(env, "TB_NETNS", [ULSRUN, "--ctl", env[f"TB_NODE{node}_CTL"], "--",
                                PYTHON, PEER, "client", "--to", env["TB_FAR_IP6"],
                                "--port", str(port), "--bytes", str(nbytes),
                                *(["--udp"] if udp else [])])
    return subprocess.run(argv, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def test_process_on_a_node_with_gw6_reaches_a_peer_beyond_the_router(bed):
    """Node 1 (ulsd --gw6 fe80::1): 1 MiB over TCPv6 to the far host, echoed and compared;
    the far host saw the node's global address, so the router forwarded both ways."""
    port = 7611
    srv = far_server(bed, port)
    try:
        r = uls_client(bed, 1, port, MIB)
        assert r.returncode == 0, f"{r.stdout}\n{r.stderr}"
        assert '"match": true' in r.stdout and f'"bytes": {MIB}' in r.stdout, r.stdout
        assert f'"peername": ["{bed["TB_FAR_IP6"]}", {port}]' in r.stdout, r.stdout
        out, err = srv.communicate(timeout=20)
        assert f'"accepted": ["{bed["TB_NODE1_IP6"]}"' in out, f"{out}\n{err}"
    finally:
        stop(srv)
    assert router_forwarded(bed) > 0
    # The process had the data path the bed is for.
    r = subprocess.run([STAT, "--ctl", bed["TB_NODE1_CTL"], "--json"], capture_output=True,
                       text=True, timeout=10)
    counters = json.loads(r.stdout)["counters"]
    path = "leases_relay" if bed["mode"] == "relay" else "leases_direct"
    assert counters.get(path, 0) > 0, counters


@pytest.mark.parametrize("udp", [False, True], ids=["tcp", "udp"])
def test_process_on_a_node_without_gw6_gets_enetunreach_for_an_off_link_peer(bed, udp):
    """Node 2 has no router: the TCP connect (or the UDP send) fails at once with
    ENETUNREACH (errno 101)."""
    r = uls_client(bed, 2, 7612, 1000, udp)
    assert r.returncode != 0, r.stdout
    assert "[Errno 101]" in r.stderr, r.stderr


def test_udp_datagram_crosses_the_router_both_ways(bed):
    """Node 1: a UDP datagram to the far host and its echo back, compared."""
    port = 7618
    srv = start(ns(bed, "TB_FAR_NETNS", [PYTHON, PEER, "server", "--udp", "--port", str(port),
                                         "--count", "10"]))  # echoes a resent one too
    wait_listening(srv, "listening")
    try:
        r = uls_client(bed, 1, port, 1200, True)
        assert r.returncode == 0 and '"match": true' in r.stdout, f"{r.stdout}\n{r.stderr}"
    finally:
        stop(srv)


@pytest.mark.parametrize("gw6,why", [
    ("198.18.0.254", "expected an IPv6 address"),
    ("ff02::2", "expected a unicast IPv6 address"),
    ("::", "expected a unicast IPv6 address"),
    ("2001:db8:0:1::1", "the node's own address"),
    ("2001:db8:0:3::1", "not on the link"),
])
def test_ulsd_refuses_a_bad_gw6(gw6, why):
    """ulsd checks --gw6 before it opens anything: exit 2 and why, on stderr."""
    r = subprocess.run([ULSD, "--tap", "ulsnone", "--ip", "198.18.0.1/24", "--ip6",
                        "2001:db8:0:1::1/64", "--gw6", gw6, "--ctl", "/nonexistent/ctl", "-f"],
                       capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
    assert r.returncode == 2 and why in r.stderr and "--gw6" in r.stderr, r.stderr


def test_ulsd_refuses_gw6_without_ip6():
    r = subprocess.run([ULSD, "--tap", "ulsnone", "--ip", "198.18.0.1/24", "--gw6", "fe80::1",
                        "--ctl", "/nonexistent/ctl", "-f"],
                       capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
    assert r.returncode == 2 and "needs --ip6" in r.stderr, r.stderr


# A node of its own: the process owns the TAP (testbed --no-ulsd) and is given --gw6.

@pytest.fixture(scope="module")
def own():
    name = "ulsgw6o"
    try:
        yield parse_exports(run_testbed(TESTBED, name, BUILD, "up", "--nodes", "1",
                                        "--no-ulsd", "--ipv6", "--router6"))
    finally:
        run_testbed(TESTBED, name, BUILD, "down")


def own_client(env, to, port, extra, prefix6=64):
    argv = ns(env, "TB_NETNS", [ULSBENCH, "client", "--tap", env["TB_NODE1_TAP"], "--ip",
                                f"{env['TB_NODE1_IP']}/24", "--ip6",
                                f"{env['TB_NODE1_IP6']}/{prefix6}", *extra,
                                "--to", f"[{to}]:{port}", "--bytes", str(MIB)])
    # The previous test's process may still hold the TAP for a moment after it exited
    # (the kernel tears its io_uring down after it): the node's start then says busy, as
    # ulsd's does, which waits (server/ulsd.c). So do we, up to 10 s (seen once under load).
    deadline = time.monotonic() + 10
    while True:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                           stdin=subprocess.DEVNULL)
        if "Device or resource busy" not in r.stderr or time.monotonic() > deadline:
            return r
        time.sleep(0.1)


def bench_server(env, key, port):
    p = start(ns(env, key, [ULSBENCH, "server", "--port", str(port), "--family", "6",
                            "--count", "1"]))
    wait_listening(p, "listening", "stderr")
    return p


def router_forwarded(env):
    text = subprocess.run(ns(env, "TB_ROUTER6_NETNS", ["cat", "/proc/net/snmp6"]),
                          capture_output=True, text=True, timeout=10).stdout
    return int(next(x.split()[1] for x in text.splitlines()
                    if x.startswith("Ip6OutForwDatagrams")))


@pytest.mark.parametrize("router", ["TB_ROUTER6_LL", "TB_ROUTER6_IP6"])
def test_node_of_its_own_with_gw6_reaches_a_peer_beyond_the_router(own, router):
    """--gw6 as the router's link-local address and as its global one in the node's
    prefix: 1 MiB to the far host, every byte verified by the receiver."""
    port = 7613 if router == "TB_ROUTER6_LL" else 7614
    srv = bench_server(own, "TB_FAR_NETNS", port)
    try:
        r = own_client(own, own["TB_FAR_IP6"], port, ["--gw6", own[router]])
        assert r.returncode == 0 and "every byte verified" in r.stdout, f"{r.stdout}\n{r.stderr}"
    finally:
        stop(srv)


def test_node_of_its_own_without_gw6_gets_enetunreach(own):
    r = own_client(own, own["TB_FAR_IP6"], 7615, [])
    assert r.returncode != 0 and "Network is unreachable" in r.stdout + r.stderr, \
        f"{r.stdout}\n{r.stderr}"


def test_node_of_its_own_sends_off_its_configured_prefix_to_the_router(own):
    """RFC 5942 §4: with --ip6 .../126 only ::0-::3 are on-link, so the kernel peer
    (::100, in the same /64) is reached through the router, which forwards the frames
    (lwIP alone took the /64 as on-link and went straight to the peer).

    The kernel peer, whose /64 has the node on-link, is given the node's MAC beforehand:
    the prefixes disagree on purpose here, and the node's answer to its solicitation
    would go through the router too (docs/ipv6.md, Deviation), leaving the peer to the
    router's Redirect to the node and its own retries."""
    port = 7616
    mac = own["TB_NODE1_MAC"]
    neigh = ["ip", "-n", own["TB_KERNEL_NETNS"], "-6", "neigh"]
    subprocess.run([*neigh, "replace", own["TB_NODE1_IP6"], "lladdr", mac, "dev", "eth0",
                    "nud", "permanent"], check=True, timeout=10)
    before = router_forwarded(own)
    srv = bench_server(own, "TB_KERNEL_NETNS", port)
    try:
        r = own_client(own, own["TB_KERNEL_IP6"], port, ["--gw6", own["TB_ROUTER6_LL"],
                                                         "--mac", mac], prefix6=126)
        assert r.returncode == 0 and "every byte verified" in r.stdout, f"{r.stdout}\n{r.stderr}"
    finally:
        stop(srv)
        subprocess.run([*neigh, "del", own["TB_NODE1_IP6"], "dev", "eth0"], timeout=10)
    assert router_forwarded(own) > before


# The command line refuses what is no unicast address (exit 2, its own reason); off the
# link and the node's own address are refused when the node starts (uls_node_start:
# -EINVAL), where the app prints one hint for both (exit 1).
@pytest.mark.parametrize("gw6,why,code", [
    ("ff02::2", "expected a unicast IPv6 address", 2),
    ("2001:db8:0:3::1", "Invalid argument (--gw6 must be a link-local address or one "
     "within --ip6's prefix, not the node's own)", 1),
    ("2001:db8:0:1::1", "Invalid argument (--gw6 must be a link-local address or one "
     "within --ip6's prefix, not the node's own)", 1),
])
def test_node_of_its_own_refuses_a_bad_gw6(own, gw6, why, code):
    r = own_client(own, own["TB_FAR_IP6"], 7617, ["--gw6", gw6])
    assert r.returncode == code and why in r.stderr, f"{r.returncode}\n{r.stdout}\n{r.stderr}"
