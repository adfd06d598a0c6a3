#!/usr/bin/env bash
#
# test_packages.sh - `make check-packages` (issue 16, item 3). Run as root.
#
# Builds the Debian packages (build-aux/build-deb, lintian included), installs them with
# dpkg, starts a node through ulsd@.service's own ExecStart line (systemd itself need not
# run: the line is read from the installed unit, %i replaced) inside a network namespace
# this test creates, with a TAP there, checks the node answers (ulsstat, ping from the
# namespace's kernel, a program under ulsrun, a C program built with pkg-config), stops
# it, and purges the packages. The machine is left as it was: it refuses to start when any
# of the packages is installed already, and compares dpkg's package list and the files the
# packages own before and after. Nothing is configured in the root namespace.
#
# Environment: TB_SUFFIX (names), ULS_LWIP_SRC (lwIP source for build-deb; make passes
# the build's), ULS_DEB_OUT (keep the packages there instead of a temporary directory).
# Output is TAP. Bounded: every wait has a limit; the build takes about a minute or two.
#
# shellcheck disable=SC2317  # cleanup is called through the trap
set -uo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SFX=${TB_SUFFIX:-}
NAME=ulspkg$SFX                 # the node: /etc/ulstack/$NAME.conf, ulsd@$NAME
NS=ulspkg$SFX-ns                # the namespace the node runs in
TAP=ulspk0                      # inside $NS only
NODE_IP=10.213.7.2 KERNEL_IP=10.213.7.1
PACKAGES="ulstack libuls0 libuls-dev libuls-preload"
UNIT=/lib/systemd/system/ulsd@.service
CONF=/etc/ulstack/$NAME.conf
T0=$(date +%s)

num=0 failed=0
pass() { num=$((num + 1)); echo "ok $num - $1"; }
fail() { num=$((num + 1)); failed=$((failed + 1)); echo "not ok $num - $1"; }
check() { local what=$1; shift; if "$@"; then pass "$what"; else fail "$what"; fi; }
finish() { echo "1..$num"; echo "# check-packages took $(($(date +%s) - T0)) s"; exit $((failed > 0)); }

[[ $(id -u) -eq 0 ]] || { echo "1..0 # SKIP needs root (dpkg, namespaces)"; exit 0; }
for p in $PACKAGES; do
    st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)
    if [[ -n $st && $st != not-installed ]]; then
        echo "Bail out! $p is installed already: the test installs and purges it, and would not leave the machine as it was"
        exit 1
    fi
done
if ip netns list | grep -qw "$NS"; then
    echo "Bail out! namespace $NS exists already (another run?)"; exit 1
fi

TMP=$(mktemp -d /tmp/ulspkg.XXXXXX)
OUT=${ULS_DEB_OUT:-$TMP/debs}
pid='' installed=0 had_run_ulstack=0 had_etc_ulstack=0
[[ -e /run/ulstack ]] && had_run_ulstack=1
[[ -e /etc/ulstack ]] && had_etc_ulstack=1
state() {
    # dpkg's view of every package, and what this test could leave behind.
    dpkg-query -W -f='${Package}:${Architecture} ${Version} ${Status}\n' | sort
    ls -d /etc/ulstack /run/ulstack /usr/libexec/ulstack "$UNIT" /usr/sbin/ulsd \
        /usr/include/uls.h /var/lib/systemd/deb-systemd-helper-enabled/ulsd@* 2>/dev/null
    ip netns list 2>/dev/null | grep -w "$NS"
    # anything named like ours, also what a maintainer script might make (dpkg -L does
    # not list that): on the root filesystem's /etc, /usr, /var/lib, /opt and /run
    # (not the state of other runs' testbeds, which come and go meanwhile)
    find /etc /usr /var/lib /opt /run -xdev -path /run/ulstack-testbed -prune -o \( -name '*ulsd*' -o -name '*ulstack*' \
        -o -name 'libuls*' -o -name 'uls.h' -o -name 'uls.pc' \) \
        -not -path '/usr/local/*' -print 2>/dev/null | sort
}
state >"$TMP/before"

cleanup() {
    if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    fi
    pid=''
    ip netns list | grep -qw "$NS" && ip netns del "$NS"
    rm -f "$CONF"
    if [[ $installed -eq 1 ]]; then
        # shellcheck disable=SC2086
        DEBIAN_FRONTEND=noninteractive dpkg --purge $PACKAGES >"$TMP/purge.log" 2>&1 ||
            { echo "# dpkg --purge failed:"; sed 's/^/# /' "$TMP/purge.log"; }
        installed=0
    fi
    [[ $had_etc_ulstack -eq 0 && -d /etc/ulstack ]] && rmdir /etc/ulstack 2>/dev/null
    [[ $had_run_ulstack -eq 0 && -d /run/ulstack ]] && rm -rf /run/ulstack
}
trap 'cleanup; rm -rf "$TMP"' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

# --- build -------------------------------------------------------------------
t=$(date +%s)
if timeout 1200 "$SRC/build-aux/build-deb" "$OUT" >"$TMP/build-deb.log" 2>&1; then
    pass "build-aux/build-deb builds the packages, lintian-clean ($(($(date +%s) - t)) s)"
else
    fail "build-aux/build-deb builds the packages, lintian-clean"
    tail -n 40 "$TMP/build-deb.log" | sed 's/^/# /'
    finish
fi
debs=()
for p in $PACKAGES; do
    f=$(ls "$OUT"/"${p}"_*.deb 2>/dev/null | head -n1)
    [[ -n $f ]] && debs+=("$f")
done
check "four packages: $PACKAGES" test "${#debs[@]}" -eq 4

# --- install -----------------------------------------------------------------
# Which of the directories the packages will own exist already (/usr/bin, ...).
for d in "${debs[@]}"; do dpkg-deb -c "$d"; done | awk '$1 ~ /^d/ { sub(/^\./, "", $6); sub(/\/$/, "", $6); print $6 }' |
    sort -u | while IFS= read -r d; do [[ -d $d ]] && printf '%s\n' "$d"; done >"$TMP/dirs-before"
installed=1   # from here on, cleanup purges (also a half-done install)
if DEBIAN_FRONTEND=noninteractive timeout 300 dpkg -i "${debs[@]}" >"$TMP/install.log" 2>&1; then
    pass "dpkg -i installs them"
else
    fail "dpkg -i installs them"; sed 's/^/# /' "$TMP/install.log"; finish
fi
for f in /usr/sbin/ulsd /usr/bin/ulsrun /usr/bin/ulsstat /usr/libexec/ulstack/ulsd-service \
         /usr/libexec/ulstack/testbed "$UNIT" /usr/include/uls.h /usr/share/man/man8/ulsd.8.gz; do
    [[ -e $f ]] || { fail "installed files are in place ($f missing)"; finish; }
done
pass "installed files are in place (ulsd, tools, ulsd-service, the unit, header, man pages)"
# shellcheck disable=SC2086
dpkg -L $PACKAGES | sort -u >"$TMP/owned"
if command -v systemd-analyze >/dev/null; then
    # systemd's own reading of the unit (it needs no running systemd for this)
    if out=$(systemd-analyze verify --man=no "$UNIT" 2>&1) && [[ -z $out ]]; then
        pass "systemd-analyze verify accepts $UNIT"
    else
        fail "systemd-analyze verify accepts $UNIT"; sed 's/^/# /' <<<"$out"
    fi
fi
preload=$(dpkg -L libuls-preload | grep '/libuls-preload\.so$')
check "libuls-preload.so is installed ($preload)" test -f "$preload"

# --- the node, through the unit's ExecStart ------------------------------------
execstart=$(sed -n 's/^ExecStart=//p' "$UNIT")
execstart=${execstart//%i/$NAME}
check "the unit's ExecStart is '$execstart'" test -n "$execstart"
ip netns add "$NS"
ip -n "$NS" link set lo up
ip -n "$NS" tuntap add dev "$TAP" mode tap multi_queue
ip -n "$NS" addr add "$KERNEL_IP/24" dev "$TAP"
ip -n "$NS" link set "$TAP" up
cat >"$CONF" <<EOF
# written by tests/packages/test_packages.sh; removed when it ends
TAP=$TAP
ADDRESS=$NODE_IP/24
MTU=1500
OFFLOAD=on
DATAPATH=auto
EOF
ctl=/run/ulstack/$NAME.ctl
# shellcheck disable=SC2086 # the ExecStart line is split into words, as systemd does
ip netns exec "$NS" $execstart >"$TMP/ulsd.log" 2>&1 </dev/null &
pid=$!
# ulsd creates its control socket once it answers there (after loading its data path's
# program: 8-16 s at load 20-30): up to 120 s while it runs.
for _ in $(seq 1200); do [[ -S $ctl ]] && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if [[ -S $ctl ]] && kill -0 "$pid" 2>/dev/null; then
    pass "ulsd@$NAME's command line starts a node in $NS (control socket $ctl)"
else
    fail "ulsd@$NAME's command line starts a node in $NS"; sed 's/^/# /' "$TMP/ulsd.log"; finish
fi
check "the node runs /usr/sbin/ulsd with the file's settings" \
    grep -q -- "--tap $TAP --ip $NODE_IP/24 --mtu 1500 --offload on --datapath auto" \
    <(tr '\0' ' ' <"/proc/$pid/cmdline")
if out=$(timeout 10 ulsstat --ctl "$ctl" 2>&1) && [[ -n $out ]]; then
    pass "ulsstat --ctl answers"
else
    fail "ulsstat --ctl answers"; sed 's/^/# /' <<<"$out"
fi
pings() { timeout 15 ip netns exec "$NS" ping -q -c 2 -W 3 "$NODE_IP" >/dev/null 2>&1; }
check "the node answers ping from $NS's kernel" pings
ip netns exec "$NS" timeout 20 python3 -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 7789)); s.listen(1); print("listening", flush=True)
c, _ = s.accept(); c.sendall(b"echo:" + c.recv(100)); c.close()
' "$KERNEL_IP" >"$TMP/srv.log" 2>&1 &
srv=$!
for _ in $(seq 50); do grep -q listening "$TMP/srv.log" && break; sleep 0.1; done
got=$(ip netns exec "$NS" timeout 20 ulsrun --ctl "$ctl" -- python3 -c '
import socket, sys
s = socket.create_connection((sys.argv[1], 7789), timeout=10)
s.sendall(b"packaged"); print(s.recv(100).decode())
' "$KERNEL_IP" 2>&1)
kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null
if [[ $got == "echo:packaged" ]]; then
    pass "ulsrun runs a program on the node (packaged libuls-preload)"
else
    fail "ulsrun runs a program on the node"; sed 's/^/# /' <<<"$got"
fi
cat >"$TMP/t.c" <<'EOF'
#include <uls.h>
#include <errno.h>
/* No node there: libuls's own answer, not the dynamic linker's. */
int main(void) { return uls_attach("/nonexistent/ulspkg.ctl") < 0 ? 0 : 1; }
EOF
# shellcheck disable=SC2046
if cc -o "$TMP/t" "$TMP/t.c" $(pkg-config --cflags --libs uls) 2>"$TMP/cc.log" && "$TMP/t"; then
    pass "a C program builds with pkg-config uls and runs against libuls0"
else
    fail "a C program builds with pkg-config uls"; sed 's/^/# /' "$TMP/cc.log"
fi

# --- stop, purge, compare ------------------------------------------------------
kill -TERM "$pid"
for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if ! kill -0 "$pid" 2>/dev/null; then
    wait "$pid" 2>/dev/null
    pid=''
    pass "SIGTERM (systemctl stop) stops the node"
else
    fail "SIGTERM (systemctl stop) stops the node"
fi
cleanup
state >"$TMP/after"
if diff -u "$TMP/before" "$TMP/after" >"$TMP/diff"; then
    pass "after the purge, dpkg's package list and the files named like ours are as before"
else
    fail "after the purge, dpkg's package list and the files named like ours are as before"
    sed 's/^/# /' "$TMP/diff"
fi
# Every file the packages owned is gone (directories too, unless they existed before:
# /usr/bin and the like).
left=''
while IFS= read -r f; do
    [[ -n $f && $f != /. ]] || continue
    if [[ -d $f ]]; then   # (a directory or a link to one: /lib on merged /usr)
        grep -qxF "$f" "$TMP/dirs-before" || left+=" $f"
    elif [[ -e $f || -L $f ]]; then
        left+=" $f"
    fi
done <"$TMP/owned"
check "no file or directory the packages owned is left${left:+:$left}" test -z "$left"
finish
