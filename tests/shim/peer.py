"""The kernel-side peer of the shim's semantic tests (runs in the testbed's kernel
namespace, on the Linux stack, never under ulsrun). Arguments: its IPv4 address, and on
the IPv6 testbed its IPv6 address, where the TCP services listen too.

  7100  echo: every byte back, until the client closes
  7101  late: waits 1.5 s, sends b"late!", closes
  7102  connector: reads "IP PORT N\\n", opens N connections to IP:PORT one after another;
        on each sends b"hello I\\n" and reads a line back; answers "done K\\n" with the
        number K of connections whose echo came back right
  7103  sink: reads until end of stream, answers the sha256 hex of what it read
  7104  UDP echo
  7105  keep: reads a line "TOKEN\n", then keeps what follows under TOKEN (until the end
        of stream, a reset, or 30 s of silence)
  7106  kept: reads "TOKEN N\n", waits up to 10 s for N bytes kept under TOKEN, answers
        the count kept and their sha256 hex
"""
import hashlib
import os
import socket
import socketserver
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from peerlib import Echo  # noqa: E402


class Late(socketserver.BaseRequestHandler):
    def handle(self):
        time.sleep(1.5)
        self.request.sendall(b"late!")


class Connector(socketserver.StreamRequestHandler):
    def handle(self):
        ip, port, n = self.rfile.readline().split()
        ok = 0
        for i in range(int(n)):
            try:
                with socket.create_connection((ip.decode(), int(port)), timeout=5) as c:
                    msg = b"hello %d\n" % i
                    c.sendall(msg)
                    f = c.makefile("rb")
                    if f.readline() == msg:
                        ok += 1
            except OSError:
                pass
        self.wfile.write(b"done %d\n" % ok)


class Sink(socketserver.BaseRequestHandler):
    def handle(self):
        h = hashlib.sha256()
        while True:
            b = self.request.recv(65536)
            if not b:
                break
            h.update(b)
        self.request.sendall(h.hexdigest().encode() + b"\n")


KEPT = {}
KEPT_COND = threading.Condition()


class Keep(socketserver.StreamRequestHandler):
    def handle(self):
        token = self.rfile.readline().strip()
        with KEPT_COND:
            KEPT[token] = bytearray()
        self.request.settimeout(30)
        while True:
            try:
                # rfile's buffer first: data that came with the token line is in it.
                b = self.rfile.read1(65536)
            except OSError:
                return
            if not b:
                return
            with KEPT_COND:
                KEPT[token] += b
                KEPT_COND.notify_all()


class Kept(socketserver.StreamRequestHandler):
    def handle(self):
        token, n = self.rfile.readline().split()
        with KEPT_COND:
            KEPT_COND.wait_for(lambda: len(KEPT.get(token, b"")) >= int(n), timeout=10)
            data = bytes(KEPT.get(token, b""))
        self.wfile.write(b"%d %s\n" % (len(data), hashlib.sha256(data).hexdigest().encode()))


class UdpEcho(socketserver.BaseRequestHandler):
    def handle(self):
        data, sock = self.request
        sock.sendto(data, self.client_address)


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


class Server6(Server):
    address_family = socket.AF_INET6


def main():
    ip = sys.argv[1]
    servers = [Server((ip, p), h) for p, h in ((7100, Echo), (7101, Late), (7102, Connector),
                                              (7103, Sink), (7105, Keep), (7106, Kept))]
    servers.append(socketserver.ThreadingUDPServer((ip, 7104), UdpEcho))
    if len(sys.argv) > 2:
        # The IPv6 testbed: the TCP services on the peer's IPv6 address too.
        servers += [Server6((sys.argv[2], p), h) for p, h in
                    ((7100, Echo), (7101, Late), (7102, Connector), (7103, Sink))]
    for s in servers:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    print("peer ready", flush=True)
    time.sleep(600)  # the suite stops it long before


if __name__ == "__main__":
    main()
