#!/usr/bin/python3
"""One end of an IPv6 (or IPv4) transfer for test_ipv6.py, under ulsrun on a ulsd node or
plainly on a kernel peer. Every result is a JSON line on stdout; every transfer checks its
bytes (a deterministic stream, echoed back and compared).

  server --port P [--v6only 0|1] [--udp] [--count N]
                      AF_INET6 on [::]:P (dual-stack unless --v6only 1): echoes N TCP
                      connections (or N UDP datagrams) and prints what accept/recvfrom named
  server4 --port P    the same on an AF_INET socket, for the port-sharing case
  client --to A --port P --bytes N [--udp]
                      connects to A (IPv6 if it has a colon), sends N bytes while reading the
                      echo, prints {"match": true, ...} when they are the same
  kserver --port P --go FILE
                      (kernel peer) accepts one connection, prints it, waits for FILE, then
                      writes until the connection is reset: {"reset": "ECONNRESET"} or the like
  kserver --port P --idle
                      the same, but it only reads, never writes: {"reset": ..., "t": T} with
                      T on the monotonic clock all namespaces share
  hold --to A --port P
                      connects, prints its names, and sleeps (the test kills it)
"""
import argparse
import errno
import os
import random
import socket
import sys
import threading
import time

from ulscounters import uls_counters

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from peerlib import out, recv_exact  # noqa: E402


def frame_counters():
    """The frames this process's stack took from and gave to its device as super-segments
    (libuls's dev_rx_gso and dev_tx_gso), or {} on the kernel."""
    return uls_counters(("dev_rx_gso", "dev_tx_gso"))


def pattern(n, seed=17):
    return random.Random(seed).randbytes(n)


def family_of(addr):
    return socket.AF_INET6 if ":" in addr else socket.AF_INET


def server(a, fam=socket.AF_INET6):
    typ = socket.SOCK_DGRAM if a.udp else socket.SOCK_STREAM
    ls = socket.socket(fam, typ)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if fam == socket.AF_INET6 and a.v6only is not None:
        ls.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, a.v6only)
    ls.bind(("::" if fam == socket.AF_INET6 else "0.0.0.0", a.port))
    ls.settimeout(a.timeout)
    if a.udp:
        out(listening=list(ls.getsockname()[:2]))
        for _ in range(a.count):
            data, peer = ls.recvfrom(65536)
            ls.sendto(data, peer)
            out(datagram=len(data), peer=list(peer[:2]))
        # lwIP may still hold the answer while it resolves the peer (RFC 4861 §7.2.2): a
        # socket closed meanwhile gives its port back first, and the answer is refused
        # (docs/ipv6.md). Linger as a program that goes on serving would.
        time.sleep(1.0)
        return
    ls.listen(16)
    out(listening=list(ls.getsockname()[:2]),
        v6only=ls.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY)
        if fam == socket.AF_INET6 else None)
    for _ in range(a.count):
        c, peer = ls.accept()
        c.settimeout(a.timeout)
        n = 0
        while True:
            b = c.recv(65536)
            if not b:
                break
            c.sendall(b)
            n += len(b)
        out(accepted=list(peer[:2]), sockname=list(c.getsockname()[:2]), bytes=n,
            counters=frame_counters())
        c.close()


def client(a):
    data = pattern(a.bytes)
    fam = family_of(a.to)
    if a.udp:
        s = socket.socket(fam, socket.SOCK_DGRAM)
        s.settimeout(2.0)
        for attempt in range(10):   # UDP: a lost datagram is sent again (bounded)
            s.sendto(data, (a.to, a.port))
            try:
                back, peer = s.recvfrom(65536)
                out(match=back == data, peer=list(peer[:2]), sockname=list(s.getsockname()[:2]),
                    attempts=attempt + 1)
                return
            except socket.timeout:
                continue
        out(match=False, error="no answer")
        return
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(a.timeout)
    s.connect((a.to, a.port))
    got = {}

    def reader():
        got["data"] = recv_exact(s, len(data))

    t = threading.Thread(target=reader)
    t.start()
    s.sendall(data)
    t.join(a.timeout)
    out(match=got.get("data") == data, bytes=len(got.get("data", b"")),
        peername=list(s.getpeername()[:2]), sockname=list(s.getsockname()[:2]))
    s.shutdown(socket.SHUT_WR)
    s.close()


def kserver(a):
    ls = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("::", a.port))
    ls.listen(1)
    ls.settimeout(a.timeout)
    out(listening=a.port)
    c, peer = ls.accept()
    out(accepted=list(peer[:2]))
    deadline = time.monotonic() + a.timeout
    if a.idle:
        # Nothing to send: only what the peer's side sends (a probe) can end it.
        c.settimeout(a.timeout)
        try:
            while c.recv(1024):
                pass
            out(reset="EOF", t=time.monotonic())
        except socket.timeout:
            out(reset=None, t=time.monotonic())
        except OSError as e:
            out(reset=errno.errorcode.get(e.errno, str(e.errno)), t=time.monotonic())
        return
    while not os.path.exists(a.go) and time.monotonic() < deadline:
        time.sleep(0.05)
    t0 = time.monotonic()
    c.settimeout(1.0)
    while time.monotonic() < deadline:
        try:
            c.send(b"x" * 1024)
            time.sleep(0.1)
        except OSError as e:
            out(reset=errno.errorcode.get(e.errno, str(e.errno)), after=time.monotonic() - t0)
            return
    out(reset=None)


def hold(a):
    s = socket.socket(family_of(a.to), socket.SOCK_STREAM)
    s.settimeout(a.timeout)
    s.connect((a.to, a.port))
    s.sendall(b"h")
    out(connected=list(s.getsockname()[:2]), peername=list(s.getpeername()[:2]))
    time.sleep(a.timeout)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["server", "server4", "client", "kserver", "hold"])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--to")
    p.add_argument("--bytes", type=int, default=1 << 20)
    p.add_argument("--v6only", type=int)
    p.add_argument("--udp", action="store_true")
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--go")
    p.add_argument("--idle", action="store_true")
    p.add_argument("--timeout", type=float, default=30.0)
    a = p.parse_args()
    if a.mode == "server4":
        server(a, socket.AF_INET)
    else:
        {"server": server, "client": client, "kserver": kserver, "hold": hold}[a.mode](a)


if __name__ == "__main__":
    main()
