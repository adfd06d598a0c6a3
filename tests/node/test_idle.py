"""An idle process sleeps (issue 12's fixed cost; stack/drive.c, stack/park.c, lwIP patch
0127): a listener in accept, an established connection with nothing in flight on both
sides, and a process between its calls wake their threads only for lwIP's one-second
cyclic timers (ARP, reassembly, neighbour discovery), not for the stack thread's park
(every 2-8 ms while an application thread waits on the device) or lwIP's TCP timer
(every 25 ms while any connection exists, with nothing to time).

Counted by the kernel: the voluntary and involuntary context switches of all of a
process's threads (/proc/PID/task/*/status) over one idle second. Before the change a
receiver blocked in recv switched about 160 times in that second (the park's 125 and the
TCP timer's 40), its idle peer about 40.
"""
import os
import subprocess
import time

from conftest import BUILD

RTC = os.path.join(BUILD, "tests", "node", "rtc")
TIMEOUT = 90
IDLE_WAKES_MAX = 12  # in one second: lwIP's 1 s cyclic timers (a few phases) and slack
# In one second of uls_node_stop()'s wait: 20 looks, lwIP's TCP timer's rounds on the
# stack thread (25 ms: 40) while the FIN is unacknowledged, and slack; 5 ms naps were 200.
STOP_WAKES_MAX = 100


def switches(pid):
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        total += int(line.split()[1])
        except FileNotFoundError:
            pass
    return total


def idle_second(*procs):
    """The fewer of two consecutive seconds' switches, per process: a start that was late
    under load (the lease, the handshake) may still fall into the first."""
    a = [switches(p.p.pid) for p in procs]
    time.sleep(1.0)
    b = [switches(p.p.pid) for p in procs]
    time.sleep(1.0)
    c = [switches(p.p.pid) for p in procs]
    return [min(y - x, z - y) for x, y, z in zip(a, b, c)]


def start_server(tb, port, count):
    srv = tb.start([RTC, "server", "--ctl", tb.ctl(2), "--port", str(port), "--conns", "1",
                    "--count", str(count), "--mode", "pingpong"], name=f"rtc-server-{port}")
    for _ in range(100):
        if "listening" in srv.stdout():
            break
        assert srv.poll() is None, srv.stderr()
        time.sleep(0.05)
    return srv


def test_an_idle_listener_and_an_idle_connection_sleep(tb):
    """The server's thread waits in accept, then (the client connected and idles 5 s
    before its first message) in recv, on the device; the client's thread sleeps outside
    any call. An idle second (the fewer of two) costs each process at most
    IDLE_WAKES_MAX context switches; the ping-pong after it still runs."""
    srv = start_server(tb, 7380, 100)
    time.sleep(0.3)
    (accept_wakes,) = idle_second(srv)
    cli = tb.start([RTC, "client", "--ctl", tb.ctl(1), "--to", f"{tb.ip(2)}:7380", "--conns", "1",
                    "--count", "100", "--mode", "pingpong", "--idle-ms", "5000"],
                   name="rtc-client-7380")
    time.sleep(1.0)  # connected, the handshake's ACKs settled, both idle
    srv_wakes, cli_wakes = idle_second(srv, cli)
    print("accept", accept_wakes, "established: server", srv_wakes, "client", cli_wakes)
    assert cli.wait(TIMEOUT) == 0, (cli.stdout(), cli.stderr())
    assert srv.wait(TIMEOUT) == 0, (srv.stdout(), srv.stderr())
    assert accept_wakes <= IDLE_WAKES_MAX, accept_wakes
    assert srv_wakes <= IDLE_WAKES_MAX, srv_wakes
    assert cli_wakes <= IDLE_WAKES_MAX, cli_wakes


def _nft(tb, *cmd):
    subprocess.run(["ip", "netns", "exec", tb.kernel_ns, "nft", *cmd], check=True,
                   capture_output=True, text=True, timeout=10)


def test_a_process_waiting_for_the_ack_of_its_fin_at_exit_sleeps(tb):
    """uls_node_stop() lets a closed connection's FIN be acknowledged, for up to 3 s
    (stack/core.c). A ulsbench receiver on node 2 takes 64 KiB from a kernel sender whose
    namespace drops every segment with FIN from it (nftables, in the kernel peer's
    namespace only): the receiver's FIN is never acknowledged and it waits the 3 s out.
    Over one second of that wait its threads switch at most STOP_WAKES_MAX times: the
    retransmissions' rounds and a look every 50 ms, not a nap every 5 ms (about 200 a
    second before). It still waits (alive after 1.5 s) and still ends by itself."""
    port = 7390
    _nft(tb, "add", "table", "inet", "fxstop")
    try:
        _nft(tb, "add", "chain", "inet", "fxstop", "in",
             "{ type filter hook input priority 0 ; }")
        _nft(tb, "add", "rule", "inet", "fxstop", "in", "tcp", "sport", str(port),
             "tcp", "flags", "&", "fin", "==", "fin", "drop")
        srv = tb.server(2, port, count=1)
        cli = tb.kernel_client(f"{tb.ip(2)}:{port}", 64 * 1024)
        deadline = time.monotonic() + 20
        while '"verified": true' not in srv.stdout():
            assert srv.poll() is None and time.monotonic() < deadline, (srv.stdout(), srv.stderr())
            time.sleep(0.02)
        time.sleep(0.3)  # closed and stopping, its FIN unacknowledged
        a = switches(srv.p.pid)
        time.sleep(1.0)
        b = switches(srv.p.pid)
        still = srv.poll() is None
        rc = srv.wait(TIMEOUT)
        print("stopping receiver: context switches in one second", b - a)
        assert still, "the receiver did not wait for the ACK of its FIN"
        assert rc == 0, (srv.stdout(), srv.stderr())
        assert b - a <= STOP_WAKES_MAX, b - a
        cli.kill()
    finally:
        _nft(tb, "delete", "table", "inet", "fxstop")
