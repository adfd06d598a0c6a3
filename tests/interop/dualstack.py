#!/usr/bin/python3
"""AF_INET6 sockets talking IPv4 (ipv6(7), RFC 4291 §2.5.5.2 v4-mapped addresses), for
test_dualstack.py; run under ulsrun. Every result is a JSON line on stdout.

  server --port P [--v6only 0|1] [--udp]
                                   TCP (and UDP) on [::]:P; prints {"listening": ...}, then
                                   for one TCP connection (echoed back) and one datagram
                                   (answered) what accept, getpeername, getsockname and
                                   recvfrom said
  client --to A --port P           AF_INET6 TCP and UDP to ::ffff:A, echo checked, and what
                                   the names were; then a real IPv6 destination
  connect4 --to A --port P         a plain AF_INET connect: {"connect": "ok"|errno name}
"""
import argparse
import errno
import os
import socket
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from peerlib import out, recv_exact  # noqa: E402

NBYTES = 256 * 1024


def name(sa):
    return [sa[0], sa[1]]


def server(a):
    ls = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if a.v6only is not None:
        ls.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, a.v6only)
    ls.bind(("::", a.port))
    ls.listen(8)
    us = None
    if a.udp:
        us = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        us.bind(("::", a.port))
    out(listening=name(ls.getsockname()),
        v6only=ls.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY),
        domain=ls.getsockopt(socket.SOL_SOCKET, socket.SO_DOMAIN),
        tclass_default=ls.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS))
    ls.settimeout(a.timeout)
    c, peer = ls.accept()
    c.settimeout(a.timeout)
    data = recv_exact(c, NBYTES)
    c.sendall(data)
    res = dict(accepted=name(peer), peername=name(c.getpeername()),
               sockname=name(c.getsockname()), family=c.family, tcp_bytes=len(data))
    c.close()
    if us:
        us.settimeout(a.timeout)
        d, src = us.recvfrom(2048)
        us.sendto(d[::-1], src)
        res.update(udp_from=name(src), udp_bytes=len(d))
    out(**res)


def client(a):
    mapped = "::ffff:" + a.to
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.settimeout(a.timeout)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS, 0x20)
    s.connect((mapped, a.port))
    data = os.urandom(NBYTES)
    s.sendall(data)
    back = recv_exact(s, NBYTES)
    res = dict(peername=name(s.getpeername()), sockname=name(s.getsockname()),
               echoed=back == data, tclass=s.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS))
    s.close()
    u = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    u.settimeout(a.timeout)
    u.sendto(b"dual-stack", (mapped, a.port))
    d, src = u.recvfrom(2048)
    res.update(udp_reply=d.decode(), udp_from=name(src))
    u.close()
    # A destination that is IPv6 for real: no route yet (docs/limits.md).
    r = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    try:
        r.connect(("2001:db8::1", a.port))
        res["real6"] = "ok"
    except OSError as e:
        res["real6"] = errno.errorcode.get(e.errno, str(e.errno))
    r.close()
    out(**res)


def connect4(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(a.timeout)
    try:
        s.connect((a.to, a.port))
        out(connect="ok")
    except OSError as e:
        out(connect=errno.errorcode.get(e.errno, str(e.errno)) if e.errno else type(e).__name__)
    s.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["server", "client", "connect4"])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--to")
    p.add_argument("--v6only", type=int)
    p.add_argument("--udp", action="store_true")
    p.add_argument("--timeout", type=float, default=20.0)
    a = p.parse_args()
    {"server": server, "client": client, "connect4": connect4}[a.mode](a)


if __name__ == "__main__":
    sys.exit(main())
