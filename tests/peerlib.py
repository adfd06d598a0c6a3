"""What the programs the tests run as peers share: they run as scripts (in a namespace,
some under ulsrun, some on the kernel's stack), standard library only, and find this file
with one line, their own directory's parent on sys.path."""
import json
import socketserver


def out(**kw):
    """One JSON line on stdout, flushed at once (the test reads it while we run)."""
    print(json.dumps(kw), flush=True)


def recv_exact(s, n):
    """n bytes from socket s, or fewer if the stream ends first."""
    buf = bytearray()
    while len(buf) < n:
        b = s.recv(min(65536, n - len(buf)))
        if not b:
            break
        buf += b
    return bytes(buf)


class Echo(socketserver.BaseRequestHandler):
    """socketserver handler: every byte back, until the client closes."""

    def handle(self):
        while True:
            b = self.request.recv(65536)
            if not b:
                return
            self.request.sendall(b)
