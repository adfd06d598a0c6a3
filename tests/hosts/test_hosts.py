"""More than one host (issue 16, item 4; docs/deployment.md): ulstack nodes on one host
talk to ulstack nodes and Linux peers on another, across a wire of MTU 1500, every byte
verified: ulsbench's verified streams between nodes and between a node and a kernel peer,
curl against python's http.server (SHA-256 of the file), and a program that finds its
address by walking the interfaces (tests/shim/ifaddrs) serving across.

A stream that crossed the wire must show there: nftables counters on each end's ingress
count at least one frame per 1500 bytes moved, and no frame longer than the MTU (the wire
has no TSO/GSO, so the nodes' super-segments are cut to wire size before they cross; with
TSO left on, a 64 MiB stream put about 1,200 longer frames on it)."""
import hashlib
import json
import os
import random
import shutil

import pytest

from conftest import BENCH, BUILD, PYTHON
from tblib import ECHO_CLIENT

MIB = 1 << 20


def _wire_check(hosts, before, payload):
    frames, nbytes, over = (a - b for a, b in zip(hosts.wire_counters(), before))
    assert frames >= payload // 1500, f"only {frames} frames crossed the wire for {payload} bytes"
    assert over == 0, f"{over} of {frames} frames on the wire were longer than the MTU"


def _bench_server(hosts, side, port, count):
    """ulsbench server on ("node", host, node) or ("kernel", host)."""
    argv = [BENCH, "server", "--port", str(port), "--count", str(count)]
    if side[0] == "node":
        _, host, node = side
        p = hosts.start(["ip", "netns", "exec", hosts.ns(host), *argv, "--ctl",
                         hosts.ctl(host, node)], f"server-h{host}n{node}")
        hosts.wait_listening(host, node, port, p)
    else:
        p = hosts.start(hosts.on_kernel(side[1], argv), f"server-k{side[1]}")
        hosts.wait_listening(side[1], "kernel", port, p)
    return p


def _bench_client(hosts, side, to, port, nbytes, streams, direction):
    out = os.path.join(hosts.tmp, f"client-{port}.json")
    argv = [BENCH, "client", "--to", f"{to}:{port}", "--bytes", str(nbytes), "--streams",
            str(streams), "--dir", direction, "--json", out]
    if side[0] == "node":
        _, host, node = side
        argv = ["ip", "netns", "exec", hosts.ns(host), *argv, "--ctl", hosts.ctl(host, node)]
    else:
        argv = hosts.on_kernel(side[1], argv)
    p = hosts.start(argv, f"client-{port}")
    rc = p.wait(120)
    assert rc == 0, p.output()
    with open(out) as f:
        return json.load(f)


def _addr(hosts, side):
    return hosts.ip(side[1], side[2]) if side[0] == "node" else hosts.kernel_ip(side[1])


STREAMS = [
    # (server, client, streams, dir, port): data always crosses the wire
    pytest.param(("node", 2, 1), ("node", 1, 1), 1, "send", 5101, id="node1-h1-sends-to-node1-h2"),
    pytest.param(("node", 1, 2), ("node", 2, 2), 4, "recv", 5102,
                 id="node2-h2-receives-4-from-node2-h1"),
    pytest.param(("kernel", 2), ("node", 1, 1), 2, "send", 5103, id="node1-h1-sends-to-kernel-h2"),
    pytest.param(("kernel", 2), ("node", 1, 2), 1, "recv", 5104,
                 id="node2-h1-receives-from-kernel-h2"),
    pytest.param(("node", 2, 1), ("kernel", 1), 2, "send", 5105, id="kernel-h1-sends-to-node1-h2"),
]


@pytest.mark.parametrize("server,client,streams,direction,port", STREAMS)
def test_verified_streams_cross_from_one_host_to_the_other(hosts, server, client, streams,
                                                          direction, port):
    nbytes = 64 * MIB
    before = hosts.wire_counters()
    srv = _bench_server(hosts, server, port, streams)
    res = _bench_client(hosts, client, _addr(hosts, server), port, nbytes, streams, direction)
    assert res["verified"] and res["bytes_verified"] == nbytes * streams, res
    assert all(s["verified"] for s in res["streams"]), res
    assert srv.wait(30) == 0, srv.output()
    _wire_check(hosts, before, nbytes * streams)
    print(f"{server} <- {client} {streams} stream(s) {direction}: {res['gbps']:.3f} Gbit/s")


@pytest.fixture
def payload(tmp_path):
    """32 MiB of random bytes in a directory of their own, and their SHA-256."""
    d = tmp_path / "www"
    d.mkdir()
    data = random.Random(1604).randbytes(32 * MIB)
    (d / "payload.bin").write_bytes(data)
    os.chmod(tmp_path, 0o755)
    os.chmod(d, 0o755)
    return str(d), hashlib.sha256(data).hexdigest(), len(data)


@pytest.mark.parametrize("client", ["ulstack", "kernel"])
def test_curl_on_host_1_downloads_from_python_http_server_on_host_2(hosts, payload, client):
    """http.server under ulsrun on host 2's node 1; curl under ulsrun on host 1's node 1,
    or on host 1's Linux peer."""
    curl = shutil.which("curl", path="/usr/bin:/bin")
    if not curl:
        pytest.fail("curl is not installed: run build-aux/setup-debian (Debian package curl)")
    www, digest, size = payload
    port = 8016
    srv = hosts.start(hosts.on_node(2, 1, [PYTHON, "-u", "-m", "http.server", str(port),
                                           "--bind", "0.0.0.0", "--directory", www]),
                      "http-server-h2n1")
    hosts.wait_listening(2, 1, port, srv)
    out = os.path.join(hosts.tmp, f"curl-{client}.bin")
    argv = [curl, "-sS", "--fail", "--max-time", "60", "-o", out, "-w",
            "%{http_code} %{size_download}\n", f"http://{hosts.ip(2, 1)}:{port}/payload.bin"]
    before = hosts.wire_counters()
    c = hosts.start(hosts.on_node(1, 1, argv) if client == "ulstack" else hosts.on_kernel(1, argv),
                    f"curl-{client}")
    assert c.wait(90) == 0, c.output()
    assert c.stdout().split() == ["200", str(size)], c.output()
    with open(out, "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == digest, "the download differs"
    _wire_check(hosts, before, size)
    assert srv.poll() is None, srv.output()


def test_a_program_that_walks_the_interfaces_serves_across_hosts(hosts):
    """tests/shim/ifaddrs on host 2's node 2 takes the address getifaddrs lists (the
    node's), serves there, and echoes 4 MiB to host 1's Linux peer byte for byte."""
    prog = os.path.join(BUILD, "tests", "shim", "ifaddrs")
    port = 7316
    srv = hosts.start(hosts.on_node(2, 2, [prog, "serve", str(port)]), "ifaddrs-serve-h2n2")
    hosts.wait_listening(2, 2, port, srv)
    assert srv.stdout().split()[:3] == ["serving", hosts.env["TB_H2_NODE2_TAP"], hosts.ip(2, 2)], \
        srv.output()
    c = hosts.start(hosts.on_kernel(1, [PYTHON, "-c", ECHO_CLIENT, hosts.ip(2, 2), str(port), "16",
                                         str(4 << 20)]),
                    "echo-client-k1")
    assert c.wait(60) == 0, c.output()
    assert c.stdout().strip() == "match", c.output()
    assert srv.wait(30) == 0 and f"echoed {4 << 20}" in srv.stdout(), srv.output()
