"""Dual-stack AF_INET6 sockets serving IPv4 under ulsrun (ipv6(7): IPV6_V6ONLY 0, Linux's
default, lets one [::] socket take IPv4 peers, named by v4-mapped addresses ::ffff:a.b.c.d,
RFC 4291 §2.5.5.2). Servers that open such a socket by default (`iperf3 -s` without -4,
nginx `listen [::]:8080 ipv6only=off`) must be reachable from the other node over IPv4
through ulstack, and a socket with IPV6_V6ONLY 1 must refuse IPv4 peers.

libuls has no IPv6 yet (docs/ipv6.md): an AF_INET6 socket is a ulstack IPv4 socket whose
addresses the shim converts (apps/preload/sockaddr.c); an IPv6-only socket stays the
kernel's, and a real IPv6 destination gets ENETUNREACH.
"""
import json
import os
import time

import pytest

from conftest import HERE, PYTHON, check_copy, program, received_file
from test_iperf3 import conns, reports
from test_nginx import error_log, start_nginx_by_address

PROG = os.path.join(HERE, "dualstack.py")
TIMEOUT = 60


def lines(proc):
    return [json.loads(x) for x in proc.stdout().splitlines() if x.startswith("{")]


def wait_line(proc, key, timeout=15.0):
    """The first JSON line of proc's stdout that has `key` (bounded wait)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for d in lines(proc):
            if key in d:
                return d
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise AssertionError(f"{proc.name}: no {key!r} line:\n{proc.output()}")


def test_dual_stack_socket_serves_ipv4_peer_with_v4_mapped_names(tb):
    port = 7301
    server = tb.start(tb.uls(1, [PYTHON, PROG, "server", "--port", str(port), "--udp"]),
                      "dual-server-n1")
    tb.wait_listening(1, port, server)   # the [::] socket is a ulstack one
    ready = wait_line(server, "listening")
    assert ready["listening"] == ["::", port], ready
    assert ready["v6only"] == 0 and ready["domain"] == 10 and ready["tclass_default"] == 0, ready
    before = tb.counters()

    client = tb.start(tb.uls(2, [PYTHON, PROG, "client", "--to", tb.ip(1), "--port", str(port)]),
                      "dual-client-n2")
    c = wait_line(client, "peername", TIMEOUT)
    assert client.wait(15) == 0, client.output()
    s = wait_line(server, "accepted", 15)
    assert server.wait(15) == 0, server.output()

    m1, m2 = "::ffff:" + tb.ip(1), "::ffff:" + tb.ip(2)
    # The client's own AF_INET6 socket names both ends v4-mapped ...
    assert c["peername"] == [m1, port] and c["sockname"][0] == m2, c
    assert c["echoed"] and c["tclass"] == 0x20, c
    assert c["udp_reply"] == "kcats-laud" and c["udp_from"] == [m1, port], c
    # ... and a real IPv6 destination has no route (docs/limits.md).
    assert c["real6"] == "ENETUNREACH", c
    # The server's accept, getpeername, getsockname and recvfrom say the same.
    assert s["accepted"] == [m2, c["sockname"][1]] and s["peername"] == s["accepted"], s
    assert s["sockname"] == [m1, port] and s["family"] == 10, s
    assert s["tcp_bytes"] == 256 * 1024 and s["udp_bytes"] == len("dual-stack"), s
    assert s["udp_from"][0] == m2, s
    tb.assert_through_ulstack(before, received={1: s["tcp_bytes"], 2: s["tcp_bytes"]},
                              sent={1: s["tcp_bytes"], 2: s["tcp_bytes"]})


@pytest.mark.parametrize("v6only,expect", [(0, "ok"), (1, "ECONNREFUSED")],
                         ids=["v6only0-accepts-ipv4", "v6only1-refuses-ipv4"])
def test_ipv6_v6only_decides_whether_ipv4_peer_is_taken(tb, v6only, expect):
    port = 7302 + v6only
    server = tb.start(tb.uls(1, [PYTHON, PROG, "server", "--port", str(port), "--v6only",
                                 str(v6only), "--timeout", "10"]), f"v6only{v6only}-server-n1")
    ready = wait_line(server, "listening")
    assert ready["v6only"] == v6only, ready
    if v6only:
        # An IPv6-only socket is not the node's: IPv4 peers meet ulsd's RST, as they meet
        # Linux's on a [::] listener with IPV6_V6ONLY, and the port stays free for IPv4.
        assert not tb.listeners(1, port), tb.listeners(1, port)
    else:
        tb.wait_listening(1, port, server)
    client = tb.start(tb.uls(2, [PYTHON, PROG, "connect4", "--to", tb.ip(1), "--port",
                                 str(port), "--timeout", "10"]), f"v6only{v6only}-connect4-n2")
    r = wait_line(client, "connect", 30)
    assert r["connect"] == expect, f"{r}\n{server.output()}"
    if not v6only:
        s = wait_line(server, "accepted", 15)
        assert s["accepted"][0] == "::ffff:" + tb.ip(2), s


IPERF_CASES = ["node2", "kernel"]


@pytest.mark.parametrize("client_side", IPERF_CASES, ids=[f"{c}-to-node1" for c in IPERF_CASES])
def test_iperf3_server_without_dash4_serves_ipv4_clients(tb, client_side):
    """`iperf3 -s` without -4 listens on [::] with IPV6_V6ONLY 0: the same checks as
    test_iperf3.py, over IPv4 to that socket."""
    iperf3 = program("iperf3")
    port = 5221 + IPERF_CASES.index(client_side)
    server = tb.start(tb.uls(1, [iperf3, "-s", "-1", "-J", "-p", str(port)]), "iperf3-s6-node1")
    tb.wait_listening(1, port, server)
    before = tb.counters()
    cargv = [iperf3, "-c", tb.ip(1), "-p", str(port), "-P", "4", "-t", "2", "-J",
             "--connect-timeout", "5000"]
    client = tb.start(tb.uls(2, cargv) if client_side == "node2" else tb.kernel(cargv),
                      f"iperf3-c-{client_side}")
    c, s = reports(client, server, 40)
    assert len(conns(c, server=False)) == 4 and conns(c, server=False) == conns(s, server=True), \
        f"data connections: client {sorted(conns(c, False))}, server {sorted(conns(s, True))}"
    received = c["end"]["sum_received"]["bytes"]
    assert 0 < received <= c["end"]["sum_sent"]["bytes"], c["end"]
    assert s["end"]["sum_received"]["bytes"] == received, (s["end"], c["end"])
    tb.assert_through_ulstack(before, received={1: received},
                              sent={2: received} if client_side == "node2" else {})


NGINX_PORT, NGINX_PORT_BOTH = 8090, 8091
BIG_BYTES = 4 << 20


def test_nginx_listen_ipv6_dual_stack_reached_by_curl_over_ipv4(tb, datadir):
    """`listen [::]:8090 ipv6only=off` (nginx's default is ipv6only=on, which takes no IPv4
    peer on Linux either) serves curl over IPv4, and the common pair `listen 8091;
    listen [::]:8091;` (an AF_INET socket beside an IPv6-only one on one port) still
    starts and serves IPv4 through ulstack. The access log shows the v4-mapped peer."""
    curl = program("curl")
    d, digest, server = start_nginx_by_address(
        tb, datadir, "nginx6", BIG_BYTES, 8090, "listen [::]:{port} ipv6only=off;",
        "        listen {both};\n        listen [::]:{both};\n", port=NGINX_PORT,
        both=NGINX_PORT_BOTH)
    before = tb.counters()
    for port in (NGINX_PORT, NGINX_PORT_BOTH):
        out = received_file(datadir, f"nginx6-{port}.bin")
        c = tb.start(tb.uls(2, [curl, "-sS", "--fail", "--max-time", "30", "-o", out, "-w",
                                "%{http_code}\n", f"http://{tb.ip(1)}:{port}/nginx6.bin"]),
                     f"curl-n2-{port}")
        rc = c.wait(40)
        assert rc == 0 and c.stdout().strip() == "200", \
            f"{c.output()}\nnginx error log:\n{''.join(error_log(d))}"
        check_copy(out, digest, BIG_BYTES)
    tb.assert_through_ulstack(before, received={2: 2 * BIG_BYTES}, sent={1: 2 * BIG_BYTES})
    with open(os.path.join(d, "access.log")) as f:
        peers = [line.split(" ", 1)[0] for line in f.read().splitlines()]
    # The [::] socket names its peer v4-mapped, the AF_INET one plainly.
    assert peers == ["::ffff:" + tb.ip(2), tb.ip(2)], peers
    bad = error_log(d)
    assert not bad, "nginx error log:\n" + "".join(bad)
