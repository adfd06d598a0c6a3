"""RFC 791 §3.2 / RFC 1122 §3.3.2: IPv4 reassembly for the node's processes.

Scapy fragments UDP datagrams for the node's echo service (port 7) itself, with an IP
Identification of its own choosing, and reassembles the node's (fragmented) echo. On a ulsd
node every fragment goes to ulsd, which collects the datagram and hands its fragments to the
owner (server/reass.c); on a node of its own lwIP reassembles (patch 0050). The session's
reassembly timeout is conftest.REASS_TIMEOUT_S.
"""

import os
import random
import time

from scapy.layers.inet import ICMP, IP, UDP, IPerror
from scapy.layers.l2 import Ether

from conftest import REASS_TIMEOUT_S, curated_pcap, fresh_port, requirement, wait_counter

ECHO = 7
FRAG = 1480          # data octets per fragment (a multiple of 8): 1500-byte datagrams
ULSD_MAX_DATAGRAMS = 256   # server/reass.c SRV_REASS_MAX


def udp_fragments(node, sport, payload, ipid, size=FRAG):
    """The fragments (Ether frames, in offset order) of one UDP datagram to the echo port:
    (offset in octets, frame)."""
    whole = IP(src=node.my_ip, dst=node.ip, id=ipid) / UDP(sport=sport, dport=ECHO) / payload
    data = bytes(whole)[20:]     # UDP header (checksum over the whole datagram) and data
    out = []
    for off in range(0, len(data), size):
        chunk = data[off:off + size]
        last = off + size >= len(data)
        out.append((off, fragment_frame(node, ipid, off, chunk, last)))
    return out


def fragment_frame(node, ipid, off, chunk, last, proto=17):
    return (Ether(src=node.my_mac, dst=node.mac) /
            IP(src=node.my_ip, dst=node.ip, id=ipid, proto=proto, frag=off // 8,
               flags=0 if last else "MF") / chunk)


def recv_datagram(link, node, proto, timeout=3.0, held=None, sizes=None):
    """The node's next IPv4 datagram of protocol proto to us, reassembled from its
    fragments (it may come whole); its IP payload (bytes) or None. held: the fragments
    of datagrams not yet whole, kept across calls; sizes: a list that gets the Total
    Length of every frame taken."""
    held = {} if held is None else held
    deadline = time.monotonic() + timeout
    while True:
        p = link.recv(lambda q: IP in q and q[IP].src == node.ip and q[IP].dst == node.my_ip
                      and q[IP].proto == proto, max(0.0, deadline - time.monotonic()))
        if p is None:
            return None
        ip = p[IP]
        if sizes is not None:
            sizes.append(ip.len)
        frags = held.setdefault(ip.id, {})
        frags[ip.frag * 8] = (bytes(ip.payload)[:ip.len - ip.ihl * 4], not ip.flags.MF)
        data, off = b"", 0
        while off in frags:
            chunk, last = frags[off]
            data += chunk
            off += len(chunk)
            if last:
                del held[ip.id]
                return data


def recv_echo(link, node, sport, timeout=3.0):
    """The node's UDP datagram to sport, reassembled from its fragments; its UDP payload
    (bytes) or None."""
    deadline, held = time.monotonic() + timeout, {}
    while True:
        data = recv_datagram(link, node, 17, max(0.0, deadline - time.monotonic()), held)
        if data is None:
            return None
        if len(data) >= 8:
            u = UDP(data)
            if u.dport == sport and u.sport == ECHO:
                return bytes(data[8:u.len])


def new_ipid():
    return random.randrange(1, 1 << 16)


@requirement(fix="ulsd: server/reass.c, filter/datapath.bpf.c; own: lwIP 2.1.3",
             mutate="sed -i 's/srv__reass_input(s, frame, len, p);/s->ctr.v[SRV_DROP_FRAGMENT]++;/' "
                    "server/demux.c && "
                    "sed -i 's/#define IP_REASSEMBLY  *1/#define IP_REASSEMBLY 0/' stack/lwipopts.h")
def test_rfc791_2_3_fragments_in_order_reassembled_and_delivered(node, link):
    """RFC 791 §2.3: "To assemble the fragments of an internet
    datagram, an internet protocol module (for example at a destination host) combines
    internet datagrams that all have the same value for the four fields: identification,
    source, destination, and protocol." A 3000-octet UDP datagram sent as three fragments
    in order reaches the echo service, whose echo carries the same 3000 octets."""
    sport, payload = fresh_port(), os.urandom(3000)
    for _, f in udp_fragments(node, sport, payload, new_ipid()):
        link.send(f)
    echo = recv_echo(link, node, sport)
    assert echo is not None, "no echo of the fragmented datagram"
    assert echo == payload, f"echo differs ({len(echo)} octets)"
    curated_pcap(link, "rfc791_2_3_fragments_in_order_reassembled_and_delivered.pcap")


@requirement(fix="ulsd: server/reass.c, filter/datapath.bpf.c; own: lwIP 2.1.3",
             mutate="sed -i 's/srv__reass_input(s, frame, len, p);/s->ctr.v[SRV_DROP_FRAGMENT]++;/' "
                    "server/demux.c && "
                    "sed -i 's/#define IP_REASSEMBLY  *1/#define IP_REASSEMBLY 0/' stack/lwipopts.h")
def test_rfc791_2_3_fragments_out_of_order_reassembled_and_delivered(node, link):
    """RFC 791 §2.3: "The fragment offset field tells the receiver the position of a
    fragment in the original datagram. The fragment offset and length determine the portion
    of the original datagram covered by this fragment." A 5000-octet UDP datagram sent as
    four fragments, last first and the first third, is echoed whole."""
    sport, payload = fresh_port(), os.urandom(5000)
    frags = [f for _, f in udp_fragments(node, sport, payload, new_ipid())]
    assert len(frags) == 4
    for f in (frags[3], frags[1], frags[0], frags[2]):
        link.send(f)
    echo = recv_echo(link, node, sport)
    assert echo is not None, "no echo of the datagram sent out of order"
    assert echo == payload, f"echo differs ({len(echo)} octets)"


@requirement(fix="ulsd: server/reass.c; own: patch 0050",
             mutate="sed -i 's/if ((prev \\&\\& prev->end > off) || (\\*at \\&\\& (\\*at)->off < end)) {/"
                    "if ((prev \\&\\& prev->end > off \\&\\& 0) || (*at \\&\\& (*at)->off < end \\&\\& 0)) {/' "
                    "server/reass.c && rm stack/patches/0050-*")
def test_rfc5722_4_overlapping_fragment_drops_whole_datagram_and_is_counted(node, link, counters):
    """RFC 5722 §4 (IPv6; Linux applies it to IPv4, and so does ulstack): "When reassembling
    an IPv6 datagram, if one or more its constituent fragments is determined to be an
    overlapping fragment, the entire datagram (and any constituent fragments, including
    those not yet received) MUST be silently discarded." A datagram whose second fragment
    overlaps the first by 8 octets is not delivered, even though its other fragments cover
    it; the drop is counted. Control: the same datagram without the overlap is echoed."""
    sport, payload = fresh_port(), os.urandom(3000)
    frags = udp_fragments(node, sport, payload, new_ipid())
    assert [off for off, _ in frags] == [0, 1480, 2960]
    good = [f for _, f in frags]
    # Control first: the datagram as it should be comes back.
    for f in good:
        link.send(f)
    echo = recv_echo(link, node, sport)
    assert echo == payload, "control: the datagram without overlap was not echoed"

    before = counters()["ip_reass_overlap"]
    ipid = new_ipid()
    frags = udp_fragments(node, sport, payload, ipid)
    data = b"".join(bytes(f[IP].payload) for _, f in frags)
    # Fragment 0 [0, 1480), an overlapping one [1472, 2952), then [1480, 3008) with the
    # right bytes: without the rule, dropping only the overlapping one leaves a whole
    # datagram.
    link.send(frags[0][1])
    link.send(fragment_frame(node, ipid, 1472, data[1472:2952], False))
    link.send(frags[1][1])
    link.send(frags[2][1])
    assert recv_echo(link, node, sport, 2.0) is None, "a datagram with overlapping fragments was delivered"
    assert wait_counter(counters, "ip_reass_overlap", before + 1) == before + 1
    curated_pcap(link, "rfc5722_4_overlapping_fragment_drops_whole_datagram_and_is_counted.pcap")


@requirement(fix="ulsd: server/reass.c; own: lwIP 2.1.3, stack/tcpconf.c",
             mutate="sed -i 's/if (d->used \\&\\& d->expires_ms <= now) {/if (d->used \\&\\& d->expires_ms <= now \\&\\& 0) {/' "
                    "server/reass.c && tests/conformance/lwip-mutate core/ipv4/ip4_frag.c "
                    "'s/if (r->timer > 0) {/if (r->timer > 0 || 1) {/'")
def test_rfc1122_3_3_2_incomplete_datagram_expires_and_is_counted(node, link, counters):
    """RFC 1122 §3.3.2: "If this timeout expires, the partially-reassembled datagram MUST be
    discarded and an ICMP Time Exceeded message sent to the source host (if fragment zero
    has been received)." A datagram whose last fragment comes after the reassembly timeout
    is not delivered, the expiry is counted, a Time Exceeded (code 1, "fragment reassembly
    time exceeded", RFC 792) quoting fragment zero comes back and, on a ulsd node, the
    memory it held is free again. Control: the same gap well inside the timeout is fine."""
    # Datagrams earlier tests left incomplete (the overlap test's) expire first, so that
    # the counter below moves for this test's datagram only (lwIP's timer ticks each second).
    time.sleep(REASS_TIMEOUT_S + 2)
    sport, payload = fresh_port(), os.urandom(3000)
    frags = [f for _, f in udp_fragments(node, sport, payload, new_ipid())]
    link.send(frags[0])
    link.send(frags[1])
    time.sleep(REASS_TIMEOUT_S / 3)
    link.send(frags[2])
    assert recv_echo(link, node, sport) == payload, "control: a datagram completed in time was lost"

    before = counters()["ip_reass_timeout"]
    ipid = new_ipid()
    frags = [f for _, f in udp_fragments(node, sport, payload, ipid)]
    link.send(frags[0])
    link.send(frags[1])
    if node.deployment == "ulsd":
        # ulsd's control thread answers while its demultiplexer may not have read the two
        # fragments yet (CI, slow host: 0 datagrams held): wait for them, well inside the
        # reassembly timeout.
        assert wait_counter(node.ulsd_counters, "reass_in_progress", 1, timeout=1.0) >= 1
        assert node.ulsd_counters()["reass_bytes_held"] > 0
    assert wait_counter(counters, "ip_reass_timeout", before + 1,
                        timeout=REASS_TIMEOUT_S + 3) == before + 1, "no reassembly timeout"
    te = link.recv(lambda q: ICMP in q and q[ICMP].type == 11 and IPerror in q
                   and q[IPerror].id == ipid and q[IPerror].src == node.my_ip, 2.0)
    assert te is not None, "no Time Exceeded for the expired datagram"
    assert te[ICMP].code == 1 and te[IPerror].frag == 0, te.summary()
    link.send(frags[2])
    if node.deployment == "ulsd":
        # Only the last fragment is held now: it starts a datagram of its own (none was
        # held before it). Looked at as soon as ulsd's demultiplexer has read it, not after
        # the wait for an echo below: 2 s of a 3 s timeout left too little margin for the
        # look itself on a loaded machine.
        held = wait_counter(node.ulsd_counters, "reass_in_progress", 1, timeout=1.0)
        assert held == 1, held
        assert node.ulsd_counters()["reass_bytes_held"] < 1600
    assert recv_echo(link, node, sport, 2.0) is None, "a datagram completed after the timeout"
    assert wait_counter(counters, "ip_reass_timeout", before + 2,
                        timeout=REASS_TIMEOUT_S + 3) == before + 2
    if node.deployment == "ulsd":
        held = node.ulsd_counters()
        assert held["reass_in_progress"] == 0 and held["reass_bytes_held"] == 0, held


@requirement(fix="ulsd: server/reass.c; own: lwIP 2.1.3 (MEMP_NUM_REASSDATA), patch 0050",
             mutate="sed -i 's/#define SRV_REASS_MAX        256 /#define SRV_REASS_MAX        1024 /' "
                    "server/reass.c && "
                    "sed -i 's/#define MEMP_NUM_REASSDATA  *16/#define MEMP_NUM_REASSDATA 1024/; "
                    "s/#define IP_REASS_MAX_PBUFS  *256/#define IP_REASS_MAX_PBUFS 2048/' stack/lwipopts.h")
def test_rfc4963_3_flood_of_first_fragments_stays_within_bound(node, link, counters):
    """RFC 1122 §3.3.2 ("The IP layer MUST implement reassembly of IP datagrams") with
    RFC 4963 §3's warning that reassembly buffers are a resource a sender can exhaust:
    reassembly memory is bounded. 300 first fragments of different datagrams (more than
    ulsd's 256 datagrams in progress, and lwIP's 16) are not all held: the refusals are
    counted, ulsd never holds more than its bound, and once they expire a whole datagram
    is delivered again."""
    sport, payload = fresh_port(), os.urandom(3000)
    before = counters()["ip_reass_limit"]
    d0 = node.ulsd_counters() if node.deployment == "ulsd" else None
    base = new_ipid()
    # Built first, then sent back to back: the flood must be whole well inside the
    # reassembly timeout, or its first datagrams expire and make room for its last ones.
    # (Scapy builds a frame in a millisecond or two, several on a loaded machine: 300 of
    # them built between the sends could take longer than REASS_TIMEOUT_S.)
    flood = [bytes(fragment_frame(node, (base + i) % 65535 + 1, 0,
                                  bytes(UDP(sport=sport, dport=ECHO, len=3008)) + b"x" * 8, False))
             for i in range(300)]
    t0 = time.monotonic()
    for f in flood:
        link.send(f)
    took = time.monotonic() - t0
    assert took < REASS_TIMEOUT_S / 2, f"the flood took {took:.2f} s to send"
    assert wait_counter(counters, "ip_reass_limit", before + 1) > before, "no bound was reached"
    if node.deployment == "ulsd":
        # The node's counter moves at the first refusal, while ulsd's demultiplexer may
        # still be reading the rest of the flood: wait for every refusal it owes.
        refused = d0["drop_reass_limit"] + 300 - ULSD_MAX_DATAGRAMS
        assert wait_counter(node.ulsd_counters, "drop_reass_limit", refused) >= refused
        d = node.ulsd_counters()
        assert d["reass_peak"] <= ULSD_MAX_DATAGRAMS
        assert d["reass_in_progress"] <= ULSD_MAX_DATAGRAMS
    # Everything expires; then the node reassembles again.
    deadline = time.monotonic() + REASS_TIMEOUT_S + 5
    while node.deployment == "ulsd" and time.monotonic() < deadline:
        if node.ulsd_counters()["reass_in_progress"] == 0:
            break
        time.sleep(0.2)
    else:
        time.sleep(REASS_TIMEOUT_S + 2)
    if node.deployment == "ulsd":
        assert node.ulsd_counters()["reass_bytes_held"] == 0
    for _, f in udp_fragments(node, sport, payload, new_ipid()):
        link.send(f)
    assert recv_echo(link, node, sport) == payload, "no echo after the flood expired"


def _time_exceeded(node, ipids):
    """A matcher of the node's ICMP Time Exceeded (fragment reassembly) quoting one of ipids."""
    def match(q):
        return (ICMP in q and q[IP].src == node.ip and q[ICMP].type == 11 and
                q[ICMP].code == 1 and IPerror in q and q[IPerror].id in ipids)
    return match


@requirement(fix="ulsd: server/reass.c; own: patch 0129",
             mutate="rm stack/patches/0129-reass-evicted-no-time-exceeded.patch")
def test_rfc792_time_exceeded_only_for_datagrams_whose_time_limit_passed(node, link, counters):
    """RFC 792 (Time Exceeded Message): "If a host reassembling a fragmented datagram cannot
    complete the reassembly due to missing fragments within its time limit it discards the
    datagram, and it may send a time exceeded message." A datagram dropped to make room
    for others has not run out of time: 300 first fragments of different datagrams (more
    than the reassembly bound holds) get no Time Exceeded within the first second; lwIP
    sent one for each datagram it evicted, one ICMP message per fragment of a flood, to any
    source address. Positive control: once the timeout (REASS_TIMEOUT_S) has passed, the
    datagrams that were held get their Time Exceeded."""
    sport = fresh_port()
    before = counters()["ip_reass_limit"]
    base = new_ipid()
    ipids = [(base + i) % 65535 + 1 for i in range(300)]
    # Built first, then sent back to back: the first datagram's time limit runs from its
    # own arrival, and the early look below must end before it.
    frames = [fragment_frame(node, ipid, 0, bytes(UDP(sport=sport, dport=ECHO, len=3008))
                             + b"x" * 8, False) for ipid in ipids]
    t0 = time.monotonic()
    for f in frames:
        link.send(f)
    took = time.monotonic() - t0
    assert took < 1.5, f"sending the 300 fragments took {took:.2f} s"
    ipids = set(ipids)
    assert wait_counter(counters, "ip_reass_limit", before + 1) > before, "no bound was reached"
    early = link.recv_all(_time_exceeded(node, ipids),
                          min(1.0, t0 + REASS_TIMEOUT_S - 0.5 - time.monotonic()))
    assert early == [], f"{len(early)} Time Exceeded messages before any time limit passed"
    late = link.recv_all(_time_exceeded(node, ipids), REASS_TIMEOUT_S + 2)
    assert late, "no Time Exceeded once the reassembly time limit had passed"


@requirement(fix="ulsd: server/reass.c (SRV_REASS_FRAGS); own: lwIP 2.1.3 (IP_REASS_MAX_PBUFS)",
             mutate="sed -i 's/^#define SRV_REASS_FRAGS .*/#define SRV_REASS_FRAGS 64/' server/reass.c && "
                    "sed -i 's/^#define IP_REASS_MAX_PBUFS .*/#define IP_REASS_MAX_PBUFS 64/' "
                    "stack/lwipopts.h")
def test_rfc791_3_2_datagram_of_576_octets_in_8_octet_fragments_reassembled(node, link):
    """RFC 791 §3.2: "Every internet destination must be able to receive a datagram of 576
    octets either in one piece or in fragments to be reassembled", and "the minimum
    fragment is 8 octets" (a 68-octet MTU under a 60-octet header). A 576-octet UDP
    datagram in 70 fragments of 8 data octets, in order and then shuffled, reaches the echo
    service, whose echo carries the same octets."""
    for order in ("in order", "shuffled"):
        sport, payload = fresh_port(), os.urandom(576 - 28)
        frags = udp_fragments(node, sport, payload, new_ipid(), size=8)
        assert len(frags) == 70
        if order == "shuffled":
            random.shuffle(frags)
        for _, f in frags:
            link.send(f)
        echo = recv_echo(link, node, sport)
        assert echo == payload, f"the 576-octet datagram in 8-octet fragments ({order}) " \
            f"was not echoed ({'nothing' if echo is None else len(echo)})"


@requirement(fix="ulsd: server/reass.c (SRV_REASS_FRAGS); own: lwIP 2.1.3 (IP_REASS_MAX_PBUFS)",
             mutate="sed -i 's/d->nfrags == SRV_REASS_FRAGS ||/0 \\&\\&/' server/reass.c && "
                    "sed -i 's/^#define IP_REASS_MAX_PBUFS .*/#define IP_REASS_MAX_PBUFS 4096/' "
                    "stack/lwipopts.h", level="MAY")
def test_rfc4963_3_datagram_in_too_many_fragments_dropped_and_counted(node, link, counters):
    """RFC 4963 §3 (a reassembly buffer is a resource a remote host can exhaust), and RFC
    791 asks a destination for no more than 576 octets: a 4000-octet UDP datagram in 498
    fragments of 8 octets, more than the node keeps of one datagram (ulsd 128, lwIP 256
    pbufs), is not delivered; the drop is counted (ip_reass_limit) and the node holds no
    more than the bound (its RSS grows by less than 1 MB). Positive control: the same
    datagram in 1480-octet fragments is echoed."""
    before = counters()["ip_reass_limit"]
    rss0 = node_rss(node)
    sport, payload = fresh_port(), os.urandom(4000 - 28)
    frags = udp_fragments(node, sport, payload, new_ipid(), size=8)
    random.shuffle(frags)
    for _, f in frags:
        link.send(f)
    assert recv_echo(link, node, sport, 2.0) is None, "a 498-fragment datagram was delivered"
    assert wait_counter(counters, "ip_reass_limit", before + 1) > before, \
        "no reassembly limit was counted"
    assert node_rss(node) - rss0 < 1024, "the node held more than the bound"
    assert node.alive()
    sport = fresh_port()
    for _, f in udp_fragments(node, sport, payload, new_ipid()):
        link.send(f)
    assert recv_echo(link, node, sport) == payload, "control: the datagram was not echoed"


def node_rss(node):
    """The node process's resident set, in kB."""
    with open(f"/proc/{node.proc.pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def echo_fragments(node, payload, ipid, ident, seq):
    """The fragments (Ether frames) of one ICMP echo request to the node."""
    data = bytes(ICMP(type=8, id=ident, seq=seq) / payload)
    return [fragment_frame(node, ipid, off, data[off:off + FRAG], off + FRAG >= len(data), proto=1)
            for off in range(0, len(data), FRAG)]


@requirement(fix="ulsd: server/reass.c (for_node), server/fragment.c; own: lwIP 2.1.3",
             mutate="sed -i 's/release(s, d, !for_node(/release(s, d, 1 || !for_node(/' "
                    "server/reass.c && "
                    "sed -i 's/#define IP_FRAG  *1/#define IP_FRAG 0/' stack/lwipopts.h")
def test_rfc1122_3_2_2_6_fragmented_echo_request_answered_with_all_its_data(node, link):
    """RFC 1122 §3.2.2.6: "Data received in an ICMP Echo Request MUST be entirely included
    in the resulting Echo Reply." A 4000-octet echo request in three fragments, to the
    node's own address (no process owns ICMP echo: on a ulsd node, ulsd answers the
    datagram it reassembled): the reply carries the same identifier, sequence number and
    4000 octets, in fragments no longer than the link's 1500 octets."""
    payload, ident, seq = os.urandom(4000), random.randrange(1, 1 << 16), 7
    sizes = []
    for f in echo_fragments(node, payload, new_ipid(), ident, seq):
        link.send(f)
    held, deadline = {}, time.monotonic() + 3
    while True:
        data = recv_datagram(link, node, 1, max(0.0, deadline - time.monotonic()), held, sizes)
        assert data is not None, "no (whole) echo reply to the fragmented echo request"
        reply = ICMP(data)
        if reply.type == 0 and reply.id == ident:
            break
    assert reply.seq == seq
    assert bytes(reply.payload) == payload, f"the reply's data differs ({len(reply.payload)} octets)"
    assert max(sizes) <= FRAG + 20, f"a fragment of the reply is longer than the link: {sizes}"
    assert len(sizes) >= 3, f"the reply came in {len(sizes)} frames"
