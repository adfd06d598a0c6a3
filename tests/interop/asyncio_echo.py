#!/usr/bin/python3
"""An asyncio echo server and client, the interop suite's python3 program (epoll underneath:
asyncio's default loop on Linux is a selector loop over selectors.EpollSelector).

    asyncio_echo.py server --bind IP --port P
        Echoes every byte it reads, on any number of connections. Prints one line
        "listening IP:P" (flushed) once it listens. SIGTERM or SIGINT stop it cleanly: the
        handler runs through the loop's self-pipe (an AF_UNIX socketpair in the same epoll
        set as the TCP sockets); exit status 0, and a last JSON line with what it served.

    asyncio_echo.py client --to IP:P --messages N [--seed S] [--max-size B]
        Sends N newline-terminated messages of pseudo-random sizes (1..B bytes before the
        newline) and contents, one at a time, and reads each echo back with readuntil()
        before sending the next; every echo must equal its message. Prints one JSON line:
        {"messages": N, "bytes": ..., "verified": true}; exit status 0 only then.

Only the standard library; run with /usr/bin/python3.
"""
import argparse
import asyncio
import json
import random
import signal
import sys


async def close(writer):
    """Close a stream; a peer that reset it already is no error here."""
    writer.close()
    try:
        await writer.wait_closed()
    except ConnectionError:
        pass


async def serve(bind, port):
    stats = {"connections": 0, "bytes": 0}
    stop = asyncio.Event()

    async def echo(reader, writer):
        stats["connections"] += 1
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                stats["bytes"] += len(data)
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            await close(writer)

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    server = await asyncio.start_server(echo, bind, port, reuse_address=True)
    addr = server.sockets[0].getsockname()
    print(f"listening {addr[0]}:{addr[1]}", flush=True)
    async with server:
        await stop.wait()
    print(json.dumps({"stopped": True, **stats}), flush=True)
    return 0


PRINTABLE = bytes(33 + b % 94 for b in range(256))   # any byte -> '!'..'~' (never a newline)


def message(rng, i, max_size):
    """Message i: a header with its number, then random printable bytes, then a newline."""
    size = rng.randint(1, max_size)
    head = f"{i}:".encode()
    body = rng.randbytes(max(0, size - len(head))).translate(PRINTABLE)
    return head + body + b"\n"


async def client(host, port, count, seed, max_size):
    rng = random.Random(seed)
    reader, writer = await asyncio.open_connection(host, port)
    total = 0
    try:
        for i in range(count):
            msg = message(rng, i, max_size)
            writer.write(msg)
            await writer.drain()
            echo = await reader.readuntil(b"\n")
            if echo != msg:
                print(json.dumps({"messages": i, "bytes": total, "verified": False,
                                  "error": f"message {i}: sent {len(msg)} bytes {msg[:40]!r}..., "
                                           f"got {len(echo)} bytes {echo[:40]!r}..."}), flush=True)
                return 1
            total += len(msg)
        writer.write_eof()
        rest = await reader.read()
        if rest:
            print(json.dumps({"messages": count, "bytes": total, "verified": False,
                              "error": f"{len(rest)} unexpected bytes after the last echo"}), flush=True)
            return 1
    finally:
        await close(writer)
    print(json.dumps({"messages": count, "bytes": total, "verified": True}), flush=True)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("server")
    s.add_argument("--bind", default="0.0.0.0")
    s.add_argument("--port", type=int, required=True)
    c = sub.add_parser("client")
    c.add_argument("--to", required=True, help="IP:PORT")
    c.add_argument("--messages", type=int, default=10000)
    c.add_argument("--seed", type=int, default=1)
    c.add_argument("--max-size", type=int, default=2048)
    a = ap.parse_args()
    if a.mode == "server":
        return asyncio.run(serve(a.bind, a.port))
    host, _, port = a.to.rpartition(":")
    return asyncio.run(client(host, int(port), a.messages, a.seed, a.max_size))


if __name__ == "__main__":
    sys.exit(main())
