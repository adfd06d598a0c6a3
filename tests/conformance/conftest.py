"""Conformance suite: Scapy plays a TCP/IP peer of one ulstack node on a private Ethernet.

Topology (built by tests/testbed/testbed with TB_NAME=ulsconf; nothing in the root
namespace is configured or sent on, pytest only enters the node namespace with setns):

    root namespace: untouched (pytest starts here and returns here before teardown)

    netns "ulsconf" (TB_NETNS)
    +------------------------------------------------------------------+
    |  ulsnode (ulstack, lwIP core)        pytest + Scapy (this file)   |
    |  198.18.0.1  02:75:6c:00:00:01       198.18.0.200 (TB_SCAPY_IP)   |
    |  services: tcp 7 echo, 9 discard,    02:75:6c:00:00:c8 (fake MAC) |
    |  10 hold, 13 greet+close, 19 source  ARP responder thread answers |
    |  udp 7 echo; --stats UNIX socket     who-has 198.18.0.200         |
    |        | tap fd                            | AF_PACKET             |
    |     [uls1]                             [scapy0] no IP, promisc    |
    |        |                                   | veth                  |
    |        |                              [scapy0-br]                 |
    |  +-----+-----------------------------------+-----------------+    |
    |  |                 br0: L2 only, STP off                     |    |
    |  +-----------------------------------------------------------+    |
    +------------------------------------------------------------------+
    (the testbed's two Linux kernel peers also hang off br0; this suite does not use them)

Scapy's source MAC is fake: frames to it never reach the namespace's kernel, so the kernel
never answers (or RSTs) the segments the node sends to 198.18.0.200.

Every test runs twice, once per deployment (DEPLOYMENTS below): first against the default
deployment, where ulsd owns uls1 (with segmentation offload, its default) and ulsnode is a
process that joined it over TB_NODE1_CTL, so ARP, ICMP echo, resets for unmatched segments
and malformed frames are ulsd's to handle; then against ulsnode alone on uls1 ("own"), as
drawn above. A test's id ends in [ulsd] or [own].

IPv6 (docs/ipv6.md): the ulsd deployment's testbed is up with --ipv6, so ulsd answers for
TB_NODE1_IP6 (2001:db8:0:1::1) and its link-local address; Scapy speaks from TB_SCAPY_IP6.
The processes there carry no IPv6 yet, so the tests of the node's own answers (the node6
fixture) run in the ulsd deployment only, and those of a process's IPv6 (stack6,
test_rfc8200_ipv6_stack.py) in the own deployment only.

Environment: ULS_BUILDDIR (apps/ulsnode lives there), ULS_SRCDIR (tests/testbed/testbed),
ULS_CAPTURE_DIR (where each test's pcap goes; default $ULS_BUILDDIR/tests/conformance/
captures), ULS_UPDATE_PCAPS=1 (tests that produce a curated capture rewrite it in pcaps/).

The IPv4 reassembly timeout is REASS_TIMEOUT_S (not the 30 s default) in both deployments,
so that the reassembly tests can watch datagrams expire: ulsd gets ULSD_REASS_TIMEOUT_MS,
ulsnode ULS_REASS_TIMEOUT. Likewise a lowered path MTU ages after PMTU_AGE_S (ULS_PMTU_AGE),
not 10 minutes.

IPv6 (docs/ipv6.md): a node of its own also has NODE_IP6 (ulsnode --ip6) and the link-local
address from its MAC, and serves IPv6 peers on IPv6-only sockets beside the IPv4 ones; Scapy
is SCAPY_IP6, and the responder thread answers the node's neighbour solicitations for it.
The own deployment's testbed itself stays without IPv6 (no --ipv6): nothing but the tests
sends IPv6 on its bridge.
"""

import atexit
import ctypes
import itertools
import json
import os
import select
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from scapy.config import conf
from scapy.layers.inet6 import (IPv6, ICMPv6ND_NA, ICMPv6ND_NS, ICMPv6NDOptDstLLAddr)
from scapy.layers.l2 import ARP, Ether

from tcppeer import TcpPeer, fresh_port, tcp_opts  # noqa: E402,F401 (the tests import them from here)

TB_NAME = "ulsconf"
HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
CLONE_NEWNET = 0x40000000
ETH_P_ALL = 0x0003
SO_TIMESTAMPNS = 35     # <asm-generic/socket.h>; not in Python's socket module

conf.verb = 0


def _raise_priority():
    """Run this process, and what it starts (the node, ulsd, through the testbed), at nice
    -20. These tests time the node's timers against a 200 ms RTO floor and a 25 ms
    delayed-ACK tick, and this Python peer must answer in time (grow() ACKs segment by
    segment; an RTO in between resets cwnd). On a machine loaded with other jobs (load
    12-27 here) both waited tens to hundreds of milliseconds for the CPU at nice 0, and
    tests failed by chance: 14 failures in 8 runs of the timing files, 7 at nice -20.
    No assertion changes. Without the privilege (not root) the niceness stays."""
    try:
        os.setpriority(os.PRIO_PROCESS, 0, -20)
    except OSError:
        pass


_raise_priority()


# ---------------------------------------------------------------------------
# Locating the tree
# ---------------------------------------------------------------------------
def _srcdir():
    return Path(os.environ.get("ULS_SRCDIR") or REPO)


def _builddir():
    """The build directory: $ULS_BUILDDIR, or the source tree itself for an in-tree build."""
    env = os.environ.get("ULS_BUILDDIR")
    if env:
        return Path(env)
    if (REPO / "apps" / "ulsnode").exists():
        return REPO
    pytest.fail("ulsnode not found: set ULS_BUILDDIR to the build directory "
                "(make check does), or build in-tree so apps/ulsnode exists", pytrace=False)


def _capture_dir():
    env = os.environ.get("ULS_CAPTURE_DIR")
    d = Path(env) if env else _builddir() / "tests" / "conformance" / "captures"
    d.mkdir(parents=True, exist_ok=True)
    return d


# ---------------------------------------------------------------------------
# Network namespaces: the calling thread only (setns is per thread)
# ---------------------------------------------------------------------------
_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd):
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        e = ctypes.get_errno()
        raise OSError(e, "setns(CLONE_NEWNET): " + os.strerror(e))


# ---------------------------------------------------------------------------
# pcap files (own writer: lets curated captures keep the original lengths when truncated)
# ---------------------------------------------------------------------------
def write_pcap(path, frames, snaplen=65535):
    """frames: list of (timestamp, bytes). Linktype Ethernet, microsecond timestamps."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, snaplen, 1))
        for ts, data in frames:
            cap = data[:snaplen]
            sec = int(ts)
            f.write(struct.pack("<IIII", sec, int((ts - sec) * 1e6), len(cap), len(data)))
            f.write(cap)


# ---------------------------------------------------------------------------
# The node under test
# ---------------------------------------------------------------------------
# Deployments the suite runs against (the `node` fixture is parametrised over them):
#   ulsd  the default deployment: ulsd owns the TAP (segmentation offload on, its default)
#         and ulsnode joins it over the control socket as an ordinary process
#   own   ulsnode opens the TAP itself and is a node of its own (no daemon)
DEPLOYMENTS = ("ulsd", "own")

# IPv6 on a node of its own (see the header): RFC 3849's documentation prefix.
NODE_IP6 = "2001:db8:0:1::1"
SCAPY_IP6 = "2001:db8:0:1::c8"
SCAPY_LL6 = "fe80::c8"   # Scapy's link-local address
PREFIX6 = 64

# The reassembly timeout of the node under test, in seconds (see the header).
REASS_TIMEOUT_S = 3
# How long a path MTU lowered by ICMP stays lowered (RFC 1191 §6.3; 600 s by default).
PMTU_AGE_S = 5

# In the ulsd deployment a malformed frame is dropped by ulsd's filter before any process
# sees it. The node's count of such a drop is the process's counter plus ulsd's.
ULSD_COUNTER_OF = {
    "ip_chkerr": "drop_ipv4_checksum",
    "frame_ethertype": "drop_ethertype",
    "frame_ipv4_header": "drop_ipv4_header",
    "frame_ipv4_options": "drop_ipv4_options",
    "frame_arp_header": "drop_arp",
    # IPv4 reassembly: ulsd's on a ulsd node (server/reass.c), lwIP's on a node of its own
    # (patch 0050); the process behind ulsd only ever sees whole datagrams' fragments.
    "ip_reass_overlap": "drop_reass_overlap",
    "ip_reass_duplicate": "drop_reass_duplicate",
    "ip_reass_timeout": "drop_reass_timeout",
    "ip_reass_limit": "drop_reass_limit",
}


class Node:
    """One ulsnode process in the testbed's node namespace (on its own TAP, or joined to
    the testbed's ulsd), plus what the tests need to know about it (addresses) and the
    counter reader."""

    def __init__(self, env, stats_path, deployment):
        self.env = env
        self.deployment = deployment
        self.ctl = env.get("TB_NODE1_CTL") if deployment == "ulsd" else None
        self.ip = env["TB_NODE1_IP"]
        self.mac = env["TB_NODE1_MAC"]
        self.my_ip = env["TB_SCAPY_IP"]
        self.my_mac = env["TB_SCAPY_MAC"]
        self.iface = env["TB_SCAPY_IF"]
        # IPv6. The ulsd deployment: its testbed is up with --ipv6 and ulsd answers for
        # TB_NODE1_IP6 (the node6 fixture); processes carry no IPv6 there yet. A node of its
        # own: ulsnode --ip6 NODE_IP6, its stack answers (test_rfc8200_ipv6_stack.py's
        # stack6); ULS_CONF_NO_IP6=1 starts it without IPv6, to compare the IPv4 suite with
        # and without the IPv6 services' threads.
        no6 = os.environ.get("ULS_CONF_NO_IP6") == "1"
        if deployment == "ulsd":
            self.ip6 = env.get("TB_NODE1_IP6")
            self.my_ip6 = env.get("TB_SCAPY_IP6")
        else:
            self.ip6 = None if no6 else NODE_IP6
            self.my_ip6 = SCAPY_IP6
        self.my_ll6 = SCAPY_LL6
        # More addresses Scapy answers neighbour solicitations for (fresh_src6): a test
        # whose state outlives it in the node per peer address (lwIP's destination cache
        # keeps a path MTU) speaks from one of its own.
        self.extra_ip6 = set()
        self.stats_path = stats_path
        self.proc = None

    def counters(self):
        """One snapshot of the node's counters: the process's (its --stats socket) and, in
        the ulsd deployment, ulsd's under "ulsd:NAME", with the drops ULSD_COUNTER_OF names
        added to the process's counter of the same meaning."""
        c = self._process_counters()
        if self.deployment == "ulsd":
            d = self.ulsd_counters()
            for name, v in d.items():
                c["ulsd:" + name] = v
            for name, theirs in ULSD_COUNTER_OF.items():
                c[name] = c.get(name, 0) + d[theirs]
        return c

    def ulsd_counters(self):
        """ulsd's counters (ulsstat --json), only in the ulsd deployment."""
        out = subprocess.run([str(_builddir() / "apps" / "ulsstat"), "--ctl", self.ctl,
                              "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, timeout=10)
        if out.returncode != 0:
            raise RuntimeError(f"ulsstat failed ({out.returncode}): {out.stderr}")
        return json.loads(out.stdout)["counters"]

    def _process_counters(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5)
        try:
            s.connect(self.stats_path)
            data = b""
            while True:
                b = s.recv(65536)
                if not b:
                    break
                data += b
        finally:
            s.close()
        return json.loads(data)["counters"]

    def alive(self):
        return self.proc is not None and self.proc.poll() is None


_src6 = itertools.count(1)


def fresh_src6(node):
    """An IPv6 address for Scapy no earlier test of this session used (next to
    SCAPY_IP6, on the node's link; the responder thread answers solicitations for it)."""
    a = f"{SCAPY_IP6}:{next(_src6):x}"
    node.extra_ip6.add(a)
    return a


# ---------------------------------------------------------------------------
# The link: one AF_PACKET socket on scapy0 per test, every frame kept for the capture
# ---------------------------------------------------------------------------
class Link:
    def __init__(self, node):
        self.node = node
        self.sock = conf.L2socket(iface=node.iface)
        raw_sock = self.sock.ins
        try:  # a 64 KiB burst must not overflow the socket while Python is busy
            raw_sock.setsockopt(socket.SOL_SOCKET, 33, 8 << 20)  # SO_RCVBUFFORCE
        except OSError:
            raw_sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        # The kernel stamps each frame as it reaches the socket (the node wrote it then):
        # intervals between the node's frames are measured on these stamps, not on when
        # this process got round to reading them, which on a loaded machine can be tens
        # of milliseconds later, differently for each frame.
        raw_sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.frames = []    # (timestamp, bytes), both directions, for the pcap
        self.pending = []   # received, parsed, not yet consumed: (timestamp, Ether)
        self.peers = []

    def close(self):
        self.sock.close()

    def send(self, pkt):
        """Send pkt; returns the time it left (time.time()'s clock, as the frames' stamps)."""
        data = bytes(pkt)
        ts = time.time()
        self.frames.append((ts, data))
        self.sock.outs.send(data)
        return ts

    def _read(self, timeout):
        """Read one frame (not our own outgoing ones) within timeout; None if none came.
        The frame's .time is the kernel's stamp of its arrival (time.time()'s clock)."""
        ins = self.sock.ins
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = select.select([ins], [], [], left)
            if not r:
                return None
            data, anc, _, sa_ll = ins.recvmsg(65536, socket.CMSG_SPACE(16))
            if sa_ll[2] == socket.PACKET_OUTGOING:
                continue
            ts = time.time()
            for level, kind, val in anc:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(val) >= 16:
                    sec, nsec = struct.unpack("qq", val[:16])
                    ts = sec + nsec / 1e9
            self.frames.append((ts, data))
            p = Ether(data)
            p.time = ts
            return ts, p

    def recv(self, match, timeout=3.0):
        """First not-yet-consumed received frame for which match(frame) is true, or None
        after timeout seconds. Frames that do not match stay pending for later calls."""
        for i, (_, p) in enumerate(self.pending):
            if match(p):
                del self.pending[i]
                return p
        deadline = time.monotonic() + timeout
        while True:
            got = self._read(deadline - time.monotonic())
            if got is None:
                return None
            if match(got[1]):
                return got[1]
            self.pending.append(got)
            del self.pending[:-2000]

    def recv_all(self, match, duration):
        """Every frame matching within duration seconds (waits the whole duration)."""
        out = []
        deadline = time.monotonic() + duration
        while True:
            p = self.recv(match, max(0.0, deadline - time.monotonic()))
            if p is None:
                return out
            out.append(p)

    def pcap(self, path, snaplen=65535):
        write_pcap(path, sorted(self.frames, key=lambda f: f[0]), snaplen)


# ---------------------------------------------------------------------------
# ARP responder: lets the node resolve TB_SCAPY_IP (and SCAPY_IP6, by neighbour discovery)
# ---------------------------------------------------------------------------
class ArpResponder(threading.Thread):
    def __init__(self, node):
        super().__init__(name="arp-responder", daemon=True)
        self.node = node
        self.stop = threading.Event()
        self.sock = conf.L2socket(iface=node.iface)  # opened by the caller's thread (netns)
        self.answered = 0
        self.solicited = 0   # neighbour solicitations for SCAPY_IP6 answered

    def run(self):
        ins = self.sock.ins
        me = self.node.my_ip
        while not self.stop.is_set():
            r, _, _ = select.select([ins], [], [], 0.1)
            if not r:
                continue
            try:
                data, sa_ll = ins.recvfrom(65536)
            except OSError:
                return
            if sa_ll[2] == socket.PACKET_OUTGOING or len(data) < 42:
                continue
            if data[12:14] == b"\x86\xdd" and self.node.ip6:
                self._neighbour(data)
                continue
            if data[12:14] != b"\x08\x06":
                continue
            a = Ether(data)
            if ARP in a and a[ARP].op == 1 and a[ARP].pdst == me:
                reply = (Ether(src=self.node.my_mac, dst=a[ARP].hwsrc) /
                         ARP(op=2, hwsrc=self.node.my_mac, psrc=me,
                             hwdst=a[ARP].hwsrc, pdst=a[ARP].psrc))
                self.sock.outs.send(bytes(reply))
                self.answered += 1

    def _neighbour(self, data):
        """RFC 4861 §7.2.4: answer a solicitation for SCAPY_IP6 (or SCAPY_LL6) with a
        solicited NA carrying our link-layer address."""
        p = Ether(data)
        if ICMPv6ND_NS not in p:
            return
        tgt = p[ICMPv6ND_NS].tgt
        if tgt not in (self.node.my_ip6, self.node.my_ll6) and tgt not in self.node.extra_ip6:
            return
        na = (Ether(src=self.node.my_mac, dst=p[Ether].src) /
              IPv6(src=tgt, dst=p[IPv6].src, hlim=255) /
              ICMPv6ND_NA(tgt=tgt, R=0, S=1, O=1) /
              ICMPv6NDOptDstLLAddr(lladdr=self.node.my_mac))
        self.sock.outs.send(bytes(na))
        self.solicited += 1

    def shutdown(self):
        self.stop.set()
        self.join(5)
        self.sock.close()


# ---------------------------------------------------------------------------
# Session setup and teardown
# ---------------------------------------------------------------------------
def _sigterm_to_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


class _Session:
    """Everything the session creates, torn down exactly once (fixture finally or atexit)."""

    def __init__(self, deployment):
        self.deployment = deployment
        self.testbed = str(_srcdir() / "tests" / "testbed" / "testbed")
        self.env_vars = dict(os.environ, TB_NAME=TB_NAME,
                             ULSD_REASS_TIMEOUT_MS=str(REASS_TIMEOUT_S * 1000))
        self.tb_up = False
        self.root_ns = None
        self.node = None
        self.arp = None
        self.tmpdir = None
        self.done = False
        self.old_sigterm = None

    def start(self):
        # SIGTERM (e.g. a harness timeout) would end Python without running finally or
        # atexit: turn it into KeyboardInterrupt so that teardown still happens.
        self.old_sigterm = signal.signal(signal.SIGTERM, _sigterm_to_interrupt)
        ulsnode = _builddir() / "apps" / "ulsnode"
        if not ulsnode.exists():
            pytest.fail(f"{ulsnode} does not exist: build first (make)", pytrace=False)
        self.tb_up = True  # from here on, teardown runs `testbed down` (idempotent)
        own = self.deployment == "own"
        out = subprocess.run([self.testbed, "up", "--nodes", "1"] +
                             (["--no-ulsd"] if own else ["--ipv6"]),
                             env=self.env_vars,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             timeout=120)
        if out.returncode != 0:
            raise RuntimeError(f"testbed up failed ({out.returncode}): {out.stderr}")
        env = {}
        for line in out.stdout.splitlines():
            if line.startswith("export ") and "=" in line:
                k, v = line[len("export "):].split("=", 1)
                env[k] = v
        self.tmpdir = tempfile.TemporaryDirectory(prefix="uls-conf-")
        node = Node(env, os.path.join(self.tmpdir.name, "stats.sock"), self.deployment)
        self.node = node
        if own:
            where = ["--tap", env["TB_NODE1_TAP"], "--ip", f"{node.ip}/{env['TB_PREFIX']}",
                     "--mac", node.mac]
            if node.ip6:
                where += ["--ip6", f"{node.ip6}/{PREFIX6}"]
        else:
            where = ["--ctl", node.ctl]
        node.proc = subprocess.Popen(
            ["ip", "netns", "exec", env["TB_NETNS"], str(ulsnode)] + where +
            ["--stats", node.stats_path],
            stdout=open(os.path.join(self.tmpdir.name, "ulsnode.log"), "wb"),
            stderr=subprocess.STDOUT,
            env=dict(os.environ, ULS_REASS_TIMEOUT=str(REASS_TIMEOUT_S),
                     ULS_PMTU_AGE=str(PMTU_AGE_S)))
        deadline = time.monotonic() + 10
        while not os.path.exists(node.stats_path):
            if node.proc.poll() is not None:
                raise RuntimeError(f"ulsnode exited with {node.proc.returncode}: "
                                   + self.node_log())
            if time.monotonic() > deadline:
                raise RuntimeError("ulsnode did not create its stats socket within 10 s")
            time.sleep(0.05)
        # The socket file exists from bind(); it answers from listen() on, and on a loaded
        # machine the node may be between the two (ConnectionRefusedError).
        while True:
            try:
                node.counters()  # answers: it is up
                break
            except ConnectionRefusedError:
                if node.proc.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        # Enter the node namespace on this (the main) thread: every Scapy socket the
        # tests open from now on lives there; the root namespace is left alone.
        self.root_ns = os.open("/proc/self/ns/net", os.O_RDONLY)
        nsfd = os.open(f"/run/netns/{env['TB_NETNS']}", os.O_RDONLY)
        try:
            _setns(nsfd)
        finally:
            os.close(nsfd)
        self.arp = ArpResponder(node)
        self.arp.start()
        return node

    def node_log(self):
        try:
            with open(os.path.join(self.tmpdir.name, "ulsnode.log"), "rb") as f:
                return f.read().decode(errors="replace")[-2000:]
        except (OSError, AttributeError):
            return ""

    def stop(self):
        if self.done:
            return
        self.done = True
        if self.old_sigterm is not None:
            signal.signal(signal.SIGTERM, self.old_sigterm)
        try:
            if self.arp is not None:
                self.arp.shutdown()
        finally:
            if self.root_ns is not None:
                _setns(self.root_ns)
                os.close(self.root_ns)
                self.root_ns = None
            proc = self.node.proc if self.node else None
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)
            if self.tb_up:
                subprocess.run([self.testbed, "down"], env=self.env_vars,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               timeout=120)
            if self.tmpdir is not None:
                self.tmpdir.cleanup()


@pytest.fixture(scope="session", params=DEPLOYMENTS)
def node(request):
    """The node under test, up for the whole session, once per deployment (pytest groups
    the tests by deployment: all of them run against ulsd's node, then against a node of
    its own)."""
    sess = _Session(request.param)
    atexit.register(sess.stop)
    try:
        yield sess.start()
        assert sess.node.alive(), "ulsnode died during the session: " + sess.node_log()
    finally:
        sess.stop()


@pytest.fixture
def link(node, request):
    """A fresh AF_PACKET socket on scapy0 for one test; its frames become
    <capture dir>/<test name>.pcap. Connections the test left open are reset."""
    assert node.alive(), "ulsnode is not running"
    lk = Link(node)
    try:
        yield lk
    finally:
        for peer in lk.peers:
            peer.abort()
        lk.pcap(_capture_dir() / f"{request.node.name}.pcap")
        lk.close()


@pytest.fixture
def node6(node):
    """The node under test, for a test of IPv6: ulsd's deployment only (ulsd answers for the
    node; processes carry no IPv6 yet, and a node of its own has none)."""
    if node.deployment != "ulsd" or not node.ip6:
        pytest.skip("IPv6 is answered by ulsd; this deployment has none")
    return node


@pytest.fixture
def offload(node):
    """The node under test, for a test of what it does with segmentation offload (super-
    segments, stack/tso.c): ulsd's deployment only, where ulsd's TAP carries offload words
    (a node of its own on a plain TAP sends wire-sized segments)."""
    if node.deployment != "ulsd":
        pytest.skip("segmentation offload is ulsd's; this deployment has none")
    return node


@pytest.fixture
def counters(node):
    """counters() -> the node's counters now."""
    return node.counters


def requirement(*, fix, mutate, level=None):
    """What a conformance test's requirement rests on, read by reqtable.py and mutate.py
    (from the source; at run time this only marks the test):
      fix     what makes ulstack meet it: "lwIP 2.1.3", "patch 0012", "hook stack/x.c",
              "ulsd: server/reply.c; own: lwIP 2.1.3" when the deployments differ
      mutate  a shell command, run at the top of a copy of the source tree, that undoes
              it (tests/conformance/lwip-mutate edits lwIP); the test must then fail
      level   the RFC 2119 level, when the quoted text does not carry one"""
    return pytest.mark.requirement(fix=fix, mutate=mutate, level=level)


def pytest_configure(config):
    config.addinivalue_line("markers", "requirement(fix, mutate, level): see conftest.py")


def curated_pcap(link, name, snaplen=128):
    """With ULS_UPDATE_PCAPS=1, write this test's exchange as pcaps/<name>, every frame cut
    to snaplen bytes (headers only) so the file stays small. Only the default deployment's
    (ulsd's) exchange is kept."""
    if os.environ.get("ULS_UPDATE_PCAPS") == "1" and link.node.deployment == "ulsd":
        link.pcap(_srcdir() / "pcaps" / name, snaplen)


def wait_counter(counters, name, minimum, timeout=3.0):
    """Poll counter name until it is >= minimum; returns the last value."""
    deadline = time.monotonic() + timeout
    while True:
        v = counters()[name]
        if v >= minimum or time.monotonic() > deadline:
            return v
        time.sleep(0.05)


# Fixtures that bind a test to one deployment: the test is not collected for the other
# (a skip would count as a failure in make check, and the test cannot apply there).
ONE_DEPLOYMENT = {"node6": "ulsd", "stack6": "own", "offload": "ulsd"}


def pytest_collection_modifyitems(config, items):
    keep, drop = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        where = params.get("node")
        wanted = {ONE_DEPLOYMENT[f] for f in getattr(item, "fixturenames", ())
                  if f in ONE_DEPLOYMENT}
        (drop if where and wanted and where not in wanted else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
