#!/usr/bin/env bash
#
# test_testbed.sh - self-check for tests/testbed/testbed.  Run as root.
#
# Builds and tears down testbeds named ulstbselftest* (never the default
# "ulstb"), checks topology, MTU, isolation, idempotence, cleanup and argument
# validation, the loss impairment (`impair`: checked at the receivers against its
# counters), and that the root namespace's links, namespace list and nftables
# ruleset are the same afterwards.  Output is TAP ("ok N - name" / "not ok N - name");
# exit status 0 only if every check passed.
#
# The traffic checks (TAP <-> kernel peer, Scapy interface) need python3
# (standard library only); they are skipped without it.
#
# The predicate functions below are called indirectly, through check().
# shellcheck disable=SC2317
set -uo pipefail    # no -e: one failing check must not stop the others

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TESTBED=$HERE/testbed
# The names carry the run's TB_SUFFIX themselves, and the script below runs without it, so
# the expected names are the names the testbed makes.
SFX=${TB_SUFFIX:-}
unset TB_SUFFIX
export TB_NAME=ulstbselftest$SFX
SECOND=ulstbselftest2$SFX   # a second, coexisting testbed
FOREIGN=ulstbselftest3$SFX  # TB_NAME whose -k1 namespace is "someone else's"
FOREIGN_NS=$FOREIGN-k1

TMP=$(mktemp -d /tmp/test_testbed.XXXXXX)
num=0
failed=0
foreign_created=0

# ---------------------------------------------------------------------------
# TAP output helpers
# ---------------------------------------------------------------------------
pass() { num=$((num + 1)); echo "ok $num - $1"; }
fail() {
    num=$((num + 1)); failed=$((failed + 1))
    echo "not ok $num - $1"
    [[ -s $TMP/out ]] && sed 's/^/#   /' "$TMP/out" | tail -n 20
    return 0
}
skip() { num=$((num + 1)); echo "ok $num - $1 # SKIP $2"; }
# check NAME CMD...: CMD's output is kept for the diagnostics of a failure.
check() {
    local name=$1; shift
    if "$@" >"$TMP/out" 2>&1; then pass "$name"; else fail "$name"; fi
}
# result NAME: pass/fail on the exit status of the command just before it.
result() {
    local st=$?
    if (( st == 0 )); then pass "$1"; else fail "$1"; fi
}
note() { echo "# $*"; }

# ---------------------------------------------------------------------------
# Cleanup, also on failure or interrupt
# ---------------------------------------------------------------------------
cleanup() {
    TB_NAME=$TB_NAME "$TESTBED" down >/dev/null 2>&1
    TB_NAME=$SECOND "$TESTBED" down >/dev/null 2>&1
    TB_NAME=$FOREIGN "$TESTBED" down >/dev/null 2>&1
    if (( foreign_created )); then ip netns del "$FOREIGN_NS" 2>/dev/null; fi
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------------------
# Helpers for the checks
# ---------------------------------------------------------------------------
root_links() { ip -o link show; }
# Names only: "(id: N)" appears when the root namespace assigns an nsid, which
# is bookkeeping, not a change of the namespace list.
# Only this script's own namespaces: other test runs may bring theirs up or down meanwhile.
root_netns() { ip netns list | awk '{print $1}' | grep '^ulstbselftest' | sort; }
ns_present() { ip netns list | awk '{print $1}' | grep -qxF -- "$1"; }
ns_inode() { stat -L -c %i "/run/netns/$1" 2>/dev/null; }

# Exact expected stdout of `up` for N nodes and MTU M.
expected_env() {
    local name=$1 nodes=$2 mtu=$3 i
    printf 'export TB_NAME=%s\nexport TB_NETNS=%s\nexport TB_KERNEL_NETNS=%s-k1\n' "$name" "$name" "$name"
    printf 'export TB_KERNEL2_NETNS=%s-k2\nexport TB_NODES=%s\nexport TB_MTU=%s\nexport TB_PREFIX=24\n' "$name" "$nodes" "$mtu"
    for ((i = 1; i <= nodes; i++)); do
        printf 'export TB_NODE%d_IP=198.18.0.%d\nexport TB_NODE%d_TAP=uls%d\nexport TB_NODE%d_MAC=02:75:6c:00:00:%02x\n' \
            "$i" "$i" "$i" "$i" "$i" "$i"
    done
    printf 'export TB_ULSD=0\n'
    printf 'export TB_KERNEL_IP=198.18.0.100\nexport TB_KERNEL2_IP=198.18.0.101\nexport TB_SCAPY_IF=scapy0\n'
    printf 'export TB_SCAPY_IP=198.18.0.200\nexport TB_SCAPY_MAC=02:75:6c:00:00:c8\n'
    printf 'export TB_HOSTS=1\n'
}

# dev_mtu NS DEV MTU: DEV exists in NS with exactly MTU.
dev_mtu() { ip -n "$1" -o link show dev "$2" | grep -q " mtu $3 "; }

devices_ok() {
    local nodes=$1 mtu=$2 i dev
    for dev in br0 scapy0 scapy0-br k1-br k2-br; do
        dev_mtu "$TB_NETNS" "$dev" "$mtu" || { echo "$TB_NETNS/$dev: missing or wrong MTU"; return 1; }
    done
    for ((i = 1; i <= nodes; i++)); do
        dev_mtu "$TB_NETNS" "uls$i" "$mtu" || { echo "uls$i: missing or wrong MTU"; return 1; }
        ip -n "$TB_NETNS" -d link show dev "uls$i" | grep -q 'tun type tap' || { echo "uls$i is not a tap"; return 1; }
    done
    if ip -n "$TB_NETNS" link show dev "uls$((nodes + 1))" >/dev/null 2>&1; then
        echo "uls$((nodes + 1)) should not exist"; return 1
    fi
    dev_mtu "$TB_KERNEL_NETNS" eth0 "$mtu" || { echo "k1 eth0: missing or wrong MTU"; return 1; }
    dev_mtu "$TB_KERNEL2_NETNS" eth0 "$mtu" || { echo "k2 eth0: missing or wrong MTU"; return 1; }
}

bridge_ports_ok() {
    local want got i
    want=$( { for ((i = 1; i <= TB_NODES; i++)); do echo "uls$i"; done; echo scapy0-br; echo k1-br; echo k2-br; } | sort)
    got=$(ip -n "$TB_NETNS" -o link show master br0 | awk -F': ' '{sub(/@.*/, "", $2); print $2}' | sort)
    [[ $want == "$got" ]] || { echo "bridge ports: want [$want] got [$got]"; return 1; }
    ip -n "$TB_NETNS" -d link show dev br0 | grep -q 'forward_delay 0 .*stp_state 0' ||
        { ip -n "$TB_NETNS" -d link show dev br0; return 1; }
}

# Only lo's 127.0.0.1 in the node namespace; the kernel peers have exactly
# their /24; and no IPv6 addresses anywhere.
addresses_ok() {
    local a
    a=$(ip -n "$TB_NETNS" -o addr show | awk '{print $2, $3, $4}')
    [[ $a == "lo inet 127.0.0.1/8" ]] || { echo "node ns addresses: $a"; return 1; }
    a=$(ip -n "$TB_KERNEL_NETNS" -o addr show dev eth0 | awk '{print $3, $4}')
    [[ $a == "inet 198.18.0.100/24" ]] || { echo "k1 addresses: $a"; return 1; }
    a=$(ip -n "$TB_KERNEL2_NETNS" -o addr show dev eth0 | awk '{print $3, $4}')
    [[ $a == "inet 198.18.0.101/24" ]] || { echo "k2 addresses: $a"; return 1; }
}

sysctls_ok() {
    local ns v
    for ns in "$TB_NETNS" "$TB_KERNEL_NETNS" "$TB_KERNEL2_NETNS"; do
        [[ -d /proc/sys/net/ipv6 ]] || break
        for v in all default; do
            [[ $(ip netns exec "$ns" sysctl -n "net.ipv6.conf.$v.disable_ipv6") == 1 ]] ||
                { echo "$ns: ipv6 $v not disabled"; return 1; }
        done
        [[ $(ip netns exec "$ns" sysctl -n net.ipv6.conf.eth0.disable_ipv6 2>/dev/null || echo 1) == 1 ]] ||
            { echo "$ns: ipv6 on eth0"; return 1; }
    done
    [[ $(ip netns exec "$TB_NETNS" sysctl -n net.ipv6.conf.scapy0.disable_ipv6) == 1 ]] || { echo "ipv6 on scapy0"; return 1; }
    [[ $(ip netns exec "$TB_NETNS" sysctl -n net.ipv4.ip_forward) == 0 ]] || { echo "ip_forward on"; return 1; }
}

# Runs the probe helper inside namespace $1.
probe() { local ns=$1; shift; ip netns exec "$ns" python3 "$TMP/probe.py" "$@"; }

# gone PID: our child PID has exited (within 3 s); reaps it.  Kills it if not.
gone() {
    local i st
    for ((i = 0; i < 30; i++)); do
        st=$(ps -o stat= -p "$1" 2>/dev/null)
        if [[ -z $st || $st == Z* ]]; then wait "$1" 2>/dev/null; return 0; fi
        sleep 0.1
    done
    echo "process $1 still running"
    kill -KILL "$1" 2>/dev/null; wait "$1" 2>/dev/null
    return 1
}

stdout_is_exports_only() { ! grep -vE '^export TB_[A-Z0-9_]+=[^[:space:]]+$' "$1"; }

# ---------------------------------------------------------------------------
# Traffic probe (python3, standard library only)
# ---------------------------------------------------------------------------
cat >"$TMP/probe.py" <<'PYEOF'
import ctypes, fcntl, os, select, socket, struct, sys, time

def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF

mac_b = lambda m: bytes(int(x, 16) for x in m.split(":"))
ip_b = socket.inet_aton

def arp_request(src_mac, src_ip, dst_ip):
    eth = b"\xff" * 6 + mac_b(src_mac) + b"\x08\x06"
    return eth + struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1,
                             mac_b(src_mac), ip_b(src_ip), b"\0" * 6, ip_b(dst_ip))

def is_arp_reply(f, to_mac, from_ip):
    return (len(f) >= 42 and f[12:14] == b"\x08\x06" and f[0:6] == mac_b(to_mac)
            and f[20:22] == b"\x00\x02" and f[28:32] == ip_b(from_ip))

def exchange(send, recv, frame, match, timeout=3.0):
    """Send frame every 0.2 s until recv() yields a frame satisfying match."""
    end = time.time() + timeout
    while time.time() < end:
        send(frame)
        t = time.time() + 0.2
        while time.time() < t:
            f = recv(t - time.time())
            if f is not None and match(f):
                return f
    return None

def tap_open(name):
    fd = os.open("/dev/net/tun", os.O_RDWR)
    # TUNSETIFF, IFF_TAP|IFF_NO_PI|IFF_MULTI_QUEUE: the testbed makes its TAPs multi-queue
    fcntl.ioctl(fd, 0x400454CA, struct.pack("16sH", name.encode(), 0x0002 | 0x1000 | 0x0100))
    def recv(t):
        r, _, _ = select.select([fd], [], [], max(t, 0))
        return os.read(fd, 70000) if r else None
    return (lambda f: os.write(fd, f)), recv

def packet_open(ifname):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))  # ETH_P_ALL
    s.bind((ifname, 0))
    def recv(t):
        s.settimeout(max(t, 0.001))
        try:
            return s.recv(70000)
        except socket.timeout:
            return None
    return s, (lambda f: s.send(f)), recv

def tap_ping(tap, mac, ip, peer, mtu):
    """ARP for the kernel peer through the TAP, then an MTU-sized ICMP echo."""
    send, recv = tap_open(tap)
    r = exchange(send, recv, arp_request(mac, ip, peer), lambda f: is_arp_reply(f, mac, peer))
    if r is None:
        sys.exit("no ARP reply from %s via %s" % (peer, tap))
    peer_mac = r[6:12]
    payload = bytes(i & 0xFF for i in range(mtu - 28))
    icmp = struct.pack("!BBHHH", 8, 0, 0, 0x1234, 1) + payload
    icmp = icmp[:2] + struct.pack("!H", csum(icmp)) + icmp[4:]
    iph = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(icmp), 1, 0x4000, 64, 1, 0, ip_b(ip), ip_b(peer))
    iph = iph[:10] + struct.pack("!H", csum(iph)) + iph[12:]
    frame = peer_mac + mac_b(mac) + b"\x08\x00" + iph + icmp
    def match(f):
        return (f[12:14] == b"\x08\x00" and f[14 + 9] == 1 and f[26:30] == ip_b(peer)
                and f[34] == 0 and f[42:] == payload)
    if exchange(send, recv, frame, match) is None:
        sys.exit("no %d-byte ICMP echo reply from %s" % (mtu, peer))
    print("tap %s: ARP + %d-byte ICMP echo with %s ok" % (tap, mtu, peer))

def tap_echo(tap, mac, ip, peer, peer_mac, count):
    """`count` ICMP echo requests written into the TAP, 3 ms apart, to the kernel peer
    (whose neighbour entry for us the caller made static: no ARP); prints how many were
    sent and how many distinct replies came back within 1 s of the last."""
    send, recv = tap_open(tap)
    payload = b"impair" * 8
    got = set()
    def match(f):
        if (len(f) >= 42 and f[12:14] == b"\x08\x00" and f[23] == 1 and f[26:30] == ip_b(peer)
                and f[34] == 0 and f[38:40] == b"\x43\x21"):
            got.add(struct.unpack("!H", f[40:42])[0])
    for seq in range(count):
        icmp = struct.pack("!BBHHH", 8, 0, 0, 0x4321, seq) + payload
        icmp = icmp[:2] + struct.pack("!H", csum(icmp)) + icmp[4:]
        iph = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(icmp), seq, 0x4000, 64, 1, 0,
                          ip_b(ip), ip_b(peer))
        iph = iph[:10] + struct.pack("!H", csum(iph)) + iph[12:]
        send(mac_b(peer_mac) + mac_b(mac) + b"\x08\x00" + iph + icmp)
        end = time.time() + 0.003
        while time.time() < end:
            f = recv(end - time.time())
            if f is not None:
                match(f)
    end = time.time() + 1.0
    while time.time() < end:
        f = recv(end - time.time())
        if f is not None:
            match(f)
    print("sent %d received %d" % (count, len(got)))

def scapy_arp(ifname, mac, ip, peer):
    """A frame from the fake Scapy MAC gets its answer back on scapy0."""
    _, send, recv = packet_open(ifname)
    if exchange(send, recv, arp_request(mac, ip, peer), lambda f: is_arp_reply(f, mac, peer)) is None:
        sys.exit("no ARP reply addressed to %s on %s" % (mac, ifname))
    print("ARP reply to fake MAC %s seen on %s" % (mac, ifname))

def l4_ok(f, proto):
    ihl = (f[14] & 0x0F) * 4
    ip, seg = f[14:14 + ihl], f[14 + ihl:14 + struct.unpack("!H", f[16:18])[0]]
    pseudo = ip[12:20] + struct.pack("!BBH", 0, proto, len(seg))
    return csum(pseudo + seg) == 0

def scapy_checksums(ifname, peer_netns, src, dst):
    """Frames the kernel peer sends toward Scapy arrive with full checksums."""
    sock, _, recv = packet_open(ifname)   # created here, in the node namespace
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(os.open("/run/netns/" + peer_netns, os.O_RDONLY), 0x40000000) != 0:
        sys.exit("setns failed")
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.sendto(b"u" * 300, (dst, 9))
    t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    t.setblocking(False)
    try:
        t.connect((dst, 9))           # emits a SYN
    except BlockingIOError:
        pass
    seen = {}
    end = time.time() + 3
    while time.time() < end and len(seen) < 2:
        f = recv(end - time.time())
        if f is None or f[12:14] != b"\x08\x00" or f[26:30] != ip_b(src):
            continue
        proto = f[23]
        if proto in (6, 17) and proto not in seen:
            seen[proto] = l4_ok(f, proto)
    names = {6: "TCP SYN", 17: "UDP"}
    for p in (17, 6):
        if p not in seen:
            sys.exit("no %s from %s seen on %s" % (names[p], src, ifname))
        if not seen[p]:
            sys.exit("%s from %s has a bad/partial checksum on %s" % (names[p], src, ifname))
    print("UDP and TCP SYN checksums on %s are complete" % ifname)

def quiet(ifname, seconds):
    """Nobody sends unsolicited frames onto the testbed bridge."""
    _, _, recv = packet_open(ifname)
    frames, end = [], time.time() + seconds
    while time.time() < end:
        f = recv(end - time.time())
        if f is not None:
            frames.append(f[:34].hex())
    if frames:
        sys.exit("unsolicited frames on %s: %s" % (ifname, frames))
    print("no frames on %s for %.1f s" % (ifname, seconds))

cmd, args = sys.argv[1], sys.argv[2:]
if cmd == "tap_ping":
    tap_ping(args[0], args[1], args[2], args[3], int(args[4]))
elif cmd == "tap_echo":
    tap_echo(args[0], args[1], args[2], args[3], args[4], int(args[5]))
elif cmd == "scapy_arp":
    scapy_arp(*args)
elif cmd == "scapy_checksums":
    scapy_checksums(*args)
elif cmd == "quiet":
    quiet(args[0], float(args[1]))
PYEOF

# ---------------------------------------------------------------------------
# Preconditions
# ---------------------------------------------------------------------------
if (( EUID != 0 )); then
    echo "Bail out! must run as root"
    exit 1
fi
for ns in "$TB_NAME"{,-k1,-k2} "$SECOND"{,-k1,-k2} "$FOREIGN"{,-k1,-k2}; do
    if ns_present "$ns"; then
        echo "Bail out! namespace $ns already exists (leftover? run: TB_NAME=${ns%-k[12]} $TESTBED down)"
        exit 1
    fi
done
have_python=0
command -v python3 >/dev/null && have_python=1

root_links >"$TMP/links.before"
root_netns >"$TMP/netns.before"
have_nft=0
command -v nft >/dev/null && have_nft=1
root_nft() { if (( have_nft )); then nft list ruleset 2>&1; fi; }
root_nft >"$TMP/nft.before"

# ---------------------------------------------------------------------------
# up --nodes 3 --mtu 9000
# ---------------------------------------------------------------------------
"$TESTBED" up --no-ulsd --nodes 3 --mtu 9000 >"$TMP/up1" 2>"$TMP/up1.err"
rc=$?
cp "$TMP/up1.err" "$TMP/out"
if (( rc == 0 )); then pass "up --nodes 3 --mtu 9000 exits 0"; else fail "up --nodes 3 --mtu 9000 exits 0 (rc=$rc)"; fi
check "up prints only export lines on stdout" stdout_is_exports_only "$TMP/up1"
expected_env "$TB_NAME" 3 9000 >"$TMP/up1.expected"
check "up stdout is exactly the expected export lines" diff "$TMP/up1.expected" "$TMP/up1"

eval "$(cat "$TMP/up1")"
check "eval sets TB_NODES=3 TB_MTU=9000 TB_NETNS" \
    test "${TB_NODES:-}:${TB_MTU:-}:${TB_NETNS:-}" = "3:9000:$TB_NAME"
{ ns_present "$TB_NETNS" && ns_present "$TB_KERNEL_NETNS" && ns_present "$TB_KERNEL2_NETNS"; } >"$TMP/out" 2>&1
result "namespaces exist"
check "devices exist with MTU 9000 (br0, uls1..3, scapy0, veths, peers)" devices_ok 3 9000
check "br0 ports are uls1..3, scapy0-br, k1-br, k2-br; STP off, forward_delay 0" bridge_ports_ok
check "addresses: none in node ns but 127.0.0.1, peers have their /24" addresses_ok
check "IPv6 disabled everywhere, no IPv4 forwarding in node ns" sysctls_ok
check "state file matches up output" cmp "/run/ulstack-testbed/$TB_NAME.env" "$TMP/up1"

if (( have_python )); then
    check "testbed is quiet: no unsolicited frames on scapy0" probe "$TB_NETNS" quiet "$TB_SCAPY_IF" 1.5
else
    skip "testbed is quiet" "python3 not available"
fi

if command -v ping >/dev/null; then
    check "k1 pings k2 (ping -c1 -W1 $TB_KERNEL2_IP)" \
        ip netns exec "$TB_KERNEL_NETNS" ping -c1 -W1 "$TB_KERNEL2_IP"
    check "k1 pings k2 with an MTU-sized, unfragmented packet" \
        ip netns exec "$TB_KERNEL_NETNS" ping -c1 -W1 -M "do" -s $((TB_MTU - 28)) "$TB_KERNEL2_IP"
else
    skip "k1 pings k2" "ping not installed"
    skip "k1 pings k2 with an MTU-sized packet" "ping not installed"
fi

if (( have_python )); then
    check "TAP uls2 <-> kernel peer: ARP + MTU-sized ICMP echo" \
        probe "$TB_NETNS" tap_ping "$TB_NODE2_TAP" "$TB_NODE2_MAC" "$TB_NODE2_IP" "$TB_KERNEL_IP" "$TB_MTU"
    check "scapy0 gets replies addressed to TB_SCAPY_MAC" \
        probe "$TB_NETNS" scapy_arp "$TB_SCAPY_IF" "$TB_SCAPY_MAC" "$TB_SCAPY_IP" "$TB_KERNEL2_IP"
    ip -n "$TB_KERNEL_NETNS" neigh replace "$TB_SCAPY_IP" lladdr "$TB_SCAPY_MAC" dev eth0
    check "scapy0 sees complete checksums from the kernel peer (offloads off)" \
        probe "$TB_NETNS" scapy_checksums "$TB_SCAPY_IF" "$TB_KERNEL_NETNS" "$TB_KERNEL_IP" "$TB_SCAPY_IP"
else
    skip "TAP <-> kernel peer traffic" "python3 not available"
    skip "scapy0 gets replies addressed to TB_SCAPY_MAC" "python3 not available"
    skip "scapy0 sees complete checksums" "python3 not available"
fi

"$TESTBED" status >"$TMP/status" 2>&1; rc=$?
{ cat "$TMP/status"; (( rc == 0 )) && grep -q "$TB_NAME: up (nodes=3 mtu=9000)" "$TMP/status"; } >"$TMP/out" 2>&1
result "status exits 0 and reports up"
"$TESTBED" env >"$TMP/env1" 2>/dev/null; rc=$?
{ (( rc == 0 )) && cmp "$TMP/env1" "$TMP/up1"; } >"$TMP/out" 2>&1
result "env exits 0 and re-prints the same lines"

# ---------------------------------------------------------------------------
# Impairment: random loss at the bridge ports' ingress, checked at the receivers
# ---------------------------------------------------------------------------
# counter JSON PORT FIELD (PORT "" = the totals) from `impair-stats`
stat_of() {
    python3 -c 'import json, sys
d = json.loads(sys.argv[1])
print(d[sys.argv[3]] if not sys.argv[2] else d["ports"][sys.argv[2]][sys.argv[3]])' "$@"
}
rx_packets() { ip -n "$1" -s -j link show dev "$2" | python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["stats64"]["rx"]["packets"])'; }
# in_band X LO HI: LO <= X <= HI (decimals)
in_band() { python3 -c 'import sys; x, lo, hi = map(float, sys.argv[1:]); sys.exit(not lo <= x <= hi)' "$@"; }

# The 30% ping check: k1 sends 400 echo requests to k2; every frame of it crosses one
# impaired port each way (k1-br for requests, k2-br for replies). Static neighbours, so
# that no ARP frame is dropped or sent: the counters then hold ICMP alone.
impair_ping_ok() {
    local stats out sent recvd lost rx0 rx1 req_seen req_drop
    stats=$("$TESTBED" impair-stats 2>&1) || { echo "$stats"; return 1; }
    [[ $(stat_of "$stats" "" frames) == 0 ]] || { echo "counters not zero at the start: $stats"; return 1; }
    rx0=$(rx_packets "$TB_KERNEL2_NETNS" eth0)
    out=$(ip netns exec "$TB_KERNEL_NETNS" ping -n -q -c 400 -i 0.005 -W 1 "$TB_KERNEL2_IP" 2>&1)
    echo "$out"
    rx1=$(rx_packets "$TB_KERNEL2_NETNS" eth0)
    stats=$("$TESTBED" impair-stats 2>&1) || { echo "$stats"; return 1; }
    echo "$stats"
    sent=$(sed -nE 's/^([0-9]+) packets transmitted, ([0-9]+) received.*/\1/p' <<<"$out")
    recvd=$(sed -nE 's/^([0-9]+) packets transmitted, ([0-9]+) received.*/\2/p' <<<"$out")
    [[ $sent == 400 && -n $recvd ]] || { echo "cannot read ping's summary"; return 1; }
    lost=$((sent - recvd))
    req_seen=$(stat_of "$stats" k1-br frames) req_drop=$(stat_of "$stats" k1-br dropped)
    echo "ping lost $lost of $sent; k1-br saw $req_seen dropped $req_drop; k2 eth0 received $((rx1 - rx0))"
    # Every request entered at k1-br; the ones not dropped there reached k2 (its receive
    # counter), and a ping is lost exactly when its request or its reply was dropped.
    # Static neighbours keep ARP out of the ping itself, but k1 has been seen to put one or
    # two more frames through k1-br meanwhile (not echo requests, not for k2: an ARP probe
    # of the neighbour learnt in the TAP check, say): allow a few, in both balances below.
    local extra=$((req_seen - sent))
    (( extra >= 0 && extra <= 4 )) || { echo "k1-br saw $req_seen frames, ping sent $sent"; return 1; }
    local rx=$((rx1 - rx0)) want=$((req_seen - req_drop))
    (( rx >= want - extra && rx <= want + extra )) || { echo "k2 received $rx, expected $want (other frames: $extra)"; return 1; }
    local dropped
    dropped=$(stat_of "$stats" "" dropped)
    (( lost <= dropped && dropped <= lost + extra )) || { echo "ping lost $lost, counters dropped $dropped (other frames: $extra)"; return 1; }
    # 30% each way: the requests that arrived lost 30%, the round trip 1 - 0.7^2 = 51%.
    # Bands of 5 sd at n = 400 (+-11.5 and +-12.5 points): a correct impairment falls
    # outside one by chance once in 1.7 million runs (3.5 sd, as before: once in 2,000).
    in_band "$(( (req_seen - (rx1 - rx0)) * 1000 / req_seen ))" 185 415 || { echo "request loss not near 30%"; return 1; }
    in_band "$(( lost * 1000 / sent ))" 385 635 || { echo "round-trip loss not near 51%"; return 1; }
}

# The same through a TAP: frames a process writes into uls1 enter the bridge at uls1.
impair_tap_ok() {
    local stats out sent recvd
    stats=$("$TESTBED" impair-stats 2>&1) || { echo "$stats"; return 1; }
    out=$(probe "$TB_NETNS" tap_echo "$TB_NODE1_TAP" "$TB_NODE1_MAC" "$TB_NODE1_IP" "$TB_KERNEL_IP" 02:75:6c:00:00:64 300) || { echo "$out"; return 1; }
    echo "$out"
    local stats1
    stats1=$("$TESTBED" impair-stats 2>&1) || { echo "$stats1"; return 1; }
    echo "$stats1"
    read -r _ sent _ recvd <<<"$out"
    local seen=$(( $(stat_of "$stats1" uls1 frames) - $(stat_of "$stats" uls1 frames) ))
    local dropped=$(( $(stat_of "$stats1" "" dropped) - $(stat_of "$stats" "" dropped) ))
    (( seen == sent )) || { echo "uls1 saw $seen frames, the probe wrote $sent"; return 1; }
    # Every dropped echo frame is a lost echo. On a loaded host a few replies have come back
    # after the probe stopped waiting (lost 142, dropped 139), and an ARP probe of k1's has
    # been dropped too (lost 145, dropped 146): allow 2% either way.
    local diff=$((sent - recvd - dropped))
    (( diff >= -sent / 50 && diff <= sent / 50 )) ||
        { echo "lost $((sent - recvd)), counters dropped $dropped"; return 1; }
    # 5 sd at n = 300 (+-14.4 points), as in impair_ping_ok.
    in_band "$(( (sent - recvd) * 1000 / sent ))" 366 654 || { echo "round-trip loss not near 51%"; return 1; }
}

if (( have_nft && have_python )) && command -v ping >/dev/null; then
    # The peers' learnt neighbours go before the impairment's counters start: one gone
    # stale since an earlier check is probed by ARP, and such a probe from k1 through k1-br
    # made the counters read 1 frame (28 bytes) before the ping started ("counters not
    # zero at the start", at load 15). With nothing left to probe, k1 sends only the ping.
    ip -n "$TB_KERNEL_NETNS" neigh flush dev eth0
    ip -n "$TB_KERNEL2_NETNS" neigh flush dev eth0
    "$TESTBED" impair --loss 30 >"$TMP/out" 2>&1
    result "impair --loss 30 exits 0"
    stats=$("$TESTBED" impair-stats 2>"$TMP/out")
    { echo "$stats"; [[ $(python3 -c 'import json, sys; d = json.loads(sys.argv[1]); print(d["loss_pct"], " ".join(sorted(d["ports"])))' "$stats") == "30 k1-br k2-br uls1 uls2 uls3" ]]; } >"$TMP/out" 2>&1
    result "impair-stats: loss_pct 30 on every TAP and kernel-peer port, not scapy0-br"
    ip -n "$TB_KERNEL_NETNS" neigh replace "$TB_KERNEL2_IP" lladdr 02:75:6c:00:00:65 dev eth0 nud permanent
    ip -n "$TB_KERNEL2_NETNS" neigh replace "$TB_KERNEL_IP" lladdr 02:75:6c:00:00:64 dev eth0 nud permanent
    ip -n "$TB_KERNEL_NETNS" neigh replace "$TB_NODE1_IP" lladdr "$TB_NODE1_MAC" dev eth0 nud permanent
    check "30% ingress loss: ping k1 -> k2 loses what the counters dropped, k2 received the rest" impair_ping_ok
    check "30% ingress loss through a TAP: the echoes lost are the frames the counters dropped" impair_tap_ok
    "$TESTBED" impair --loss 0.5 >"$TMP/out" 2>&1 &&
        [[ $(stat_of "$("$TESTBED" impair-stats)" "" frames) == 0 ]] >>"$TMP/out" 2>&1
    result "impair again replaces the rule and restarts its counters"
    "$TESTBED" unimpair >"$TMP/out" 2>&1
    result "unimpair exits 0"
    { ip netns exec "$TB_KERNEL_NETNS" ping -n -q -c 100 -i 0.005 -W 1 "$TB_KERNEL2_IP" | tee /dev/stderr |
        grep -q '^100 packets transmitted, 100 received, 0% packet loss' &&
        [[ $(stat_of "$("$TESTBED" impair-stats)" "" impaired) == False ]] &&
        ! ip netns exec "$TB_NETNS" nft list tables | grep -q ulstack_impair; } >"$TMP/out" 2>&1
    result "unimpair: the table is gone and 100 pings see 0% loss"
    check "impair --loss 100 exits 2" bash -c '"$0" impair --loss 100; (( $? == 2 ))' "$TESTBED"
    check "impair --loss 0.0001 exits 2" bash -c '"$0" impair --loss 0.0001; (( $? == 2 ))' "$TESTBED"
    check "impair without --loss exits 2" bash -c '"$0" impair; (( $? == 2 ))' "$TESTBED"
else
    skip "impairment checks" "needs nft (nftables), python3 and ping"
fi

# ---------------------------------------------------------------------------
# Idempotence and rebuild
# ---------------------------------------------------------------------------
inode_before=$(ns_inode "$TB_NETNS")
"$TESTBED" up --no-ulsd --nodes 3 --mtu 9000 >"$TMP/up2" 2>"$TMP/err"; rc=$?
{ cat "$TMP/err"; (( rc == 0 )) && cmp "$TMP/up1" "$TMP/up2"; } >"$TMP/out" 2>&1
result "up again with same args exits 0 with identical output"
check "up again did not rebuild (same namespace)" test "$(ns_inode "$TB_NETNS")" = "$inode_before"

"$TESTBED" up --no-ulsd --nodes 2 >"$TMP/up3" 2>"$TMP/err"; rc=$?
{ cat "$TMP/err"; (( rc == 0 )); } >"$TMP/out" 2>&1
result "up --nodes 2 (rebuild) exits 0"
expected_env "$TB_NAME" 2 1500 >"$TMP/up3.expected"
check "rebuild output is for 2 nodes, MTU 1500" diff "$TMP/up3.expected" "$TMP/up3"
eval "$(cat "$TMP/up3")"
check "rebuild: namespace recreated" test "$(ns_inode "$TB_NETNS")" != "$inode_before"
check "rebuild: devices for 2 nodes with MTU 1500, uls3 gone" devices_ok 2 1500

# ---------------------------------------------------------------------------
# A second testbed with another TB_NAME coexists
# ---------------------------------------------------------------------------
TB_NAME=$SECOND "$TESTBED" up --no-ulsd --nodes 1 >"$TMP/second" 2>"$TMP/err"; rc=$?
{ cat "$TMP/err"; (( rc == 0 )) && grep -qx "export TB_NETNS=$SECOND" "$TMP/second"; } >"$TMP/out" 2>&1
result "second testbed ($SECOND) comes up alongside"
{ "$TESTBED" status >/dev/null 2>&1 && TB_NAME=$SECOND "$TESTBED" status >/dev/null 2>&1; } >"$TMP/out" 2>&1
result "both testbeds report up"
TB_NAME=$SECOND "$TESTBED" down >"$TMP/out" 2>&1
{ ! ns_present "$SECOND" && ! ns_present "$SECOND-k1" && "$TESTBED" status >/dev/null 2>&1; } >"$TMP/out" 2>&1
result "second testbed down leaves the first intact"

# ---------------------------------------------------------------------------
# down: kills processes left in the namespaces, removes everything, twice
# ---------------------------------------------------------------------------
ip netns exec "$TB_NETNS" sleep 300 &
sleeper_node=$!
ip netns exec "$TB_KERNEL_NETNS" sleep 300 &
sleeper_k1=$!
sleep 0.3
"$TESTBED" down >"$TMP/down1" 2>"$TMP/err"; rc=$?
{ cat "$TMP/err"; (( rc == 0 )) && [[ ! -s $TMP/down1 ]]; } >"$TMP/out" 2>&1
result "down exits 0 with empty stdout"
{ gone "$sleeper_node" && gone "$sleeper_k1"; } >"$TMP/out" 2>&1
result "down killed processes left inside the namespaces"
{ ! ns_present "$TB_NAME" && ! ns_present "$TB_NAME"-k1 && ! ns_present "$TB_NAME"-k2 && [[ ! -e /run/ulstack-testbed/$TB_NAME.env ]]; } >"$TMP/out" 2>&1
result "namespaces and state file are gone"
"$TESTBED" down >"$TMP/down2" 2>"$TMP/err"; rc=$?
{ cat "$TMP/err"; (( rc == 0 )) && [[ ! -s $TMP/down2 ]]; } >"$TMP/out" 2>&1
result "down again exits 0"
"$TESTBED" status >/dev/null 2>&1; rc=$?
{ (( rc == 1 )); } >"$TMP/out" 2>&1
result "status exits 1 when down"
"$TESTBED" env >"$TMP/env2" 2>"$TMP/err"; rc=$?
{ cat "$TMP/err"; (( rc == 1 )) && [[ ! -s $TMP/env2 ]]; } >"$TMP/out" 2>&1
result "env exits 1 with empty stdout when down"
if (( have_nft )); then
    "$TESTBED" impair --loss 1 >"$TMP/imp.out" 2>"$TMP/out"; rc=$?
    { (( rc == 1 )) && [[ ! -s $TMP/imp.out ]] && ! ns_present "$TB_NAME"; } >>"$TMP/out" 2>&1
    result "impair on a testbed that is down exits 1 and creates nothing"
fi

# ---------------------------------------------------------------------------
# up --hosts 2: a second host joined by the wire
# ---------------------------------------------------------------------------
two_hosts_ok() {
    local ns
    for ns in "$TB_NAME" "$TB_NAME-h2" "$TB_NAME-h2k"; do ns_present "$ns" || { echo "no $ns"; return 1; }; done
    dev_mtu "$TB_NAME" wire0 1500 && dev_mtu "$TB_NAME-h2" wire0 1500 || { echo "wire0 MTU"; return 1; }
    ip -n "$TB_NAME-h2" -o link show dev wire0 | grep -q "master br0" || { echo "wire0 not on h2's br0"; return 1; }
    ip -n "$TB_NAME" -o link show dev wire0 | grep -q "master br0" || { echo "wire0 not on br0"; return 1; }
    ip -n "$TB_NAME-h2" -o link show dev uls1 | grep -q "master br0" || { echo "h2 uls1"; return 1; }
    if command -v ethtool >/dev/null; then
        ip netns exec "$TB_NAME-h2" ethtool -k wire0 | grep -q '^tcp-segmentation-offload: off' || { echo "TSO on the wire"; return 1; }
    fi
    ip -n "$TB_NAME-h2k" -4 -o addr show dev eth0 | grep -q ' 198.18.0.110/24 ' || { echo "h2k address"; return 1; }
}
"$TESTBED" up --no-ulsd --hosts 2 --nodes 1 >"$TMP/up-h2" 2>"$TMP/up-h2.err"
rc=$?
{ cat "$TMP/up-h2.err"; (( rc == 0 )); } >"$TMP/out" 2>&1
result "up --hosts 2 --nodes 1 exits 0"
check "up --hosts 2 prints only export lines" stdout_is_exports_only "$TMP/up-h2"
check "up --hosts 2 exports host 2's node, namespaces and peer" grep -qxF \
    "export TB_H2_NODE1_IP=198.18.0.33" "$TMP/up-h2"
check "two hosts: namespaces, wire0 (MTU 1500, no TSO) on both bridges, host 2's TAP and peer" two_hosts_ok
{ ip netns exec "$TB_NAME-k1" ping -c 1 -W 2 198.18.0.110; } >"$TMP/out" 2>&1
result "host 1's Linux peer reaches host 2's across the wire"
"$TESTBED" down >"$TMP/out" 2>&1
{ cat "$TMP/out"; ! ns_present "$TB_NAME" && ! ns_present "$TB_NAME-h2" && ! ns_present "$TB_NAME-h2k" && ! ns_present "$TB_NAME-k1"; } >"$TMP/out2" 2>&1
mv "$TMP/out2" "$TMP/out"
result "down removes both hosts' namespaces"

# ---------------------------------------------------------------------------
# up --ipv6: the kernel peers get IPv6 addresses on eth0 (docs/ipv6.md), the node
# namespace keeps IPv6 off, and the IPv4 exports are the ones of a testbed without it
# ---------------------------------------------------------------------------
ipv6_ok() {
    local ns a
    # Whole output first: with pipefail, `ip | grep -q` fails when grep stops reading early.
    a=$(ip -n "$TB_NAME-k1" -6 -o addr show dev eth0)
    grep -q ' 2001:db8:0:1::100/64 ' <<<"$a" || { echo "k1 IPv6 address: $a"; return 1; }
    a=$(ip -n "$TB_NAME-k2" -6 -o addr show dev eth0)
    grep -q ' 2001:db8:0:1::101/64 ' <<<"$a" || { echo "k2 IPv6 address: $a"; return 1; }
    for ns in "$TB_NAME-k1" "$TB_NAME-k2"; do
        [[ $(ip netns exec "$ns" sysctl -n net.ipv6.conf.eth0.accept_ra net.ipv6.conf.eth0.router_solicitations | tr '\n' ' ') == "0 0 " ]] ||
            { echo "$ns: router advertisements or solicitations on"; return 1; }
        [[ $(ip netns exec "$ns" sysctl -n net.ipv6.conf.all.disable_ipv6) == 1 ]] || { echo "$ns: IPv6 on beyond eth0"; return 1; }
    done
    for v in all default scapy0; do
        [[ $(ip netns exec "$TB_NAME" sysctl -n "net.ipv6.conf.$v.disable_ipv6") == 1 ]] || { echo "node ns: IPv6 $v on"; return 1; }
    done
}
"$TESTBED" up --no-ulsd --nodes 2 --ipv6 >"$TMP/up-6" 2>"$TMP/up-6.err"
rc=$?
{ cat "$TMP/up-6.err"; (( rc == 0 )); } >"$TMP/out" 2>&1
result "up --ipv6 exits 0"
{ expected_env "$TB_NAME" 2 1500
  printf 'export TB_IPV6=1\nexport TB_PREFIX6=64\nexport TB_NODE1_IP6=2001:db8:0:1::1\n'
  printf 'export TB_NODE2_IP6=2001:db8:0:1::2\nexport TB_KERNEL_IP6=2001:db8:0:1::100\n'
  printf 'export TB_KERNEL2_IP6=2001:db8:0:1::101\nexport TB_SCAPY_IP6=2001:db8:0:1::200\n'; } >"$TMP/up-6.expected"
check "up --ipv6 exports the IPv4 lines unchanged, then TB_IPV6, TB_PREFIX6, TB_NODEi_IP6, TB_KERNEL_IP6, TB_SCAPY_IP6" \
    diff "$TMP/up-6.expected" "$TMP/up-6"
check "up --ipv6: peers have their IPv6 /64 on eth0 only, no RA/RS; node ns keeps IPv6 off" ipv6_ok
{ ip netns exec "$TB_NAME-k1" ping -6 -c 1 -W 2 2001:db8:0:1::101; } >"$TMP/out" 2>&1
result "up --ipv6: k1 pings k2 over IPv6"
{ ip netns exec "$TB_NAME-k1" ping -c 1 -W 2 198.18.0.101; } >"$TMP/out" 2>&1
result "up --ipv6: k1 still pings k2 over IPv4"
"$TESTBED" up --no-ulsd --nodes 2 >"$TMP/up-6b" 2>"$TMP/out"
{ cat "$TMP/out"; a=$(ip -n "$TB_NAME-k1" -6 -o addr show dev eth0 2>&1)
  grep -q rebuilding "$TMP/out" && ! grep -q IP6 "$TMP/up-6b" && ! grep -q 2001:db8 <<<"$a"; } >"$TMP/out2" 2>&1
mv "$TMP/out2" "$TMP/out"
result "up without --ipv6 over an --ipv6 testbed rebuilds it without IPv6"
"$TESTBED" down >"$TMP/out" 2>&1

# ---------------------------------------------------------------------------
# A failing up cleans up after itself
# ---------------------------------------------------------------------------
for step in namespaces taps peers hosts state; do
    TB_TEST_FAIL_AT=$step "$TESTBED" up --no-ulsd --nodes 2 --hosts 2 >"$TMP/fail.out" 2>"$TMP/err"; rc=$?
    { cat "$TMP/err"; (( rc == 1 )) && [[ ! -s $TMP/fail.out ]] && ! ns_present "$TB_NAME" && ! ns_present "$TB_NAME"-k1 && ! ns_present "$TB_NAME"-k2 && ! ns_present "$TB_NAME"-h2 && ! ns_present "$TB_NAME"-h2k && [[ ! -e /run/ulstack-testbed/$TB_NAME.env && ! -e /run/ulstack-testbed/$TB_NAME.netns ]]; } >"$TMP/out" 2>&1
    result "up failing at step '$step' exits 1 and leaves nothing behind"
done

# ---------------------------------------------------------------------------
# A namespace the testbed did not create is never touched
# ---------------------------------------------------------------------------
ip netns add "$FOREIGN_NS" && foreign_created=1
TB_NAME=$FOREIGN "$TESTBED" up --no-ulsd >"$TMP/foreign.out" 2>"$TMP/err"; rc=$?
{ cat "$TMP/err"; (( rc == 1 )) && [[ ! -s $TMP/foreign.out ]] && ! ns_present "$FOREIGN" && ! ns_present "$FOREIGN-k2"; } >"$TMP/out" 2>&1
result "up refuses (exit 1) when a same-named namespace already exists"
TB_NAME=$FOREIGN "$TESTBED" down >"$TMP/out" 2>&1
check "the foreign namespace survives up and down" ns_present "$FOREIGN_NS"
ip netns del "$FOREIGN_NS" && foreign_created=0

# ---------------------------------------------------------------------------
# Bad arguments exit 2 and create nothing
# ---------------------------------------------------------------------------
bad_args() {
    local rc
    "$TESTBED" "$@" >"$TMP/bad.out" 2>"$TMP/bad.err"
    rc=$?
    cat "$TMP/bad.err"
    (( rc == 2 )) && [[ ! -s $TMP/bad.out ]] && ! ns_present "$TB_NAME"
}
check "up --nodes 0 exits 2" bad_args up --nodes 0
check "up --mtu 70000 exits 2" bad_args up --mtu 70000
check "up --bogus exits 2" bad_args up --bogus
check "up --nodes 17 exits 2" bad_args up --nodes 17
check "up --nodes abc exits 2" bad_args up --nodes abc
check "up --mtu 67 exits 2" bad_args up --mtu 67
check "up --hosts 3 exits 2" bad_args up --hosts 3
check "up --nodes (missing value) exits 2" bad_args up --nodes
check "no command exits 2" bad_args
check "unknown command exits 2" bad_args frobnicate
{ TB_NAME="../evil" bad_args up; } >"$TMP/out" 2>&1
result "bad TB_NAME exits 2"

# ---------------------------------------------------------------------------
# A suite interrupted (SIGINT, SIGTERM) takes its testbed down (tests/tblib.py)
# ---------------------------------------------------------------------------
# A session fixture as the suites have (down_once), brought up, then the suite's pytest is
# signalled by PID. Started in the background from this non-interactive script, it
# inherits SIGINT ignored, as a suite started with `&` by CI would.
PY=${PYTHON_TESTS:-/usr/bin/python3}
if "$PY" -m pytest --version >/dev/null 2>&1; then
    mkdir -p "$TMP/sig"
    cat >"$TMP/sig/conftest.py" <<PYEOF
import os, sys
import pytest
sys.path.insert(0, "$HERE/..")
from tblib import TESTBED, down_once, run_testbed
@pytest.fixture(scope="session")
def bed():
    with down_once(lambda: run_testbed(TESTBED, "$SECOND", "", "down")):
        run_testbed(TESTBED, "$SECOND", "", "up", "--no-ulsd", "--nodes", "1")
        yield
PYEOF
    cat >"$TMP/sig/test_sig.py" <<PYEOF
import time
def test_waits_for_the_signal(bed):
    open("$TMP/sig/up", "w").close()
    time.sleep(60)
PYEOF
    for sig in INT TERM; do
        rm -f "$TMP/sig/up"
        "$PY" -m pytest -q -p no:cacheprovider "$TMP/sig" >"$TMP/sig.out" 2>&1 &
        pid=$!
        for ((i = 0; i < 600; i++)); do [[ -e $TMP/sig/up ]] && break; sleep 0.1; done
        up_seen=0; ns_present "$SECOND" && up_seen=1
        kill -"$sig" "$pid" 2>/dev/null
        for ((i = 0; i < 300; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        exited=1
        if kill -0 "$pid" 2>/dev/null; then exited=0; kill -KILL "$pid" 2>/dev/null; fi
        wait "$pid" 2>/dev/null
        { cat "$TMP/sig.out"; (( up_seen && exited )) && ! ns_present "$SECOND" &&
            ! ns_present "$SECOND-k1" && ! ns_present "$SECOND-k2"; } >"$TMP/out" 2>&1
        result "SIG$sig to a suite's pytest: it exits and its testbed is down"
        TB_NAME=$SECOND "$TESTBED" down >/dev/null 2>&1
    done
else
    skip "SIGINT/SIGTERM to a suite's pytest take its testbed down" "no pytest for $PY"
fi

# ---------------------------------------------------------------------------
# The root namespace is exactly as before
# ---------------------------------------------------------------------------
root_links >"$TMP/links.after"
root_netns >"$TMP/netns.after"
check "root namespace links identical to before" diff "$TMP/links.before" "$TMP/links.after"
check "root netns list identical to before" diff "$TMP/netns.before" "$TMP/netns.after"
root_nft >"$TMP/nft.after"
check "root namespace nftables ruleset identical to before" diff "$TMP/nft.before" "$TMP/nft.after"

echo "1..$num"
if (( failed )); then
    note "$failed of $num checks failed"
    exit 1
fi
exit 0
