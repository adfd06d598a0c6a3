"""A python3 asyncio echo server under ulsrun on node 1 and an asyncio client under ulsrun on
node 2 (asyncio_echo.py): 10,000 messages of 1..2048 pseudo-random bytes, each echoed and
compared before the next is sent, then a half-close. asyncio's loop is an epoll loop; its
self-pipe (an AF_UNIX socketpair, a kernel fd) sits in the same epoll set as the ulstack
sockets, and SIGTERM reaches the server through it: the server then exits 0.
"""
import os
import signal

from conftest import HERE, PYTHON

PORT = 7000
MESSAGES = 10_000
TIMEOUT = 90
ECHO = os.path.join(HERE, "asyncio_echo.py")


def test_asyncio_echoes_10000_messages_between_nodes(tb):
    server = tb.start(tb.uls(1, [PYTHON, ECHO, "server", "--bind", "0.0.0.0", "--port", str(PORT)]),
                      "asyncio-server-n1")
    tb.wait_listening(1, PORT, server)
    before = tb.counters()
    client = tb.start(tb.uls(2, [PYTHON, ECHO, "client", "--to", f"{tb.ip(1)}:{PORT}",
                                 "--messages", str(MESSAGES)]), "asyncio-client-n2")
    client.check(TIMEOUT)
    res = client.last_json()
    assert res and res["verified"] is True and res["messages"] == MESSAGES, client.output()
    nbytes = res["bytes"]
    tb.assert_through_ulstack(before, received={1: nbytes, 2: nbytes}, sent={1: nbytes, 2: nbytes})

    os.kill(server.pid, signal.SIGTERM)
    assert server.wait(15) == 0, f"echo server after SIGTERM:\n{server.output()}"
    done = server.last_json()
    assert done and done["stopped"] and done["bytes"] == nbytes and done["connections"] == 1, \
        server.output()
