"""The shim across fork: listeners both processes accept on, and connected sockets that
stay with the parent, move to the child (with data in flight, or while a claim is
interrupted by a signal). Run through cases.py, which imports them."""
import errno
import fcntl
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import termios
import threading
import time

from casebase import (ECHO, KIP, LATE, NIP, SINK, UDPECHO, ask_connector, connect,  # noqa: F401
                      connector_result, echo_round_trip, interrupted, listener, serve_echo)


def case_fork_listener_both_accept():
    """fork(2): the listener works in parent and child; new connections spread. (Each
    connection's line comes back to the peer, which counts those that match.)"""
    ls, port = listener(64)
    r, w = os.pipe()
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    n = 0
    # Each process announces that it accepts here before the connector is asked: a
    # nonblocking accept (EAGAIN) adopts the child's copy (it joins the port's group, a
    # round trip to ulsd) and sends ulsd the notice, which from then on spreads new
    # connections over both (each by a hash of its addresses and ports: all 20 on one side
    # has a chance of 2 ** -19). Under load a child whose first wait came late found all
    # 20 taken by the parent (seen once in a full make check, and the pause below alone
    # is a margin, not a guarantee).
    ls.settimeout(0)
    try:
        ls.accept()[0].close()
    except BlockingIOError:
        pass
    ls.settimeout(3)
    deadline = time.monotonic() + 8
    # Both processes accept until the connector is done (the parent asks for 20).
    if pid:
        assert os.read(ready_r, 1) == b"r"
        time.sleep(0.2)
        c = ask_connector(port, 20)
    else:
        os.write(ready_w, b"r")
        c = None
    while time.monotonic() < deadline:
        try:
            a, _ = ls.accept()
        except socket.timeout:
            break
        a.sendall(a.makefile("rb").readline())
        a.close()
        n += 1
        if pid and n >= 20:
            break
    if pid == 0:
        os.write(w, b"%d\n" % n)
        os._exit(0)
    total = connector_result(c)
    os.waitpid(pid, 0)
    child_n = int(os.read(r, 100))
    assert total == 20, total
    assert n + child_n == 20 and n > 0 and child_n > 0, (n, child_n)


def case_fork_connected_child_closes():
    """fork(2): the child closes its copy of a connection it never used and exits; the
    parent's connection goes on."""
    s = connect(ECHO)
    pid = os.fork()
    if pid == 0:
        s.close()
        os._exit(0)
    _, st = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(st) == 0, st
    for i in range(10):
        s.sendall(b"%d" % i)
        assert s.recv(10) == b"%d" % i


def _child(body):
    """Run body() in a fork child; its exit status says how it went (0: passed)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            body()
            code = 0
        except BaseException:
            import traceback
            traceback.print_exc()
        finally:
            os._exit(code)
    return pid


def case_fork_connected_moves_to_child():
    """fork(2), the inetd pattern: the parent closes its copy of a connection, the child
    goes on with it. Bytes the parent's program had not read yet reach the child's, and the
    connection carries 8 MiB more both ways, verified."""
    s = connect(ECHO)
    s.sendall(b"before fork")
    # The echo is back, unread: it must move with the connection.
    assert select.select([s], [], [], 10)[0] == [s], "no echo within 10 s"

    def child():
        got = b""
        while len(got) < 11:
            got += s.recv(11 - len(got))
        assert got == b"before fork", got
        echo_round_trip(s, 8 << 20)
        s.close()

    pid = _child(child)
    s.close()                 # hands the connection over
    _, st = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(st) == 0, st


def case_fork_connected_keeps_its_buffer_sizes_and_user_timeout():
    """A connection that moves to the child keeps the receive window's cap, the send
    buffer's and the user timeout its socket had (SO_RCVBUF, patch 0137; SO_SNDBUF;
    TCP_USER_TIMEOUT, patch 0138; the state handed over carries them, stack/hoffstate.h
    version 5): the child's socket reports them, and the connection carries 4 MiB both
    ways, verified."""
    s = connect(ECHO)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 98304)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, 7777)
    assert s.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) == 131072
    assert s.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) == 196608

    def child():
        echo_round_trip(s, 4 << 20)   # the child's first call takes the connection over
        got = s.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        assert got == 131072, "the moved connection's SO_RCVBUF reads %d" % got
        got = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT)
        assert got == 7777, "the moved connection's TCP_USER_TIMEOUT reads %d" % got
        got = s.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
        assert got == 196608, "the moved connection's SO_SNDBUF reads %d" % got
        s.close()

    pid = _child(child)
    s.close()                 # hands the connection over
    _, st = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(st) == 0, st


def case_fork_connected_moves_with_data_in_flight():
    """The parent queues 4 MiB and closes at once, most of it unacknowledged; the child
    sends 4 MiB more and half-closes. The peer's hash of all it read must be that of the
    8 MiB in order: nothing lost or doubled across the move."""
    s = connect(SINK)
    first, second = os.urandom(4 << 20), os.urandom(4 << 20)
    s.sendall(first)

    def child():
        s.sendall(second)
        s.shutdown(socket.SHUT_WR)
        line = s.makefile("rb").readline().strip()
        import hashlib
        assert line == hashlib.sha256(first + second).hexdigest().encode(), line

    pid = _child(child)
    s.close()
    _, st = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(st) == 0, st


def case_fork_connected_parent_keeps_using():
    """The child asks for the connection while the parent still uses it: the parent keeps
    it until it closes its copy, then the child has it (docs/compatibility.md)."""
    s = connect(ECHO)
    r, w = os.pipe()

    def child():
        os.write(w, b"asked")
        s.sendall(b"child")  # waits until the parent has let go
        got = b""
        while len(got) < 5:
            got += s.recv(5 - len(got))
        assert got == b"child", got

    pid = _child(child)
    assert os.read(r, 10) == b"asked"
    time.sleep(0.2)
    for i in range(5):
        s.sendall(b"%d" % i)
        assert s.recv(10) == b"%d" % i
    s.close()
    _, st = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(st) == 0, st


def case_fork_connected_claim_interrupted_by_signal():
    """A signal interrupts the child's wait for the connection (the handler raises, so
    Python does not retry, as C without SA_RESTART); the parent still has it, and the
    child's next call, after the parent closed, gets it with nothing lost."""
    s = connect(ECHO)

    def child():
        assert interrupted(lambda: s.recv(100), 0.3, "the wait was not interrupted") < 1.0
        got = b""
        while len(got) < 7:
            got += s.recv(7 - len(got))
        assert got == b"handoff", got
        s.sendall(b"after")
        got = b""
        while len(got) < 5:
            got += s.recv(5 - len(got))
        assert got == b"after", got

    pid = _child(child)
    time.sleep(0.6)           # the child's wait was interrupted meanwhile
    for i in range(3):
        s.sendall(b"%d" % i)
        assert s.recv(10) == b"%d" % i
    s.sendall(b"handoff")     # its echo moves with the connection
    time.sleep(0.2)
    s.close()
    _, st = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(st) == 0, st
