#!/bin/sh
# libuls never calls back into the shim (issue 15): no object of libuls-preload.so's stack
# (stack/, lwIP's core, netif/ and its submodules) and no library it loads besides libc
# (liburing) may reference a name the shim interposes. The stack makes those calls through
# its table (netif/sys.h), which the shim points at the C library's functions; only the
# table's own initial values (netif/sys.c) name them. One TAP case per interposed name.
set -u
B=${ULS_BUILDDIR:-$(pwd)}
so=$B/apps/.libs/libuls-preload.so
archives="$B/stack/.libs/libuls-internal.a $B/stack/.libs/liblwipcore.a
	$B/netif/.libs/libnif.a $B/netif/.libs/libctl.a $B/netif/.libs/libwire.a
	$B/netif/.libs/libopt.a"
for f in $so $archives; do
	if [ ! -f "$f" ]; then
		echo "1..0 # SKIP $f not built"
		exit 0
	fi
done
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# What the shim defines and exports: its interposers.
nm -D --defined-only "$so" | awk '$2 ~ /^[TWi]$/ { print $3 }' | sort -u >"$tmp/interposed"
# What the stack's objects call (member name kept), netif/sys.c's table excepted.
nm -A -u $archives 2>/dev/null | grep -v -- ':libnif_la-sys\.o:' |
	awk '{ m = $1; sub(/:$/, "", m); n = split(m, p, "/"); print $NF, p[n] }' |
	sed 's/@.*//' | sort -u >"$tmp/called"
# Libraries the shim loads, other than the C library and the dynamic loader, called
# whatever they call (liburing makes its own system calls). In a sanitizer build
# (--enable-sanitizers) the sanitizers' runtimes intercept those calls on purpose, and
# bring libraries of their own (libstdc++); those are the tool's, not libuls's: left out
# unless the shim itself names them (DT_NEEDED).
ldd "$so" | awk '$3 ~ /^\// { print $1 }' | grep -E '^lib(a|ub|l|t)san\.' >"$tmp/san" || :
: >"$tmp/sandeps"
while read -r san; do
	ldd "$(ldd "$so" | awk -v n="$san" '$1 == n { print $3 }')" | awk '{ print $1 }' >>"$tmp/sandeps"
done <"$tmp/san"
readelf -d "$so" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' >"$tmp/needed"
ldd "$so" | awk '$3 ~ /^\// && $1 !~ /^(libc|libdl|libpthread|ld-linux)/ { print $1, $3 }' |
	while read -r name lib; do
		if grep -qxF "$name" "$tmp/san" ||
		   { grep -qxF "$name" "$tmp/sandeps" && ! grep -qxF "$name" "$tmp/needed"; }; then
			continue
		fi
		echo "$lib"
	done |
	while read -r lib; do
		nm -D --undefined-only "$lib" | awk -v l="${lib##*/}" '{ sub(/@.*/, "", $2); print $2, l }'
	done >>"$tmp/called"

n=$(wc -l <"$tmp/interposed")
if ! grep -qx close "$tmp/interposed"; then
	echo "1..1"
	echo "not ok 1 - the shim's interposers could not be listed (close is not among them)"
	exit 0
fi
echo "1..$n"
i=0
while read -r name; do
	i=$((i + 1))
	who=$(awk -v s="$name" '$1 == s { print $2 }' "$tmp/called" | sort -u | tr '\n' ' ')
	if [ -n "$who" ]; then
		echo "not ok $i - libuls never calls the shim's $name (called by: $who)"
	else
		echo "ok $i - libuls never calls the shim's $name"
	fi
done <"$tmp/interposed"
