"""The shim's flushes across an event loop's round (issue 14): a poll/select or epoll round's
sends leave in one flush, the batch ends at the next wait, and _exit sends what a round
kept back. Run through cases.py, which imports them."""
import ctypes
import os
import select
import socket
import time

from casebase import ECHO, KEEP, KEPT, connect, counter


def echoes_here(socks, msgs, seconds=10):
    """Waits (bounded) until each socket's echo of its message is here, unread. Each wait
    asks only the sockets whose echo is not yet here, so it blocks, and a blocking wait
    drives the stack (uls_poll_drive) until frames come; there is no sleep. The stack
    thread then stays parked (drive.c, apps_drive: an application thread was inside
    within GRACE_MS) while the program makes its round, whatever the machine's load:
    its sends may keep their flush back. A sleep here (as before) let it go back to the
    device, and no send of the round then kept its flush."""
    fds = [s.fileno() for s in socks]
    here = set()
    deadline = time.monotonic() + seconds
    while len(here) < len(socks):
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError("echoes missing: %d of %d here" % (len(here), len(socks)))
        r, _, _ = select.select([fd for fd in fds if fd not in here], [], [], min(1, left))
        for fd in r:
            i = fds.index(fd)
            if socks[i].recv(64, socket.MSG_PEEK) == msgs[i]:
                here.add(fd)
    return fds


def round_wait(fds, use_poll, timeout_ms):
    """One wait of an event loop on fds for input: select(2) or poll(2). Returns the ready
    descriptors."""
    if use_poll:
        p = select.poll()
        for fd in fds:
            p.register(fd, select.POLLIN)
        return [fd for fd, _ in p.poll(timeout_ms)]
    return select.select(fds, [], [], timeout_ms / 1000)[0]


def read_answers(socks, back, seconds=10):
    """Reads each socket's echo of its answer ("x" or "y"), with waits that drive."""
    for i, s in enumerate(socks):
        deadline = time.monotonic() + seconds
        while back[i][-1:] not in (b"x", b"y") and time.monotonic() < deadline:
            r, _, _ = select.select([s], [], [], 1)
            if r:
                back[i] += s.recv(64)


def echo_round(socks, sent, rnd):
    """Round rnd of an event loop: a message on each socket (added to sent), then, with
    every echo here, the round's wait (poll on odd rounds, select on even ones), which
    reports them all. Returns the messages and the descriptors."""
    msgs = [b"%d.%d;" % (rnd, i) for i in range(len(socks))]
    for i, s in enumerate(socks):
        s.sendall(msgs[i])
        sent[i] += msgs[i]
    fds = echoes_here(socks, msgs)
    got = round_wait(fds, rnd % 2 == 1, 1000)
    assert len(got) == len(socks), got
    return msgs, fds


def case_select_a_rounds_sends_share_one_flush():
    """Issue 14 (uls_tx_batch) for select(2) and poll(2) driven programs (iperf3): after a
    select or poll that reported N sockets, the transmit flush of N-1 of the round's sends
    may wait for the round's last one, so that one system call takes the round's frames.
    Each round: a message to each of the N sockets' echo, waits that drive the stack until
    every echo is here (echoes_here), the round's wait (select or poll, in turn) reports
    the N, the program reads them and answers each with a send. Of the round's N sends
    exactly N-1 leave the batch's count: kept back (tx_flush_deferred), or flushed at once
    because the stack thread was not parked (tx_flush_batch_at_once); the last flushes
    them all (uls_tx_kept says nothing is kept). Every answer reaches the peer and comes
    back. Rounds go on until three shared one flush (none at once), 40 at most; at least
    one must have (on this 2-vCPU machine with three CPU burners: most rounds do). On the
    relay (no transmit queue to keep) no send keeps its flush or counts."""
    n = 4
    relay = os.environ.get("ULS_DATAPATH") == "relay"
    tx_kept = ctypes.CDLL(None).uls_tx_kept
    socks = [connect(ECHO) for _ in range(n)]
    sent = [bytearray() for _ in socks]
    back = [bytearray() for _ in socks]
    shared = rounds = at_once_total = 0
    for rnd in range(40):
        if shared >= 3:
            break
        rounds += 1
        msgs, fds = echo_round(socks, sent, rnd)
        d0, a0 = counter("tx_flush_deferred"), counter("tx_flush_batch_at_once")
        for i, s in enumerate(socks):
            back[i] += s.recv(64)
            assert back[i].endswith(msgs[i])
        steps = []  # per send: (kept back so far, flushed at once so far, kept now)
        for i, s in enumerate(socks):
            assert s.send(b"x") == 1
            sent[i] += b"x"
            steps.append((counter("tx_flush_deferred") - d0,
                          counter("tx_flush_batch_at_once") - a0, tx_kept()))
        d, a, kept = steps[-1]
        if relay:
            assert d == 0 and a == 0 and not kept, (rnd, steps)
        else:
            assert d + a == n - 1, "round %d: %d sends kept back, %d flushed at once of %d %r" % (
                rnd, d, a, n, steps)
            assert not kept, "round %d: the round's last send kept its flush back %r" % (
                rnd, steps)
        shared += d == n - 1
        at_once_total += a
        read_answers(socks, back)
        for i in range(n):
            assert back[i].endswith(b"x"), "round %d: socket %d's answer never came back" % (
                rnd, i)
    assert back == sent
    print("rounds %d, of which shared one flush %d; sends flushed at once %d" % (
        rounds, shared, at_once_total))
    if not relay:
        assert shared >= 1, "no round of %d shared one flush" % rounds
    for s in socks:
        s.close()


def case_select_a_rounds_batch_ends_at_the_next_wait():
    """The batch a select or poll opens (uls_tx_batch) ends with its round, at the thread's
    next poll, select or epoll_wait, whatever that wait does. Each round: the N sockets'
    echoes here (waits that drive, so that the stack thread is parked: a send of a batch
    would keep its flush back), the round's wait reports the N, and the program reads N-1
    of them and sends nothing. Its next wait (select or poll, timeout 0 or 1 s, in turn)
    reports the one left, at once: no new batch. The answer to that one is a send after
    the round: its flush is made at once, not kept for the last round's N sends (no
    tx_flush_deferred, uls_tx_kept says nothing is kept). Before, the batch lived on
    until a wait that drove the stack or a send that flushed the kept ones, and such a
    send waited up to the stack thread's grace (2 ms), every round here."""
    n = 3
    tx_kept = ctypes.CDLL(None).uls_tx_kept
    socks = [connect(ECHO) for _ in range(n)]
    sent = [bytearray() for _ in socks]
    back = [bytearray() for _ in socks]
    for rnd in range(12):
        msgs, fds = echo_round(socks, sent, rnd)
        last = rnd % n
        for i, s in enumerate(socks):
            if i != last:
                back[i] += s.recv(64)
                assert back[i].endswith(msgs[i])
        got = round_wait(fds, rnd % 4 >= 2, 0 if rnd % 3 == 0 else 1000)
        assert got == [fds[last]], (rnd, got, fds[last])
        back[last] += socks[last].recv(64)
        assert back[last].endswith(msgs[last])
        d0 = counter("tx_flush_deferred")
        assert socks[last].send(b"y") == 1
        kept = tx_kept()
        d = counter("tx_flush_deferred") - d0
        sent[last] += b"y"
        assert d == 0 and not kept, (
            "round %d: a send after the round kept its flush back (%d deferred, kept %d)" % (
                rnd, d, kept))
        read_answers([socks[last]], [back[last]])
        assert back[last].endswith(b"y"), "round %d: the answer never came back" % rnd
    assert back == sent
    for s in socks:
        s.close()


def case_exit_sends_what_a_round_kept_back():
    """Issue 14: _exit(2) right after a send whose transmit flush a round of an event loop
    kept back (uls_tx_batch) still sends it: the peer gets every byte the send took. The
    child is a fork child with sockets of its own: one to the peer's keep service (which
    keeps what it receives), one to its echo; its epoll_wait reports both (the first
    writable, the second's echo readable), it sends on the first and calls os._exit (no
    destructors run). Children one after another, until three have exited with their
    send's flush kept back or sixty have run; each tells by its exit status whether it
    kept it (0) or not (3: the stack thread was not parked, so the send flushed at once),
    read without entering the stack (uls_tx_kept: a counter read would take the core lock,
    and its leave would flush what was kept, so the exit would find nothing to send; the
    lead's review, stop 28). Every child's peer must get every byte: a child that kept its
    flush and exits without the exit flush fails here (shown by taking the flush out of
    the _exit interposer). On the relay nothing is ever kept (no transmit queue).
    Deviation of the test: on the direct path how many children kept is printed, not
    asserted: whether the stack thread is parked at the send depends on the scheduler
    (on this 2-vCPU machine at load 17, 0 of 20 children in one run of five)."""
    kept = children = 0
    for k in range(60):
        if kept >= 3:
            break
        children += 1
        token = b"exit-%d-%d" % (os.getpid(), k)
        payload = b"child %d sent this before _exit;" % k * 20
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                a = connect(KEEP)
                a.sendall(token + b"\n")
                b = connect(ECHO)
                for s in (a, b):
                    s.setblocking(False)
                ep = select.epoll()
                ep.register(a, select.EPOLLOUT)
                ep.register(b, select.EPOLLIN)
                b.send(b"1")
                deadline, got = time.monotonic() + 10, []
                while time.monotonic() < deadline:
                    got = ep.poll(1)
                    if len(got) == 2:
                        break
                    time.sleep(0.01)
                if len(got) == 2:
                    # The round: both events answered, the send's flush held back.
                    b.recv(16)
                    code = 2
                    tx_kept = ctypes.CDLL(None).uls_tx_kept
                    if a.send(payload) == len(payload):
                        code = 0 if tx_kept() else 3
            finally:
                os._exit(code)
        _, st = os.waitpid(pid, 0)
        rc = os.waitstatus_to_exitcode(st)
        assert rc in (0, 3), "child %d: %r" % (k, st)
        kept += rc == 0
        q = connect(KEPT)
        q.sendall(token + b" %d\n" % len(payload))
        line = q.makefile("rb").readline().split()
        q.close()
        assert int(line[0]) == len(payload), (
            "child %d: the peer got %s of the %d bytes send() took" % (
                k, line[0].decode(), len(payload)))
    print("children %d, of which kept their send's flush back %d" % (children, kept))
    if os.environ.get("ULS_DATAPATH") == "relay":
        assert kept == 0, kept
