"""iperf3 with 4 parallel streams (-P 4) and its control connection: server and client under
ulsrun on the two nodes, and each of them against iperf3 on the Linux kernel peer; both
directions (-R: the server sends). Both sides' JSON reports (-J) must show no error, the four
connections on both ends, bytes received, and the same byte count for the role the server
played as the client reports for it (the client learns the server's numbers over the
control connection).

`-4`: without it `iperf3 -s` listens on an IPv6 dual-stack socket; that case is in
test_dualstack.py.
"""
import json

import pytest

from conftest import program

SECONDS = 2
TIMEOUT = SECONDS + 30

CASES = [
    # (server side, client side): "node1"/"node2" are ulstack nodes, "kernel" the Linux peer
    ("node1", "node2"),
    ("kernel", "node1"),
    ("node1", "kernel"),
]


def node_of(side):
    return int(side[-1]) if side.startswith("node") else None


def report(p):
    text = p.stdout()
    try:
        return json.loads(text)
    except ValueError:
        raise AssertionError(f"{p.name}: no JSON report:\n{p.output()}")


def reports(client, server, timeout):
    """The JSON reports of an iperf3 client and its one-off server (-1, which exits after
    the test), both of which must have exited 0 without an error: (client's, server's)."""
    crc = client.wait(timeout)
    c = report(client)
    assert "error" not in c and crc == 0, f"client: {c.get('error')}\n{client.output()}"
    src = server.wait(15)
    s = report(server)
    assert "error" not in s and src == 0, f"server: {s.get('error')}\n{server.output()}"
    return c, s


def conns(rep, server):
    """The data connections as a set of (client port, server port)."""
    res = set()
    for c in rep["start"]["connected"]:
        ports = (c["remote_port"], c["local_port"]) if server else (c["local_port"], c["remote_port"])
        res.add(ports)
    return res


@pytest.mark.parametrize("reverse", [False, True], ids=["client-sends", "server-sends"])
@pytest.mark.parametrize("server_side,client_side", CASES, ids=[f"{s}-serves-{c}" for s, c in CASES])
def test_iperf3_four_streams_agree_on_bytes(tb, server_side, client_side, reverse):
    iperf3 = program("iperf3")
    port = 5201 + 2 * CASES.index((server_side, client_side)) + int(reverse)
    snode, cnode = node_of(server_side), node_of(client_side)
    server_ip = tb.ip(snode) if snode else tb.kernel_ip

    sargv = [iperf3, "-4", "-s", "-1", "-J", "-p", str(port)]
    server = tb.start(tb.uls(snode, sargv) if snode else tb.kernel(sargv), f"iperf3-s-{server_side}")
    if snode:
        tb.wait_listening(snode, port, server)
    else:
        tb.wait_kernel_listening(port, server)
    before = tb.counters()
    cargv = [iperf3, "-4", "-c", server_ip, "-p", str(port), "-P", "4", "-t", str(SECONDS), "-J",
             "--connect-timeout", "5000"] + (["-R"] if reverse else [])
    client = tb.start(tb.uls(cnode, cargv) if cnode else tb.kernel(cargv), f"iperf3-c-{client_side}")
    c, s = reports(client, server, TIMEOUT)

    assert c["start"]["test_start"]["num_streams"] == 4, c["start"]["test_start"]
    assert len(conns(c, server=False)) == 4 and conns(c, server=False) == conns(s, server=True), \
        f"data connections: client {sorted(conns(c, False))}, server {sorted(conns(s, True))}"

    sent, received = c["end"]["sum_sent"]["bytes"], c["end"]["sum_received"]["bytes"]
    assert 0 < received <= sent, f"client report: sent {sent}, received {received}"
    # The server's own count of what it did equals what the client reports for it.
    role = "sum_sent" if reverse else "sum_received"
    assert s["end"][role]["bytes"] == c["end"][role]["bytes"], \
        f"{role}: server says {s['end'][role]['bytes']}, client says {c['end'][role]['bytes']}"

    data_src, data_dst = (snode, cnode) if reverse else (cnode, snode)
    tb.assert_through_ulstack(before, received={data_dst: received} if data_dst else {},
                              sent={data_src: received} if data_src else {})
