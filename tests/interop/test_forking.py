"""Python's socketserver.ForkingTCPServer under ulsrun on node 1 and its client under ulsrun
on node 2 (forking_echo.py). For every connection the server forks; the parent closes its
copy at once and the child serves it: the sshd and inetd pattern, where a connection moves
to the process that goes on using it (stack/handoff.c). 40 connections, 4 at a time, 1 MiB
echoed each and compared; node 1's ulsd must count one handoff per connection.
"""
import os
import signal

from conftest import HERE, PYTHON

PORT = 7010
CONNECTIONS = 40
NBYTES = 1 << 20
TIMEOUT = 120
PROG = os.path.join(HERE, "forking_echo.py")


def test_forking_server_children_take_over_their_connections(tb):
    server = tb.start(tb.uls(1, [PYTHON, PROG, "server", "--port", str(PORT)]), "forking-server-n1")
    tb.wait_listening(1, PORT, server)
    before = tb.counters()
    client = tb.start(tb.uls(2, [PYTHON, PROG, "client", "--to", f"{tb.ip(1)}:{PORT}",
                                 "--connections", str(CONNECTIONS), "--threads", "4",
                                 "--bytes", str(NBYTES)]), "forking-client-n2")
    client.check(TIMEOUT)
    res = client.last_json()
    assert res and res["verified"] and res["good"] == CONNECTIONS, client.output()
    total = CONNECTIONS * NBYTES
    tb.assert_through_ulstack(before, received={1: total, 2: total}, sent={1: total, 2: total})
    after = tb.counters()
    moved = after[1]["handoffs"] - before[1]["handoffs"]
    assert moved == CONNECTIONS, f"{moved} handoffs for {CONNECTIONS} connections"
    assert after[1]["handoffs_expired"] == before[1]["handoffs_expired"]

    os.kill(server.pid, signal.SIGTERM)
    assert server.wait(15) == 0, f"forking server after SIGTERM:\n{server.output()}"
