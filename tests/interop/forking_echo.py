"""A forking echo server and its client, for tests/interop/test_forking.py.

  forking_echo.py server --port P        socketserver.ForkingTCPServer: for every connection
                                         the server forks; the child echoes until end of
                                         stream, the parent closes its copy at once (the
                                         inetd pattern). SIGTERM: prints
                                         {"stopped": true} and exits 0.
  forking_echo.py client --to IP:P --connections N --threads T --bytes B
                                         N connections, T at a time; each sends B
                                         pseudo-random bytes (seeded by its number) while
                                         reading the echo, compares it, half-closes and
                                         expects end of stream; prints one JSON line.

Nothing here knows about ulstack: the test runs both under ulsrun.
"""
import argparse
import json
import os
import random
import signal
import socket
import socketserver
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from peerlib import Echo  # noqa: E402


def server(args):
    socketserver.ForkingTCPServer.allow_reuse_address = True
    srv = socketserver.ForkingTCPServer(("0.0.0.0", args.port), Echo)
    srv.max_children = 64

    def stop(signum, frame):
        threading.Thread(target=srv.shutdown, daemon=True).start()
    signal.signal(signal.SIGTERM, stop)
    srv.serve_forever(poll_interval=0.1)
    srv.server_close()
    print(json.dumps({"stopped": True}), flush=True)


def one(addr, n, nbytes):
    data = random.Random(n).randbytes(nbytes)
    with socket.create_connection(addr, timeout=30) as s:
        w = threading.Thread(target=s.sendall, args=(data,))
        w.start()
        back = bytearray()
        while len(back) < nbytes:
            b = s.recv(1 << 20)
            if not b:
                break
            back += b
        w.join()
        s.shutdown(socket.SHUT_WR)
        end = s.recv(1)
    return bytes(back) == data and end == b""


def client(args):
    ip, port = args.to.rsplit(":", 1)
    addr = (ip, int(port))
    todo = list(range(args.connections))
    ok, lock = [], threading.Lock()

    def worker():
        while True:
            with lock:
                if not todo:
                    return
                n = todo.pop()
            good = one(addr, n, args.bytes)
            with lock:
                ok.append(good)
    ts = [threading.Thread(target=worker) for _ in range(args.threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    verified = len(ok) == args.connections and all(ok)
    print(json.dumps({"verified": verified, "connections": len(ok), "good": sum(ok),
                      "bytes": sum(ok) * args.bytes}), flush=True)
    return 0 if verified else 1


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["server", "client"])
    p.add_argument("--port", type=int)
    p.add_argument("--to")
    p.add_argument("--connections", type=int, default=20)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--bytes", type=int, default=1 << 20)
    a = p.parse_args()
    sys.exit(server(a) if a.mode == "server" else client(a))


if __name__ == "__main__":
    main()
