"""Unmodified servers and clients over IPv6 between two ulsd nodes under ulsrun (issue 17,
control protocol version 3, docs/ipv6.md): `iperf3 -s` (no -4) reached by `iperf3 -c` with
the node's IPv6 address, nginx with `listen [::]:PORT` fetched with `curl -6`, and the same
servers reached over IPv4.

The testbed is this module's own (`up --ipv6`, TB_NAME ulsinter6): ulsd with --ip6 and its
default offloads (checksum offload and TSO, TCPv6's included), as a user runs it. Every
transfer is checked: iperf3's byte counts on both ends agree, curl's copy has the file's
SHA-256.
"""
import os
import re

import pytest

from conftest import BUILD, TESTBED, check_copy, parse_exports, procs_stopped_ulsd_alive, \
    program, received_file, run_testbed
from conftest import Testbed as _Testbed   # (not a test class)
from test_iperf3 import conns, reports
from test_nginx import error_log, start_nginx_by_address

TB6 = "ulsinter6"
BIG_BYTES = 4 << 20


@pytest.fixture(scope="module")
def tb6():
    tb = _Testbed()
    try:
        tb.env = parse_exports(run_testbed(TESTBED, TB6, BUILD, "up", "--nodes", "2", "--ipv6"))
        assert tb.env.get("TB_NODE1_IP6"), tb.env
        yield tb
    finally:
        tb.stop_procs()
        tb.save_logs()
        run_testbed(TESTBED, TB6, BUILD, "down")


@pytest.fixture
def tb(tb6):
    with procs_stopped_ulsd_alive(tb6):
        yield tb6


def ip6(tb, i):
    return tb.env[f"TB_NODE{i}_IP6"]


@pytest.mark.parametrize("family", ["ipv6", "ipv4"])
def test_iperf3_server_reached_over_each_family(tb, family):
    """`iperf3 -s` without -4 listens on [::] dual-stack; `iperf3 -c` from the other node
    with node 1's IPv6 address (no -4, no -6), then with its IPv4 one: 2 streams for 2 s,
    the same connections and the same byte count on both ends."""
    iperf3 = program("iperf3")
    port = 5261 if family == "ipv6" else 5262
    server = tb.start(tb.uls(1, [iperf3, "-s", "-1", "-J", "-p", str(port)]), f"iperf3-s-{family}")
    tb.wait_listening(1, port, server)
    to = ip6(tb, 1) if family == "ipv6" else tb.ip(1)
    client = tb.start(tb.uls(2, [iperf3, "-c", to, "-p", str(port), "-P", "2", "-t", "2", "-J",
                                 "--connect-timeout", "5000"]), f"iperf3-c-{family}")
    c, s = reports(client, server, 60)
    assert len(conns(c, server=False)) == 2 and conns(c, server=False) == conns(s, server=True)
    # iperf3 prints a v4-mapped peer of its [::] socket as plain IPv4.
    want = {ip6(tb, 2)} if family == "ipv6" else {tb.ip(2), "::ffff:" + tb.ip(2)}
    assert {x["remote_host"] for x in s["start"]["connected"]} <= want, s["start"]["connected"]
    received = c["end"]["sum_received"]["bytes"]
    assert 0 < received <= c["end"]["sum_sent"]["bytes"], c["end"]
    assert s["end"]["sum_received"]["bytes"] == received, (s["end"], c["end"])


def test_nginx_listen_ipv6_fetched_with_curl_over_each_family(tb, datadir):
    """nginx's common pair `listen 8180; listen [::]:8180;` (the [::] socket is IPv6-only,
    nginx's default, beside an AF_INET one on the same port: Linux's sharing, which ulsd's
    port space keeps per family) and a server with `listen [::]:8181;` alone: curl -6
    fetches a 4 MiB file from both over IPv6, curl -4 from the pair over IPv4; every copy
    has the file's digest, and the access log names each peer in its family."""
    curl = program("curl")
    d, digest, _ = start_nginx_by_address(
        tb, datadir, "nginx-v6", BIG_BYTES, 8180, "listen {port};\n        listen [::]:{port};",
        "        listen [::]:{only6};\n", port=8180, only6=8181)
    fetches = [("-6", f"http://[{ip6(tb, 1)}]:8180/nginx-v6.bin"),
               ("-6", f"http://[{ip6(tb, 1)}]:8181/nginx-v6.bin"),
               ("-4", f"http://{tb.ip(1)}:8180/nginx-v6.bin")]
    for i, (fam, url) in enumerate(fetches):
        out = received_file(datadir, f"nginx-v6-{i}.bin")
        c = tb.start(tb.uls(2, [curl, fam, "-g", "-sS", "--fail", "--max-time", "30", "-o", out,
                                "-w", "%{http_code}\n", url]), f"curl{fam}-{i}")
        rc = c.wait(40)
        assert rc == 0 and c.stdout().strip() == "200", \
            f"{url}\n{c.output()}\nnginx error log:\n{''.join(error_log(d))}"
        check_copy(out, digest, BIG_BYTES)
    with open(os.path.join(d, "access.log")) as f:
        peers = [line.split(" ", 1)[0] for line in f.read().splitlines()]
    assert peers == [ip6(tb, 2), ip6(tb, 2), tb.ip(2)], peers
    bad = [x for x in error_log(d) if not re.search(r"\[info\]", x)]
    assert not bad, "nginx error log:\n" + "".join(bad)
