"""What the shim's cases (cases.py, cases_epoll.py, cases_fork.py) share: the command line (CASE
KERNEL_PEER_IP NODE_IP), the kernel peer's service ports (peer.py) and the connection
helpers."""
import os
import signal
import socket
import sys
import threading
import time

CASE, KIP, NIP = sys.argv[1], sys.argv[2], sys.argv[3]
ECHO, LATE, CONNECTOR, SINK, UDPECHO, KEEP, KEPT = 7100, 7101, 7102, 7103, 7104, 7105, 7106
# The family the connection and listener cases use (test_shim.py, on the IPv6 testbed):
# "4" AF_INET (the default), "6" AF_INET6 over IPv6 (CASE_KIP6, CASE_NIP6: the peer's and
# the node's IPv6 addresses), "6only" the same with IPV6_V6ONLY set, "mapped" a dual-stack
# AF_INET6 socket with an IPv4 peer, named ::ffff:a.b.c.d.
FAMILY = os.environ.get("CASE_FAMILY", "4")
KIP6, NIP6 = os.environ.get("CASE_KIP6", ""), os.environ.get("CASE_NIP6", "")
SOCK_FAMILY = socket.AF_INET if FAMILY == "4" else socket.AF_INET6
ANY = "0.0.0.0" if FAMILY == "4" else "::"


def peer_addr():
    """The kernel peer as a socket of this case's family names it."""
    return {"4": KIP, "6": KIP6, "6only": KIP6, "mapped": "::ffff:" + KIP}[FAMILY]


def node_addr():
    """The node's address as a socket of this case's family names it."""
    return {"4": NIP, "6": NIP6, "6only": NIP6, "mapped": "::ffff:" + NIP}[FAMILY]


def v6only(s):
    """IPV6_V6ONLY on an AF_INET6 socket of FAMILY 6only (before bind or connect)."""
    if FAMILY == "6only":
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    return s


def connect(port):
    """A blocking socket connected to the peer (no Python timeout: Python implements
    those with O_NONBLOCK and poll, which would hide the blocking calls under test)."""
    if FAMILY == "4":
        s = socket.create_connection((KIP, port), timeout=5)
    else:
        s = v6only(socket.socket(SOCK_FAMILY, socket.SOCK_STREAM))
        s.settimeout(5)
        s.connect((peer_addr(), port))
    s.settimeout(None)
    assert s.getsockname()[0] == node_addr(), f"not on ulstack: {s.getsockname()}"
    return s


def listener(backlog):
    """A listening socket of this case's family on an ephemeral port: (socket, port)."""
    ls = v6only(socket.socket(SOCK_FAMILY, socket.SOCK_STREAM))
    ls.bind((ANY, 0))
    ls.listen(backlog)
    return ls, ls.getsockname()[1]


def ask_connector(port, n):
    """The kernel peer opens n connections to our port (over IPv6 for FAMILY 6 and
    6only, else IPv4); returns how many echoed."""
    c = connect(CONNECTOR)
    c.sendall(f"{NIP6 if FAMILY in ('6', '6only') else NIP} {port} {n}\n".encode())
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


class Alarm(Exception):
    """What the SIGALRM handler of alarm_in raises."""


def alarm_in(seconds, restart=False):
    """SIGALRM in `seconds`, its handler raising Alarm. Without SA_RESTART (restart=False)
    a blocked call returns EINTR and Python, the handler having raised, does not retry it
    (as C without SA_RESTART); with it the call goes on and Alarm surfaces after it."""
    def h(sig, frm):
        raise Alarm()
    signal.signal(signal.SIGALRM, h)
    signal.siginterrupt(signal.SIGALRM, not restart)
    signal.setitimer(signal.ITIMER_REAL, seconds)


def interrupted(call, seconds, what):
    """call() with a SIGALRM in `seconds` (alarm_in): the signal must end it (AssertionError
    `what` if it returns instead). Returns how long it took."""
    t0 = time.monotonic()
    alarm_in(seconds)
    try:
        call()
        raise AssertionError(what)
    except Alarm:
        pass
    return time.monotonic() - t0


def counter(name):
    """A counter of this process's stack (uls_counters, exported by libuls-preload.so)."""
    import ctypes

    class C(ctypes.Structure):
        _fields_ = [("name", ctypes.c_char_p), ("value", ctypes.c_uint64)]
    get = ctypes.CDLL(None).uls_counters
    get.restype = ctypes.c_int
    v = (C * 512)()
    n = get(v, 512)
    for c in v[:min(n, 512)]:
        if c.name.decode() == name:
            return c.value
    raise KeyError(name)
