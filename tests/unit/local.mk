# Unit tests (cmocka): one program per source file under test.
UNIT_TESTS = \
	tests/unit/test_wire tests/unit/test_frame tests/unit/test_chksum tests/unit/test_copy tests/unit/test_isn tests/unit/test_rxq \
	tests/unit/test_api tests/unit/test_timers tests/unit/test_pattern tests/unit/test_netops \
	tests/unit/test_heap tests/unit/test_tcp_checks tests/unit/test_cubic \
	tests/unit/test_syncookie tests/unit/test_sigdefer tests/unit/test_synshed tests/unit/test_env \
	tests/unit/test_fdtab
check_PROGRAMS += $(UNIT_TESTS)
TESTS += $(UNIT_TESTS)

UNIT_CPPFLAGS = $(AM_CPPFLAGS) $(LWIP_CPPFLAGS) $(CMOCKA_CFLAGS)
UNIT_LDADD = apps/libapps.la stack/libuls-internal.la netif/libnif.la $(CMOCKA_LIBS) -lpthread

tests_unit_test_wire_SOURCES = tests/unit/test_wire.c
tests_unit_test_wire_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_wire_LDADD = netif/libwire.la $(CMOCKA_LIBS)

tests_unit_test_frame_SOURCES = tests/unit/test_frame.c
tests_unit_test_frame_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_frame_LDADD = netif/libnif.la $(CMOCKA_LIBS)

tests_unit_test_chksum_SOURCES = tests/unit/test_chksum.c
tests_unit_test_chksum_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_chksum_LDADD = $(UNIT_LDADD)

tests_unit_test_copy_SOURCES = tests/unit/test_copy.c
tests_unit_test_copy_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_copy_LDADD = netif/libnif.la $(CMOCKA_LIBS)

tests_unit_test_isn_SOURCES = tests/unit/test_isn.c
tests_unit_test_isn_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_isn_LDADD = $(UNIT_LDADD)

tests_unit_test_rxq_SOURCES = tests/unit/test_rxq.c tests/unit/lwip_fixture.h
tests_unit_test_rxq_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_rxq_LDADD = $(UNIT_LDADD)

tests_unit_test_tcp_checks_SOURCES = tests/unit/test_tcp_checks.c
tests_unit_test_tcp_checks_CPPFLAGS = $(UNIT_CPPFLAGS) -I$(top_srcdir)/stack
tests_unit_test_tcp_checks_LDADD = $(UNIT_LDADD)

tests_unit_test_syncookie_SOURCES = tests/unit/test_syncookie.c
tests_unit_test_syncookie_CPPFLAGS = $(UNIT_CPPFLAGS) -I$(top_srcdir)/stack
tests_unit_test_syncookie_LDADD = $(UNIT_LDADD)

tests_unit_test_env_SOURCES = tests/unit/test_env.c
tests_unit_test_env_CPPFLAGS = $(UNIT_CPPFLAGS) -I$(top_srcdir)/stack -I$(top_srcdir)/stack/include
tests_unit_test_env_LDADD = $(UNIT_LDADD)

tests_unit_test_synshed_SOURCES = tests/unit/test_synshed.c tests/unit/counter_fixture.h
tests_unit_test_synshed_CPPFLAGS = $(UNIT_CPPFLAGS) -I$(top_srcdir)/stack -I$(top_srcdir)/stack/include
tests_unit_test_synshed_LDADD = $(UNIT_LDADD)

tests_unit_test_cubic_SOURCES = tests/unit/test_cubic.c
tests_unit_test_cubic_CPPFLAGS = $(UNIT_CPPFLAGS) -I$(top_srcdir)/stack
tests_unit_test_cubic_LDADD = $(UNIT_LDADD)

tests_unit_test_heap_SOURCES = tests/unit/test_heap.c
tests_unit_test_heap_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_heap_LDADD = $(UNIT_LDADD)

tests_unit_test_api_SOURCES = tests/unit/test_api.c
tests_unit_test_api_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_api_LDADD = $(UNIT_LDADD)

tests_unit_test_sigdefer_SOURCES = tests/unit/test_sigdefer.c
tests_unit_test_sigdefer_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_sigdefer_LDADD = $(UNIT_LDADD)

tests_unit_test_timers_SOURCES = tests/unit/test_timers.c tests/unit/lwip_fixture.h
tests_unit_test_timers_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_timers_LDADD = $(UNIT_LDADD)

tests_unit_test_pattern_SOURCES = tests/unit/test_pattern.c
tests_unit_test_pattern_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_pattern_LDADD = apps/libapps.la $(CMOCKA_LIBS)

# The shim's descriptor table (apps/preload/fdtab.c), with the rest of the shim stubbed.
tests_unit_test_fdtab_SOURCES = tests/unit/test_fdtab.c apps/preload/fdtab.c
tests_unit_test_fdtab_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_fdtab_LDADD = $(UNIT_LDADD)

tests_unit_test_netops_SOURCES = tests/unit/test_netops.c
tests_unit_test_netops_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_netops_LDADD = $(UNIT_LDADD)

# The command-line values every program shares (netif/opt/opt.c).
check_PROGRAMS += tests/unit/test_opt
TESTS += tests/unit/test_opt
tests_unit_test_opt_SOURCES = tests/unit/test_opt.c
tests_unit_test_opt_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_opt_LDADD = netif/libopt.la $(CMOCKA_LIBS)
include tests/unit/filter.mk

# The control protocol, the rings and ulsd's port space.
SERVER_UNIT_TESTS = tests/unit/test_ctl tests/unit/test_ring tests/unit/test_ports \
	tests/unit/test_vnet tests/unit/test_reass tests/unit/test_reply tests/unit/test_reply6 tests/unit/test_qring tests/unit/test_qring_wait tests/unit/test_conntab \
	tests/unit/test_neigh6 tests/unit/test_tun_attach tests/unit/test_qdisc
check_PROGRAMS += $(SERVER_UNIT_TESTS)
TESTS += $(SERVER_UNIT_TESTS)
tests_unit_test_ctl_SOURCES = tests/unit/test_ctl.c
tests_unit_test_ctl_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_ctl_LDADD = netif/libnif.la $(CMOCKA_LIBS)
tests_unit_test_conntab_SOURCES = tests/unit/test_conntab.c
tests_unit_test_conntab_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_conntab_LDADD = netif/libnif.la $(CMOCKA_LIBS) -lpthread
tests_unit_test_ring_SOURCES = tests/unit/test_ring.c
tests_unit_test_ring_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_ring_LDADD = netif/libnif.la $(CMOCKA_LIBS)
tests_unit_test_vnet_SOURCES = tests/unit/test_vnet.c
tests_unit_test_vnet_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_vnet_LDADD = netif/libnif.la $(CMOCKA_LIBS)
tests_unit_test_ports_SOURCES = tests/unit/test_ports.c server/ports.c server/custody.c
tests_unit_test_ports_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS) $(LIBURING_CFLAGS) -I$(top_srcdir)/stack
tests_unit_test_ports_LDADD = filter/libflt.la netif/libnif.la $(CMOCKA_LIBS)
tests_unit_test_neigh6_SOURCES = tests/unit/test_neigh6.c server/neigh6.c
tests_unit_test_neigh6_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_neigh6_LDADD = $(CMOCKA_LIBS)
tests_unit_test_reply_SOURCES = tests/unit/test_reply.c tests/unit/reply_fixture.c \
	tests/unit/reply_fixture.h server/reply.c server/fragment.c server/custody.c
tests_unit_test_reply_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS) $(LIBURING_CFLAGS)
tests_unit_test_reply_LDADD = filter/libflt.la netif/libnif.la $(CMOCKA_LIBS)
tests_unit_test_reply6_SOURCES = tests/unit/test_reply6.c tests/unit/reply_fixture.c \
	tests/unit/reply_fixture.h server/reply6.c server/reply.c server/fragment.c server/neigh6.c \
	server/custody.c
tests_unit_test_reply6_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS) $(LIBURING_CFLAGS)
tests_unit_test_reply6_LDADD = filter/libflt.la netif/libnif.la $(CMOCKA_LIBS)
tests_unit_test_reass_SOURCES = tests/unit/test_reass.c server/reass.c
tests_unit_test_reass_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS) $(LIBURING_CFLAGS)
tests_unit_test_reass_LDADD = filter/libflt.la netif/libnif.la $(CMOCKA_LIBS)

# ulsraw's frame format and argument checks (the test includes apps/ulsraw.c).
check_PROGRAMS += tests/unit/test_rawframe
TESTS += tests/unit/test_rawframe
tests_unit_test_rawframe_SOURCES = tests/unit/test_rawframe.c
tests_unit_test_rawframe_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_rawframe_LDADD = apps/libapps.la netif/libnif.la $(CMOCKA_LIBS)

# ulsping's statistics and echo verification (the test includes apps/ulsping.c).
check_PROGRAMS += tests/unit/test_pingstats
TESTS += tests/unit/test_pingstats
tests_unit_test_pingstats_SOURCES = tests/unit/test_pingstats.c
tests_unit_test_pingstats_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_pingstats_LDADD = $(UNIT_LDADD)

# The latency breakdown's frame parse and per-process trace (netif/breakdown.c).
check_PROGRAMS += tests/unit/test_breakdown
TESTS += tests/unit/test_breakdown
tests_unit_test_breakdown_SOURCES = tests/unit/test_breakdown.c
tests_unit_test_breakdown_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_breakdown_LDADD = netif/libnif.la $(CMOCKA_LIBS)

# ulsping --breakdown: matching the stamps of two processes, stage statistics, files.
check_PROGRAMS += tests/unit/test_pingbreakdown
TESTS += tests/unit/test_pingbreakdown
tests_unit_test_pingbreakdown_SOURCES = tests/unit/test_pingbreakdown.c
tests_unit_test_pingbreakdown_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_pingbreakdown_LDADD = apps/libapps.la $(CMOCKA_LIBS)

tests_unit_test_tun_attach_SOURCES = tests/unit/test_tun_attach.c tests/unit/owntap.h
tests_unit_test_tun_attach_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_tun_attach_LDADD = netif/libnif.la $(CMOCKA_LIBS)
tests_unit_test_qdisc_SOURCES = tests/unit/test_qdisc.c tests/unit/owntap.h
tests_unit_test_qdisc_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_qdisc_LDADD = netif/libnif.la $(CMOCKA_LIBS)
QRING_FIXTURE = tests/unit/qring_fixture.c tests/unit/qring_fixture.h
tests_unit_test_qring_SOURCES = tests/unit/test_qring.c $(QRING_FIXTURE)
tests_unit_test_qring_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS) $(LIBURING_CFLAGS)
tests_unit_test_qring_LDADD = netif/libnif.la $(LIBURING_LIBS) $(CMOCKA_LIBS) -lpthread
tests_unit_test_qring_wait_SOURCES = tests/unit/test_qring_wait.c $(QRING_FIXTURE)
tests_unit_test_qring_wait_CPPFLAGS = $(tests_unit_test_qring_CPPFLAGS)
tests_unit_test_qring_wait_LDADD = $(tests_unit_test_qring_LDADD)

# ulsd's control thread, leases, handoffs, demultiplexer and own replies (server/), all of
# ulsd but its main, with a fake TAP the test defines (netif/tap.c is not linked).
# Both programs build on one fixture and the same server/ sources.
SERVER_FIXTURE_SOURCES = tests/unit/server_fixture.c tests/unit/server_fixture.h \
	tests/unit/faketap.c tests/unit/faketap.h server/ctl.c server/stats.c server/lease.c \
	server/ports.c server/custody.c server/counters.c server/handoff.c server/demux.c server/reply.c \
	server/reply6.c server/neigh6.c server/reass.c server/fragment.c \
	server/bpf_none.c
SERVER_FIXTURE_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS) $(LIBURING_CFLAGS)
SERVER_FIXTURE_LDADD = filter/libflt.la netif/libnif.la $(LIBURING_LIBS) $(CMOCKA_LIBS) -lpthread
check_PROGRAMS += tests/unit/test_server tests/unit/test_server_ctl
TESTS += tests/unit/test_server tests/unit/test_server_ctl
tests_unit_test_server_SOURCES = tests/unit/test_server.c $(SERVER_FIXTURE_SOURCES)
tests_unit_test_server_CPPFLAGS = $(SERVER_FIXTURE_CPPFLAGS)
tests_unit_test_server_LDADD = $(SERVER_FIXTURE_LDADD)
tests_unit_test_server_ctl_SOURCES = tests/unit/test_server_ctl.c $(SERVER_FIXTURE_SOURCES)
tests_unit_test_server_ctl_CPPFLAGS = $(SERVER_FIXTURE_CPPFLAGS)
tests_unit_test_server_ctl_LDADD = $(SERVER_FIXTURE_LDADD)

# The stack's segmentation offload: segment sizes and the offload word of sent frames.
check_PROGRAMS += tests/unit/test_tso
TESTS += tests/unit/test_tso
tests_unit_test_tso_SOURCES = tests/unit/test_tso.c
tests_unit_test_tso_CPPFLAGS = $(UNIT_CPPFLAGS) -I$(top_srcdir)/stack -I$(top_srcdir)/stack/include
tests_unit_test_tso_LDADD = $(UNIT_LDADD)

# The socket layer against the kernel's TCP, in a namespace of the test's own
# (tests/unit/node_fixture.h): stack/stream.c's calls, stack/mirror.c's readiness.
check_PROGRAMS += tests/unit/test_stream
TESTS += tests/unit/test_stream
tests_unit_test_stream_SOURCES = tests/unit/test_stream.c tests/unit/node_fixture.h tests/unit/owntap.h
tests_unit_test_stream_CPPFLAGS = $(UNIT_CPPFLAGS) -I$(top_srcdir)/stack/include
tests_unit_test_stream_LDADD = $(UNIT_LDADD)
check_PROGRAMS += tests/unit/test_mirror
TESTS += tests/unit/test_mirror
tests_unit_test_mirror_SOURCES = tests/unit/test_mirror.c tests/unit/node_fixture.h tests/unit/owntap.h \
	tests/unit/counter_fixture.h
tests_unit_test_mirror_CPPFLAGS = $(UNIT_CPPFLAGS) -I$(top_srcdir)/stack/include
tests_unit_test_mirror_LDADD = $(UNIT_LDADD)

# The check of a connection's handed-over state (stack/hoffstate.c; fuzzed by fuzz_hoff).
check_PROGRAMS += tests/unit/test_hoffstate
TESTS += tests/unit/test_hoffstate
tests_unit_test_hoffstate_SOURCES = tests/unit/test_hoffstate.c
tests_unit_test_hoffstate_CPPFLAGS = $(UNIT_CPPFLAGS) -I$(top_srcdir)/stack
tests_unit_test_hoffstate_LDADD = $(UNIT_LDADD)
