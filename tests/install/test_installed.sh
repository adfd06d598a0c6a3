#!/usr/bin/env bash
#
# test_installed.sh - the installed tools stand alone (issue 16, item 5). Run as root.
#
# Installs the build into a staging root (make install DESTDIR=...), then, in a mount
# namespace of its own where the source and build trees are covered by empty tmpfs mounts
# (so nothing can be read from them), from / with ULS_BUILDDIR, ULS_SRCDIR, ULSD and
# ULS_PRELOAD unset and only the staged bindir and sbindir on PATH:
#   - ulsping (the driver) builds its testbed with the staged testbed script and ulsd and
#     measures one mode and one size;
#   - ulsbench runs its python sweep driver for one short point;
#   - the staged testbed script brings up a node, and ulsrun runs a python client on it
#     against a kernel peer, with the staged libuls-preload.so (checked in its maps).
# The staged programs find each other under the root they run from (apps/instdirs.h).
# The dynamic linker is the one thing a staged tree cannot redirect (the programs' RUNPATH
# names the configured libdir), so LD_LIBRARY_PATH names the staged libdir; a real install
# needs nothing. Output is TAP; the testbeds are named ulsinst*$TB_SUFFIX and always taken down.
#
# shellcheck disable=SC2317  # functions called indirectly through check()
set -uo pipefail

: "${ULS_BUILDDIR:?set ULS_BUILDDIR (make check does)}"
: "${ULS_SRCDIR:?set ULS_SRCDIR (make check does)}"
BUILD=$(cd "$ULS_BUILDDIR" && pwd -P)
SRC=$(cd "$ULS_SRCDIR" && pwd -P)
SFX=${TB_SUFFIX:-}

if [[ ${1:-} == --inside ]]; then
    # -------------------------------------------------------------------------
    # Second stage: in the private mount namespace, trees hidden.
    # -------------------------------------------------------------------------
    DEST=$2 num=0 failed=0
    pass() { num=$((num + 1)); echo "ok $num - $1"; }
    fail() { num=$((num + 1)); failed=$((failed + 1)); echo "not ok $num - $1"; }
    mount -t tmpfs -o size=1M,mode=0755 ulsinst-hidden "$SRC" || { echo "Bail out! cannot hide $SRC"; exit 1; }
    if [[ $BUILD != "$SRC"/* ]]; then
        mount -t tmpfs -o size=1M,mode=0755 ulsinst-hidden "$BUILD" || { echo "Bail out! cannot hide $BUILD"; exit 1; }
    fi
    cd / || exit 1
    if [[ -z $(ls -A "$SRC") && ( ! -e $BUILD || -z $(ls -A "$BUILD") ) ]]; then
        pass "the source and build trees are hidden ($SRC, $BUILD are empty here)"
    else
        fail "the source and build trees are hidden"
    fi
    unset ULS_BUILDDIR ULS_SRCDIR ULSD ULS_PRELOAD TB_SUFFIX
    bindir=$(dirname "$(find "$DEST" -path '*/bin/ulsping' -type f | head -n1)")
    sbindir=$(dirname "$(find "$DEST" -path '*/sbin/ulsd' -type f | head -n1)")
    libexec=$(dirname "$(find "$DEST" -path '*/ulstack/testbed' -type f | head -n1)")
    libdir=$(dirname "$(find "$DEST" -name 'libuls.so' | head -n1)")
    export PATH=$bindir:$sbindir:/usr/sbin:/usr/bin:/sbin:/bin
    export LD_LIBRARY_PATH=$libdir

    # ulsping: the driver, its testbed and ulsd, all from the prefix.
    out=$(TB_NAME=ulsinst$SFX timeout 120 ulsping --mode perproc --sizes 64 2>&1)
    rc=$?
    if [[ $rc -eq 0 ]] && grep -Eq '^perproc +64 ' <<<"$out"; then
        pass "installed ulsping measures perproc, 64 bytes, with no build tree"
    else
        fail "installed ulsping measures perproc, 64 bytes, with no build tree (rc $rc)"
        sed 's/^/# /' <<<"$out"
    fi

    # ulsbench: its python driver (pkglibexecdir), the testbed and ulsd, from the prefix.
    out=$(TMPDIR=$DEST TB_SUFFIX=$SFX timeout 180 ulsbench --mode perproc --streams 1 \
        --seconds 1 --json "$DEST/sweep.json" 2>&1)
    rc=$?
    if [[ $rc -eq 0 ]] && grep -q '"perproc"' "$DEST/sweep.json" 2>/dev/null; then
        pass "installed ulsbench runs its sweep driver (1 stream, 1 s) with no source tree"
    else
        fail "installed ulsbench runs its sweep driver (1 stream, 1 s) with no source tree (rc $rc)"
        tail -n 20 <<<"$out" | sed 's/^/# /'
    fi

    # ulsrun: a program on a node of the installed testbed, with the installed preload.
    export TB_NAME=ulsinst2$SFX
    tbout=$(timeout 120 "$libexec/testbed" up --nodes 1 2>/tmp/ulsinst-tb.$$)
    rc=$?
    if [[ $rc -eq 0 ]]; then
        eval "$tbout"
        pass "the installed testbed script starts the installed ulsd (found on PATH)"
        ip netns exec "$TB_KERNEL_NETNS" timeout 30 python3 -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 7788)); s.listen(1); print("listening", flush=True)
c, _ = s.accept(); d = c.recv(100); c.sendall(b"echo:" + d); c.close()
' "$TB_KERNEL_IP" >/tmp/ulsinst-srv.$$ 2>&1 &
        srv=$!
        for _ in $(seq 50); do grep -q listening /tmp/ulsinst-srv.$$ && break; sleep 0.1; done
        got=$(ip netns exec "$TB_NETNS" timeout 30 ulsrun --ctl "$TB_NODE1_CTL" -- python3 -c '
import socket, sys
maps = open("/proc/self/maps").read()
lib = [l.split()[-1] for l in maps.splitlines() if "libuls-preload.so" in l]
s = socket.create_connection((sys.argv[1], 7788), timeout=10)
s.sendall(b"installed"); print(s.recv(100).decode(), lib[0] if lib else "none")
' "$TB_KERNEL_IP" 2>&1)
        rc=$?
        kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null
        if [[ $rc -eq 0 && $got == "echo:installed $libexec/"* ]] ||
           [[ $rc -eq 0 && $got == "echo:installed $DEST/"* ]]; then
            pass "installed ulsrun runs a program on the node with the staged libuls-preload.so"
        else
            fail "installed ulsrun runs a program on the node with the staged libuls-preload.so (rc $rc)"
            sed 's/^/# /' <<<"$got"
        fi
        timeout 60 "$libexec/testbed" down >/dev/null 2>&1
    else
        fail "the installed testbed script starts the installed ulsd (rc $rc)"
        sed 's/^/# /' /tmp/ulsinst-tb.$$
        timeout 60 "$libexec/testbed" down >/dev/null 2>&1
    fi
    rm -f /tmp/ulsinst-tb.$$ /tmp/ulsinst-srv.$$
    echo "1..$num"
    exit $((failed > 0))
fi

# -----------------------------------------------------------------------------
# First stage: stage the install, then run the checks with the trees hidden.
# -----------------------------------------------------------------------------
[[ $(id -u) -eq 0 ]] || { echo "1..0 # SKIP needs root (namespaces)"; exit 0; }
DEST=$(mktemp -d /tmp/ulsinst.XXXXXX)
chmod 0755 "$DEST"
trap 'rm -rf "$DEST"' EXIT
if ! make -s -C "$BUILD" install DESTDIR="$DEST" >"$DEST.log" 2>&1; then
    echo "not ok 1 - make install DESTDIR=$DEST"
    sed 's/^/# /' "$DEST.log"
    rm -f "$DEST.log"
    echo "1..1"
    exit 1
fi
rm -f "$DEST.log"
echo "ok 1 - make install DESTDIR=$DEST"
# The second stage numbers its own checks after this one.
unshare --mount --propagation private -- "$0" --inside "$DEST" | awk '
    /^ok [0-9]+/ || /^not ok [0-9]+/ { n++; sub(/ok [0-9]+/, "ok " n + 1) }
    /^1\.\.[0-9]+$/ { print "1.." n + 1; next }
    { print }'
exit "${PIPESTATUS[0]}"
