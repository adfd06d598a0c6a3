"""What the shim's cases (cases.py, cases_epoll.py) share: the command line (CASE
KERNEL_PEER_IP NODE_IP), the kernel peer's service ports (peer.py) and the connection
helpers."""
import socket
import sys

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
