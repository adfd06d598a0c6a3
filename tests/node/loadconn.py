"""Load programs for tests/load (test_load.py, compare.py): one file, run under `ulsrun` (its
sockets are ulstack's) or as is (the kernel's), the way a new user would write them:
python's selectors (epoll) and plain blocking sockets.

  server PORT [--report FILE] [--stall]
                                  echo server: every byte it reads goes back (--stall:
                                  it accepts and never reads). On SIGUSR1 it writes one
                                  JSON line to FILE (descriptors, heap, libuls
                                  counters, connections open and served); SIGTERM ends it.
  hold IP PORT N [--gate FILE]    N concurrent connections (at most 512 connects at once),
                                  then one verified round trip on each while all are open;
                                  prints {"phase": "open", ...}, waits for FILE to exist,
                                  closes all, prints {"phase": "closed", ...}.
  fill IP PORT N S                N connections to a `server --stall` (which never reads),
                                  each sending until nothing moves for 1 s (or S s): one
                                  JSON line with the heap then, and what each sent.
  churn IP PORT N                 N short connections one after another: connect, one
                                  request, its echo verified, the server's close, close;
                                  prints one JSON line.

Every message carries the process, connection and a counter, so an echo that reaches the
wrong connection or comes back altered is caught. Exit 1 on any failure.
"""
import ctypes
import ctypes.util
import errno
import json
import os
import selectors
import signal
import socket
import sys
import time

from ulscounters import uls_counters


# Two descriptors held in reserve, so that counting descriptors (which opens one) works
# at the descriptor limit too.
_reserve = [os.open("/dev/null", os.O_RDONLY) for _ in range(2)]


def nfds():
    """Descriptors open (the reserve included, the count's own not)."""
    global _reserve
    for fd in _reserve:
        os.close(fd)
    try:
        n = len(os.listdir("/proc/self/fd")) - 1
    finally:
        _reserve = [os.open("/dev/null", os.O_RDONLY) for _ in range(2)]
    return n + len(_reserve)


class Mallinfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                 "uordblks", "fordblks", "keepcost")]


_libc = ctypes.CDLL(ctypes.util.find_library("c"))
_libc.mallinfo2.restype = Mallinfo2


def heap():
    """Bytes the C library's malloc has handed out (lwIP's pcbs and buffers among them,
    MEM_LIBC_MALLOC), in use now, and the process's resident set."""
    m = _libc.mallinfo2()
    with open("/proc/self/statm") as f:
        rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return {"heap_in_use": m.uordblks + m.hblkhd, "rss": rss}


def emit(d):
    print(json.dumps(d), flush=True)


def serve(port, report, stall=False):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("0.0.0.0", port))
    ls.listen(4096)
    ls.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(ls, selectors.EVENT_READ, None)
    state = {"open": 0, "served": 0, "accept_errors": {}, "report": False, "stop": False}
    stalled = []

    def on_usr1(*_):
        state["report"] = True

    def on_term(*_):
        state["stop"] = True

    signal.signal(signal.SIGUSR1, on_usr1)
    signal.signal(signal.SIGTERM, on_term)
    print(f"listening on port {port}", file=sys.stderr, flush=True)
    while not state["stop"]:
        if state["report"]:
            state["report"] = False
            d = {"fds": nfds(), "open": state["open"], "served": state["served"],
                 "accept_errors": state["accept_errors"], **heap(), "counters": uls_counters()}
            with open(report + ".tmp", "w") as f:
                f.write(json.dumps(d) + "\n")
            os.rename(report + ".tmp", report)
        try:
            events = sel.select(0.2)
        except InterruptedError:
            continue
        for key, _ in events:
            if key.data is None:
                for _ in range(64):
                    try:
                        c, _ = ls.accept()
                    except BlockingIOError:
                        break
                    except OSError as e:
                        n = errno.errorcode.get(e.errno, str(e.errno))
                        state["accept_errors"][n] = state["accept_errors"].get(n, 0) + 1
                        break
                    c.setblocking(False)
                    state["open"] += 1
                    if stall:
                        stalled.append(c)  # never read: its receive window fills
                        continue
                    sel.register(c, selectors.EVENT_READ, "c")
                continue
            c = key.fileobj
            try:
                b = c.recv(4096)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                b = b""
            if b:
                # Requests are short (one segment): a full send buffer is a failure to see.
                c.sendall(b)
                state["served"] += 1
                if b.endswith(b":churn\n"):
                    # A short connection: the server closes first, as an HTTP/1.0 server
                    # does, so that TIME-WAIT stays here and the client's port is free at
                    # once (a client that closes first holds its port for TIME-WAIT's
                    # 60 s: 28,232 ports give at most 470 connections/s to one server).
                    sel.unregister(c)
                    c.close()
                    state["open"] -= 1
            else:
                sel.unregister(c)
                c.close()
                state["open"] -= 1


def hold(ip, port, n, gate):
    emit({"phase": "start", "fds": nfds(), **heap(), "counters": uls_counters()})
    t0 = time.monotonic()
    sel = selectors.DefaultSelector()
    socks, pending, errors = [], {}, {}
    i = 0
    # Connects in flight are bounded, as a server's SYN backlog is.
    while i < n or pending:
        while i < n and len(pending) < 512:
            try:
                s = socket.socket()
            except OSError as e:
                # EMFILE: the descriptor limit (the test reports which and how many).
                name = errno.errorcode.get(e.errno, str(e.errno))
                errors[name] = errors.get(name, 0) + 1
                i += 1
                continue
            s.setblocking(False)
            try:
                s.connect((ip, port))
            except BlockingIOError:
                pass
            except OSError as e:
                # EMFILE and the like: the test reports which and how many.
                errors[errno.errorcode.get(e.errno, str(e.errno))] = errors.get(errno.errorcode.get(e.errno, str(e.errno)), 0) + 1
                s.close()
                i += 1
                continue
            pending[s] = i
            sel.register(s, selectors.EVENT_WRITE, i)
            i += 1
        for key, _ in sel.select(10):
            s = key.fileobj
            sel.unregister(s)
            del pending[s]
            err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                name = errno.errorcode.get(err, str(err))
                errors[name] = errors.get(name, 0) + 1
                s.close()
            else:
                socks.append(s)
        if time.monotonic() - t0 > 300:
            emit({"phase": "error", "why": "connect phase over 300 s", "open": len(socks)})
            return 1
    t_conn = time.monotonic() - t0
    # One verified round trip on each, all open at once.
    t1 = time.monotonic()
    pid = os.getpid()
    want = {}
    for k, s in enumerate(socks):
        msg = f"{pid}:{k}:hold\n".encode()
        want[s] = msg
        try:
            s.setblocking(True)
            s.sendall(msg)
            s.setblocking(False)
        except OSError as e:
            name = "send_" + errno.errorcode.get(e.errno, str(e.errno))
            errors[name] = errors.get(name, 0) + 1
            continue
        sel.register(s, selectors.EVENT_READ, k)
    got = {s: b"" for s in socks}
    bad = 0
    left = len(sel.get_map())
    while left and time.monotonic() - t1 < 120:
        for key, _ in sel.select(10):
            s = key.fileobj
            try:
                b = s.recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                b = b""
            got[s] += b
            if not b or len(got[s]) >= len(want[s]):
                sel.unregister(s)
                left -= 1
                if got[s] != want[s]:
                    bad += 1
    verified = sum(1 for s in socks if got[s] == want[s])
    t_rt = time.monotonic() - t1
    emit({"phase": "open", "open": len(socks), "verified": verified, "bad": bad,
          "unanswered": left, "errors": errors, "fds": nfds(), "connect_s": round(t_conn, 3),
          "roundtrip_s": round(t_rt, 3), **heap(), "counters": uls_counters()})
    if gate:
        deadline = time.monotonic() + 120
        while not os.path.exists(gate) and time.monotonic() < deadline:
            time.sleep(0.05)
    t2 = time.monotonic()
    for s in socks:
        s.close()
    emit({"phase": "closed", "fds": nfds(), "close_s": round(time.monotonic() - t2, 3),
          **heap(), "counters": uls_counters()})
    return 0 if verified == n else 1


def fill(ip, port, n, seconds):
    """n connections to a server that never reads: each sends until its send buffer and
    the peer's receive window are full (EAGAIN for a whole second) or seconds pass."""
    st = {"fds": nfds(), **heap()}
    socks = [socket.create_connection((ip, port), timeout=10) for _ in range(n)]
    for s in socks:
        s.setblocking(False)
    sent = [0] * n
    chunk = b"x" * 65536
    t0 = time.monotonic()
    last = [t0] * n
    while time.monotonic() - t0 < seconds:
        busy = False
        for i, s in enumerate(socks):
            try:
                k = s.send(chunk)
                sent[i] += k
                last[i] = time.monotonic()
                busy = True
            except BlockingIOError:
                pass
        if not busy:
            if all(time.monotonic() - t > 1.0 for t in last):
                break
            time.sleep(0.01)
    h = heap()
    emit({"phase": "full", "connections": n, "sent": sent, "start": st, "fds": nfds(), **h,
          "counters": uls_counters()})
    time.sleep(float(os.environ.get("LOAD_FILL_HOLD", "2")))
    for s in socks:
        s.close()
    return 0


def churn(ip, port, n):
    pid = os.getpid()
    ok, errors = 0, {}
    t0 = time.monotonic()
    for k in range(n):
        msg = f"{pid}:{k}:churn\n".encode()
        try:
            with socket.create_connection((ip, port), timeout=10) as s:
                s.sendall(msg)
                got = b""
                while True:  # the echo, then the server's end-of-file
                    b = s.recv(4096)
                    if not b:
                        break
                    got += b
            if got == msg:
                ok += 1
            else:
                errors["mismatch"] = errors.get("mismatch", 0) + 1
        except OSError as e:
            name = errno.errorcode.get(e.errno, type(e).__name__) if e.errno else type(e).__name__
            errors[name] = errors.get(name, 0) + 1
        if time.monotonic() - t0 > 600:
            break
    dt = time.monotonic() - t0
    emit({"phase": "churn", "count": n, "ok": ok, "errors": errors, "seconds": round(dt, 3),
          "per_s": round(ok / dt, 1) if dt else 0, "fds": nfds(), **heap(),
          "counters": uls_counters()})
    return 0 if ok == n else 1


def main(argv):
    if argv[0] == "server":
        report = argv[argv.index("--report") + 1] if "--report" in argv else "/dev/null"
        return serve(int(argv[1]), report, "--stall" in argv) or 0
    if argv[0] == "hold":
        gate = argv[argv.index("--gate") + 1] if "--gate" in argv else None
        return hold(argv[1], int(argv[2]), int(argv[3]), gate)
    if argv[0] == "fill":
        return fill(argv[1], int(argv[2]), int(argv[3]), float(argv[4]))
    if argv[0] == "churn":
        return churn(argv[1], int(argv[2]), int(argv[3]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
