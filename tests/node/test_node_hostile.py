"""Isolation on a ulsd node against a hostile process (issue 12): a process that speaks the
control protocol itself and writes raw frames into its own transmit path
(tests/node/hostile.c) holds no TAP descriptor, can do nothing on its rings but read and
write its own queue, cannot cancel another process's requests, and every frame it forges
is dropped and counted; mixed and churning traffic reaches only its owners. The suite's
other isolation cases (ports, releases, foreign addresses) are in test_node.py.
"""
import errno
import os
import signal
import socket
import subprocess
import time

import pytest

from conftest import (DATAPATH, HOSTILE, MIB, capture, check_client, delta, frames_moved,
                      hostile_lease, server_results, stop_capture, tx_dropped)

TRANSFER_TIMEOUT = 120
BIG = 256 * MIB


# --- 2b. isolation, hostile cases (issue 12) ----------------------------------------------

def fd_links(pid):
    """What each of a process's descriptors refers to."""
    d = f"/proc/{pid}/fd"
    links = []
    for fd in os.listdir(d):
        try:
            links.append(os.readlink(os.path.join(d, fd)))
        except OSError:
            pass   # closed meanwhile
    return links


def test_process_holds_no_tap_descriptor(tb):
    """A process on a node never holds a TAP descriptor: tun's ioctls check no capability
    once a file is attached, so a holder could remove the steering program, change offloads
    or detach its queue. A running server's /proc/PID/fd has no /dev/net/tun; it holds its
    data path instead (direct: two io_urings; relay: the ring pair's memfd), as ulsstat
    says. The control: ulsd's own descriptors do include the TAP."""
    port = 6260
    srv = tb.server(1, port)
    links = fd_links(srv.pid)
    assert "/dev/net/tun" not in links, links
    if DATAPATH == "direct":
        assert links.count("anon_inode:[io_uring]") >= 2, links
    else:
        assert any(x.startswith("/memfd:") for x in links), links
    eps = [e for e in tb.stat(1)["endpoints"] if e["pid"] == srv.pid]
    assert eps and all(e["datapath"] == DATAPATH for e in eps), eps
    ulsd = fd_links(tb.ulsd_pid(1))
    assert "/dev/net/tun" in ulsd, ulsd


@pytest.mark.direct
def test_direct_rings_allow_only_reads_and_writes_of_the_own_queue(tb):
    """ulsd restricted a direct process's io_urings before enabling them: a write to an
    ordinary descriptor and a NOP complete with EACCES, registering or updating files is
    refused with EACCES, tun's ioctls on the ring give ENOTTY, and the process has no
    /dev/net/tun descriptor. The control: a write of fixed file 0 (an ARP request from the
    node, which the transmit check passes) completes with its length.
    The receive ring, on which ulsd allowed the multishot read and buffer selection
    (issues 12 and 14), still refuses with EACCES: a multishot or plain read of an
    ordinary descriptor, a NOP, a write of one, a recv and PROVIDE_BUFFERS (opcodes not in
    the set), a read with IOSQE_IO_LINK (a flag not in it), registering or updating files
    and registering or unregistering a provided-buffer ring; a write with buffer
    selection the kernel itself refuses (EOPNOTSUPP: no write selects a buffer)."""
    out = tb.hostile(1, "rings", tb.kernel_ip)
    got = dict(line.split() for line in out.splitlines())
    # 42 octets of ARP, behind a 10-octet virtio-net header on a node with offloads
    assert got.pop("fixed_write") in ("42", "52"), out
    acc = str(-errno.EACCES)
    mshot = {}
    if got.get("mshot") == "1":
        mshot = {k: acc for k in ("rx_mshot_plain", "rx_read_plain", "rx_nop",
                                  "rx_write_plain", "rx_recv", "rx_provide", "rx_link",
                                  "rx_register_files", "rx_files_update",
                                  "rx_register_pbuf", "rx_unregister_pbuf")}
        mshot["rx_write_select"] = str(-errno.EOPNOTSUPP)
    assert got == {"plain_write": acc, "nop": acc,
                   "register_files": acc, "files_update": acc,
                   "tun_ioctl": str(-errno.ENOTTY), "tun_fds": "0",
                   "mshot": got.get("mshot"), **mshot}, out
    # A kernel with the multishot read (Linux 6.7) must have had it allowed: else the
    # receive ring's checks above did not run.
    major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    assert got["mshot"] == ("1" if (major, minor) >= (6, 7) else "0"), out


@pytest.mark.direct
def test_direct_ring_cancellations_reach_no_other_process_request(tb):
    """ulsd's restrictions allow IORING_OP_ASYNC_CANCEL (for libuls's close, netif/qring.c
    rx_cancel), reasoned to reach only the requests of the ring it is submitted on. A
    hostile process on node 1 submits, on both its rings, cancellations aimed at
    another process's requests: by every user_data libuls gives its reads (0..63, the
    multishot and wake-up tags) and writes (0..255), ANY, by fixed files 0-3 (the only
    descriptors a restricted request names: its own) and by opcode (read, write,
    multishot read), from before until after a kernel peer streams 256 MiB to a victim on
    node 1 (direct
    rings of its own, whose reads carry exactly those user_data): the stream completes
    verified, and none of the hostile's cancellations found a request (every one ENOENT,
    or a count of 0, or EBADF for a fixed file it has not). The control: a read of its own
    queue is not found from its other ring (ENOENT) and is cancelled from its own by each
    key (user_data: 0; ANY, fixed file 0, opcode: a count of 1; the read ends ECANCELED);
    IORING_REGISTER_SYNC_CANCEL is refused (EACCES)."""
    port = 6265
    victim = tb.server(1, port, count=1)
    h = tb.start([HOSTILE, tb.ctl(1), "cancel", str(TRANSFER_TIMEOUT + 60)], name="hostile-cancel")
    deadline = time.monotonic() + 20
    while "ready" not in h.stdout():
        assert h.poll() is None and time.monotonic() < deadline, (h.stdout(), h.stderr())
        time.sleep(0.05)
    hostile_lease(h.stderr())
    got = dict(line.split(None, 1) for line in h.stdout().splitlines() if line != "ready")
    canceled = str(-errno.ECANCELED)
    assert got == {"cross_ring": f"{-errno.ENOENT} {canceled}", "own_data": f"0 {canceled}",
                   "own_any": f"1 {canceled}", "own_fd": f"1 {canceled}",
                   "own_op": f"1 {canceled}", "sync_cancel": str(-errno.EACCES)}, h.stdout()
    client = tb.kernel_client(f"{tb.ip(1)}:{port}", BIG, "send", name="kclient-cancel")
    check_client(client, TRANSFER_TIMEOUT)
    # The whole transfer ran while the cancellations went on.
    assert h.poll() is None, ("the hostile process ended before the transfer", h.stdout())
    (res,) = server_results(victim, 1)
    assert res["verified"] and res["bytes"] == BIG
    h.kill(signal.SIGINT)  # it stops between rounds and reports
    assert h.wait(10) == 0, h.stderr()
    last = h.stdout().splitlines()[-1].split()
    c = dict(zip(last[0::2], map(int, last[1::2])))
    print(f"\n  {c}")
    assert c["aimed"] >= 1000 and c["found"] == 0 and c["other"] == 0, c
    assert c["none"] + c["ebadf"] == c["aimed"], c


SPOOF_KINDS = ("src_mac", "src_ip", "port", "arp", "proto")


def test_forged_frames_are_all_dropped_and_counted_by_reason(tb):
    """Frames with forged sources that a process writes into its transmit path (its queue,
    or its ring) are all dropped and counted, N of N by reason: another MAC (src_mac),
    another address (src_ip), a live victim's port (port; every other one behind IP options
    that read as the process's own port where a header without options has the ports: the
    BPF transmit check reads the ports at the header's real end), an ARP reply claiming the
    kernel peer's address (arp), IP protocol 47 (proto). A capture on the bridge sees none
    of them.
    The control: the same process's N UDP datagrams from a port it holds pass and are on
    the wire. On the direct path the process's own queue counts them too, while it lives
    (queue.Q.tx_dropped.REASON = N, tx_passed = N)."""
    n, victim, dport = 100, 6270, 9
    tb.server(1, victim)
    pcap = os.path.join(tb.outdir, "spoof.pcap")
    mac1 = tb.env["TB_NODE1_MAC"]
    cap = capture(tb, pcap, f"ether src {mac1} or ether src 02:75:6c:00:00:63", "tcpdump-spoof")
    before = tb.counters(1)
    h = tb.start([HOSTILE, tb.ctl(1), "spoof", str(n), str(victim), tb.kernel_ip, str(dport)],
                 name="hostile-spoof",
                 env={"HOSTILE_HOLD": "10"})
    deadline = time.monotonic() + 20
    while "holding" not in h.stdout():
        assert h.poll() is None and time.monotonic() < deadline, (h.stdout(), h.stderr())
        time.sleep(0.05)
    q = hostile_lease(h.stderr())
    during = tb.stat(1)
    h.kill()
    stop_capture(cap)
    after = tb.counters(1)
    words = dict((w[1], int(w[2])) for w in (line.split() for line in h.stdout().splitlines())
                 if w[0] == "queued")
    own = int(h.stdout().split("own_port")[1].split()[0])
    assert words == {**{k: n for k in SPOOF_KINDS}, "control": n}, h.stdout()
    for k in SPOOF_KINDS:
        assert tx_dropped(before, after, k) == n, (k, tx_dropped(before, after, k))
    if DATAPATH == "direct":
        (mine,) = [x for x in during["queues"] if x["queue"] == q]
        assert mine["pid"] == h.pid, mine
        assert mine["tx_dropped"] == {**{k: n for k in SPOOF_KINDS}, "no_owner": 0,
                                      "shared_peer": 0, "icmp": 0, "size": 0}, mine
        assert mine["tx_passed"] == n, mine

    def seen(flt):
        r = subprocess.run(["tcpdump", "-r", pcap, "-nn", flt], capture_output=True, text=True,
                           timeout=10)
        assert r.returncode == 0, r.stderr
        return len(r.stdout.splitlines())
    assert seen(f"udp and src port {own} and dst port {dport}") == n
    assert seen("ether src 02:75:6c:00:00:63") == 0
    assert seen("src host 198.18.0.99") == 0
    assert seen(f"tcp and src port {victim}") == 0
    assert seen(f"arp and arp[6:2] == 2 and arp[14:4] == {int.from_bytes(socket.inet_aton(tb.kernel_ip), 'big')}") == 0
    assert seen("ip proto 47") == 0


# A kernel sender of UDP datagrams: warm-up to an unowned port (ARP), then COUNT datagrams
# round-robin over the ports, each carrying its port and sequence number.
MIXED_SENDER = r"""
import socket, struct, sys, time
dst, count = sys.argv[1], int(sys.argv[2])
ports = [int(p) for p in sys.argv[3].split(",")]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.sendto(b"warm-up", (dst, ports[-1]))
time.sleep(0.5)
for i in range(count):
    p = ports[i % len(ports)]
    s.sendto(struct.pack("!HI", p, i) + b"x" * (i % 200), (dst, p))
    if i % 500 == 499:
        time.sleep(0.01)
print("sent", count, flush=True)
"""


def test_mixed_run_of_10000_frames_reaches_only_their_owners(tb):
    """In a mixed run no process receives another's frame: four processes on node 1 each
    hold a UDP port; a kernel peer sends 10,000 datagrams round-robin to the four ports and
    to a port nobody holds, while a 64 MiB TCP stream runs to a fifth process of the node.
    Each holder receives exactly its 2,000 datagrams and nothing else (no TCP segment, no
    datagram of another port); the stream verifies."""
    ports = [6600, 6601, 6602, 6603]
    unowned, count = 6604, 10000
    per_port = count // (len(ports) + 1)
    sinks = [tb.start([HOSTILE, tb.ctl(1), "sink", str(p), "30", str(per_port)], name=f"sink-{p}")
             for p in ports]
    for snk in sinks:
        deadline = time.monotonic() + 10
        while "ready" not in snk.stdout():
            assert snk.poll() is None and time.monotonic() < deadline, snk.stderr()
            time.sleep(0.02)
        hostile_lease(snk.stderr())
    srv = tb.server(1, 6605, count=1)
    stream = tb.kernel_client(f"{tb.ip(1)}:6605", 64 * MIB, "send", name="kclient-mixed")
    sender = tb.kernel_python(MIXED_SENDER, tb.ip(1), count, ",".join(map(str, ports + [unowned])),
                              name="mixed-sender")
    assert sender.wait(60) == 0, sender.stderr()
    check_client(stream, TRANSFER_TIMEOUT)
    server_results(srv, 1)
    for p, snk in zip(ports, sinks):
        assert snk.wait(40) == 0, snk.stderr()
        got = dict(zip(snk.stdout().split()[-8::2], map(int, snk.stdout().split()[-7::2])))
        assert got["foreign"] == 0, (p, snk.stdout())
        assert got["mine"] == per_port, (p, snk.stdout())


# A kernel prober: UDP datagrams to every port of the churn, round-robin, about one per port
# per millisecond, until the file argv[3] exists (at most 90 s).
CHURN_PROBER = r"""
import os, socket, sys, time
dst, ports, stop = sys.argv[1], [int(p) for p in sys.argv[2].split(",")], sys.argv[3]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
n, t_end = 0, time.monotonic() + 90
print("probing", flush=True)
while not os.path.exists(stop) and time.monotonic() < t_end:
    for p in ports:
        s.sendto(b"probe", (dst, p))
        n += 1
    time.sleep(0.001)
print("sent", n, flush=True)
"""


def test_churn_of_1000_short_lived_processes_delivers_nothing_to_the_wrong_one(tb, capsys):
    """1,000 processes come and go on node 1, four at a time, each with a lease of its own
    (a queue of its own on the direct path: a recycled one), a UDP port (each of the four
    slots alternates between two ports) and 20 ms of life, while a kernel peer probes all
    eight ports every millisecond, also between one holder's end and the next one's start.
    No process receives a frame that is not for its own port; most receive probes for
    theirs (the control: delivery works); the churn ends within 150 s. On the direct path
    every lease is direct and every queue is renewed before its next owner gets it."""
    children, parallel, base = 1000, 4, 6800
    ports = [base + i for i in range(2 * parallel)]
    stop = os.path.join(tb.outdir, "churn.stop")
    prober = tb.kernel_python(CHURN_PROBER, tb.ip(1), ",".join(map(str, ports)), stop, name="prober")
    deadline = time.monotonic() + 5
    while "probing" not in prober.stdout():
        assert prober.poll() is None and time.monotonic() < deadline, prober.stderr()
        time.sleep(0.02)
    before = tb.counters(1)
    try:
        out = tb.hostile(1, "churn", children, parallel, base, 20, timeout=180)
    finally:
        with open(stop, "w"):
            pass
    prober.wait(10)
    after = tb.counters(1)
    w = out.split()
    got = dict(zip(w[0::2], w[1::2]))
    with capsys.disabled():
        print(f"\nchurn ({DATAPATH}): {out.strip()}; queues recycled "
              f"{delta(before, after, 'dp_queues_recycled') if DATAPATH == 'direct' else '-'}")
    assert int(got["children"]) == children and int(got["failed"]) == 0, out
    assert int(got["foreign"]) == 0, out
    assert int(got["got_own"]) >= children // 2, out
    # A bound on the run, not a speed target: 16 s on a quiet machine, 58-62 s on both
    # 6ceee84 and its successor at load average 12-14 (helper fixed35), where 60 s failed.
    assert float(got["seconds"]) < 150, out
    if DATAPATH == "direct":
        assert int(got["direct"]) == children, out
        assert delta(before, after, "dp_queues_recycled") >= children, (before, after)
        assert delta(before, after, "dp_queues_retired") == 0


@pytest.mark.direct
def test_processes_of_one_node_reach_each_other_through_the_node_address(tb):
    """On the direct path, processes of one node talk to each other through the node's own
    address: a client on node 1 streams 16 MiB to a server on node 1 at node 1's address,
    verified. The transmit check sends their frames back into the TAP, where steering
    delivers them; ulsd relays none of them."""
    port = 6280
    srv = tb.server(1, port, count=1)
    before = tb.counters(1)
    check_client(tb.client(1, f"{tb.ip(1)}:{port}", 16 * MIB, "send", name="same-node"), TRANSFER_TIMEOUT)
    (res,) = server_results(srv, 1)
    assert res["bytes"] == 16 * MIB
    after = tb.counters(1)
    moved = frames_moved(before, after)
    # At least the super-segments that 16 MiB takes (64 KiB each), each passed by the
    # transmit check and steered back (two counts); ulsd relayed almost none of them.
    assert moved >= 2 * (16 * MIB // (64 * 1024)) and \
        delta(before, after, "data_frames_relayed") < 0.01 * moved, (before, after)
