# stack/: lwIP's core built with our options, its port, and the socket layer.

# lwIP is not our code: it is fetched at configure time into $(builddir)/lwip, built with
# its own (milder) flags, and never shipped in our tarball.
noinst_LTLIBRARIES += stack/liblwipcore.la
nodist_stack_liblwipcore_la_SOURCES = \
	lwip/src/core/def.c lwip/src/core/inet_chksum.c lwip/src/core/init.c \
	lwip/src/core/ip.c lwip/src/core/mem.c lwip/src/core/memp.c lwip/src/core/netif.c \
	lwip/src/core/pbuf.c lwip/src/core/stats.c lwip/src/core/tcp.c \
	lwip/src/core/tcp_in.c lwip/src/core/tcp_out.c lwip/src/core/timeouts.c \
	lwip/src/core/udp.c lwip/src/core/ipv4/etharp.c lwip/src/core/ipv4/icmp.c \
	lwip/src/core/ipv4/ip4.c lwip/src/core/ipv4/ip4_addr.c lwip/src/core/ipv4/ip4_frag.c \
	lwip/src/core/ipv6/ethip6.c lwip/src/core/ipv6/icmp6.c lwip/src/core/ipv6/inet6.c \
	lwip/src/core/ipv6/ip6.c lwip/src/core/ipv6/ip6_addr.c lwip/src/core/ipv6/ip6_frag.c \
	lwip/src/core/ipv6/mld6.c lwip/src/core/ipv6/nd6.c \
	lwip/src/netif/ethernet.c
stack_liblwipcore_la_CPPFLAGS = $(LWIP_CPPFLAGS)
stack_liblwipcore_la_CFLAGS = -std=gnu11 -Wall -Wno-address -fvisibility=hidden $(SAN_FLAGS)

# The copy follows our patches: one `make` after a patch is edited, added or removed redoes
# it and rebuilds every lwIP object from it. lwip/.uls-patches is make's stamp: older than a
# patch or than the patch directory (a patch added, removed or renamed) means "ask
# prepare-lwip". prepare-lwip rewrites lwip/.uls-stamp only when the patched copy changed
# (it sums every patch's name and content), and the lwIP objects depend on that one, so a
# touched but unchanged patch rebuilds nothing. BUILT_SOURCES makes the stamps before
# anything else in all, check and install, and the objects' own prerequisite covers a make
# of one target. Our objects that include lwIP's headers follow a changed header through
# their dependency files: prepare-lwip writes only the files whose text changed.
LWIP_PATCHES = $(wildcard $(top_srcdir)/stack/patches/*.patch)
BUILT_SOURCES += lwip/.uls-stamp
lwip/.uls-patches: $(LWIP_PATCHES) $(top_srcdir)/stack/patches $(top_srcdir)/build-aux/prepare-lwip
	$(AM_V_GEN)$(top_srcdir)/build-aux/prepare-lwip '$(LWIP_UPSTREAM)' lwip $(top_srcdir)/stack/patches && touch $@
lwip/.uls-stamp: lwip/.uls-patches
	@:
$(stack_liblwipcore_la_OBJECTS): lwip/.uls-stamp

ULS_STACK_SOURCES = \
	stack/core.c stack/ethif.c stack/port.c stack/errmap.c stack/isn.c stack/lease.c \
	stack/counters.c stack/socket.c stack/sockopt.c stack/stream.c stack/dgram.c stack/rxq.c \
	stack/endpoints.c stack/mirror.c stack/privfd.c stack/fixedfd.c stack/fork.c stack/handoff.c \
	stack/breakdown.c stack/tso.c stack/tcpconf.c stack/heap.c stack/tcp_checks.c \
	stack/icmperr.c stack/icmp6err.c stack/cubic.c stack/cubic.h stack/drive.c stack/drive.h \
	stack/txbatch.c stack/park.c stack/readylist.c stack/outbatch.c \
	stack/syncookie.c stack/synshed.c stack/conntab.c stack/env.c stack/sigdefer.c stack/hoffstate.c stack/hoffstate.h \
	stack/internal.h stack/sock.h stack/hooks.h stack/lwipopts.h stack/arch/cc.h

lib_LTLIBRARIES += stack/libuls.la
include_HEADERS += stack/include/uls.h
# The latency breakdown's API is for the tools of this tree (ulsping), not installed.
noinst_HEADERS += stack/include/uls_breakdown.h
stack_libuls_la_SOURCES = $(ULS_STACK_SOURCES)
stack_libuls_la_CPPFLAGS = $(AM_CPPFLAGS) $(LWIP_CPPFLAGS) -DULS_BUILDING
stack_libuls_la_LIBADD = stack/liblwipcore.la netif/libnif.la netif/libopt.la $(LIBURING_LIBS) -lpthread
stack_libuls_la_LDFLAGS = $(AM_LDFLAGS) -version-info 0:0:0 \
	-Wl,--version-script=$(top_srcdir)/stack/libuls.map
EXTRA_stack_libuls_la_DEPENDENCIES = $(top_srcdir)/stack/libuls.map
EXTRA_DIST += stack/libuls.map stack/patches

# The same objects as a static convenience library, so unit tests can reach internals.
noinst_LTLIBRARIES += stack/libuls-internal.la
stack_libuls_internal_la_SOURCES = $(ULS_STACK_SOURCES)
stack_libuls_internal_la_CPPFLAGS = $(stack_libuls_la_CPPFLAGS)
stack_libuls_internal_la_LIBADD = $(stack_libuls_la_LIBADD)
