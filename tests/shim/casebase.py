"""What the shim's cases (cases.py, cases_epoll.py) share: the command line (CASE
KERNEL_PEER_IP NODE_IP), the kernel peer's service ports (peer.py) and the connection
helpers."""
import os
import socket
import sys
import threading

CASE, KIP, NIP = sys.argv[1], sys.argv[2], sys.argv[3]
ECHO, LATE, CONNECTOR, SINK, UDPECHO = 7100, 7101, 7102, 7103, 7104


def connect(port):
    """A blocking socket connected to the peer (no Python timeout: Python implements
    those with O_NONBLOCK and poll, which would hide the blocking calls under test)."""
    s = socket.create_connection((KIP, port), timeout=5)
    s.settimeout(None)
    assert s.getsockname()[0] == NIP, f"not on ulstack: {s.getsockname()}"
    return s


def ask_connector(port, n):
    """The kernel peer opens n connections to our port; returns how many echoed."""
    c = connect(CONNECTOR)
    c.sendall(f"{NIP} {port} {n}\n".encode())
    return c


def connector_result(c):
    line = c.makefile("rb").readline().split()
    assert line[0] == b"done", line
    return int(line[1])


def serve_echo(lsock, count, out):
    for _ in range(count):
        a, _ = lsock.accept()
        a.sendall(a.makefile("rb").readline())
        a.close()
        out.append(1)


def echo_round_trip(s, nbytes):
    """Send nbytes of random data on s from a thread while reading the echo the peer sends
    back: what comes back must be exactly what went."""
    data = os.urandom(nbytes)
    w = threading.Thread(target=s.sendall, args=(data,))
    w.start()
    back = bytearray()
    while len(back) < len(data):
        b = s.recv(1 << 20)
        assert b, "EOF"
        back += b
    w.join()
    assert bytes(back) == data
