#!/bin/sh
# test_ulsd_service.sh - ulsd-service NAME (the ExecStart of ulsd@.service) turns
# $ULS_CONFDIR/NAME.conf into ulsd's command line, and refuses what it cannot use.
# ulsd is replaced by a stand-in that prints its arguments (ULSD=...), so nothing starts
# and no root is needed. Output is TAP.
set -u
svc=${ULS_BUILDDIR:?set ULS_BUILDDIR (make check does)}/server/ulsd-service
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ulsd-service.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
printf '#!/bin/sh\necho "$*"\n' >"$tmp/ulsd"
chmod +x "$tmp/ulsd"
num=0 failed=0
ok() { num=$((num + 1)); echo "ok $num - $1"; }
notok() { num=$((num + 1)); failed=$((failed + 1)); echo "not ok $num - $1"; }
run() { ULS_CONFDIR=$tmp ULSD=$tmp/ulsd sh "$svc" "$1" 2>"$tmp/err"; }

# Every key, comments, blank lines and surrounding blanks.
cat >"$tmp/full.conf" <<EOT
# a node
TAP=uls0

  ADDRESS=192.0.2.10/24  
MAC=02:00:00:00:00:10
GATEWAY=192.0.2.1
MTU=9000
OFFLOAD=off
DATAPATH=relay
CTL=$tmp/run/full.ctl
EOT
want="--tap uls0 --ip 192.0.2.10/24 --mtu 9000 --offload off --datapath relay --ctl $tmp/run/full.ctl -f --mac 02:00:00:00:00:10 --gw 192.0.2.1"
got=$(run full)
if [ "$got" = "$want" ] && [ -d "$tmp/run" ]; then ok "every key reaches ulsd's command line"
else notok "every key reaches ulsd's command line (got '$got')"; fi

printf 'TAP=uls1\nADDRESS=192.0.2.11/24\nCTL=%s/min.ctl\n' "$tmp" >"$tmp/min.conf"
want="--tap uls1 --ip 192.0.2.11/24 --mtu 1500 --offload on --datapath auto --ctl $tmp/min.ctl -f"
got=$(run min)
if [ "$got" = "$want" ]; then ok "defaults: MTU 1500, offload on, data path auto"
else notok "defaults: MTU 1500, offload on, data path auto (got '$got')"; fi

refused() {   # NAME FILE-CONTENT WORD-IN-MESSAGE DESCRIPTION
	[ -z "$2" ] || printf '%s\n' "$2" >"$tmp/$1.conf"
	if ! run "$1" >/dev/null && grep -q -- "$3" "$tmp/err"; then ok "refused: $4"
	else notok "refused: $4 ($(cat "$tmp/err"))"; fi
}
refused typo 'TAP=uls0
ADRESS=192.0.2.10/24' "unknown key ADRESS" "a misspelt key"
refused notap 'ADDRESS=192.0.2.10/24' "TAP= is required" "no TAP"
refused noaddr 'TAP=uls0' "ADDRESS= is required" "no ADDRESS"
refused nokv 'TAP uls0' "not KEY=VALUE" "a line that is not KEY=VALUE"
refused missing '' "not readable" "a node without a file"
refused ../evil '' "bad node name" "a name with a slash"
echo "1..$num"
[ "$failed" -eq 0 ]
