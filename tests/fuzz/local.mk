# tests/fuzz/: libFuzzer targets for the parsers of untrusted input (README.md). Built with
# clang (configure's FUZZ_CC) when it has libFuzzer, and run by make check for a bounded time
# each (tests/fuzz/run, ULS_FUZZ_SECONDS) from the seed corpus in tests/fuzz/seeds.
FUZZ_SRC_FILES = tests/fuzz/fuzz_filter.c tests/fuzz/fuzz_vnet.c tests/fuzz/fuzz_frame.c \
	tests/fuzz/fuzz_ctl.c tests/fuzz/fuzz_stack.c tests/fuzz/fuzz_stack_peer.c \
	tests/fuzz/fuzz_stack.h tests/fuzz/fuzz_hoff.c \
	tests/fuzz/fuzz_conntab.c tests/fuzz/fuzz_ulsd.c tests/fuzz/fuzz_node.c tests/fuzz/fuzz_node.h \
	tests/fuzz/fuzz_node_frames.c tests/fuzz/fuzz_srv.h tests/fuzz/fuzz_srv.c \
	tests/fuzz/fuzz_input.h
EXTRA_DIST += tests/fuzz/README.md tests/fuzz/run $(FUZZ_SRC_FILES) \
	tests/fuzz/seeds/fuzz_filter.hex tests/fuzz/seeds/fuzz_vnet.hex \
	tests/fuzz/seeds/fuzz_frame.hex tests/fuzz/seeds/fuzz_ctl.hex \
	tests/fuzz/seeds/fuzz_stack.hex tests/fuzz/seeds/fuzz_stack_offload.hex \
	tests/fuzz/seeds/fuzz_stack6.hex \
	tests/fuzz/seeds/fuzz_hoff.hex tests/fuzz/seeds/fuzz_conntab.hex \
	tests/fuzz/seeds/fuzz_ulsd.hex tests/fuzz/seeds/fuzz_node.hex

if ULS_FUZZ
FUZZ_TARGETS = tests/fuzz/fuzz_filter tests/fuzz/fuzz_vnet tests/fuzz/fuzz_frame \
	tests/fuzz/fuzz_ctl tests/fuzz/fuzz_stack tests/fuzz/fuzz_stack_offload tests/fuzz/fuzz_stack6 \
	tests/fuzz/fuzz_hoff tests/fuzz/fuzz_conntab tests/fuzz/fuzz_ulsd tests/fuzz/fuzz_node
check_SCRIPTS = $(FUZZ_TARGETS)
CLEANFILES += $(FUZZ_TARGETS)
TESTS += tests/fuzz/run

FUZZ_CFLAGS = -std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
FUZZ_CPPFLAGS = -include $(top_builddir)/config.h -iquote $(top_srcdir) -iquote $(top_builddir)

tests/fuzz/fuzz_filter: tests/fuzz/fuzz_filter.c $(filter %.c,$(filter_libflt_la_SOURCES) $(netif_libwire_la_SOURCES))
	@$(MKDIR_P) tests/fuzz
	$(AM_V_GEN)$(FUZZ_CC) $(FUZZ_CFLAGS) -Wall -Wextra -Werror $(FUZZ_CPPFLAGS) $^ -o $@
tests/fuzz/fuzz_vnet: tests/fuzz/fuzz_vnet.c netif/vnet.c netif/wire/wire.c
	@$(MKDIR_P) tests/fuzz
	$(AM_V_GEN)$(FUZZ_CC) $(FUZZ_CFLAGS) -Wall -Wextra -Werror $(FUZZ_CPPFLAGS) $^ -o $@
tests/fuzz/fuzz_frame: tests/fuzz/fuzz_frame.c netif/frame.c netif/wire/wire.c
	@$(MKDIR_P) tests/fuzz
	$(AM_V_GEN)$(FUZZ_CC) $(FUZZ_CFLAGS) -Wall -Wextra -Werror $(FUZZ_CPPFLAGS) $^ -o $@
tests/fuzz/fuzz_ctl: tests/fuzz/fuzz_ctl.c netif/ctl/ctl.c
	@$(MKDIR_P) tests/fuzz
	$(AM_V_GEN)$(FUZZ_CC) $(FUZZ_CFLAGS) -Wall -Wextra -Werror $(FUZZ_CPPFLAGS) $^ -o $@
# The state a process takes over from another (stack/hoffstate.c): lwIP's headers for its
# state values and TCP_SND_BUF, none of its code.
tests/fuzz/fuzz_hoff: tests/fuzz/fuzz_hoff.c stack/hoffstate.c
	@$(MKDIR_P) tests/fuzz
	$(AM_V_GEN)$(FUZZ_CC) $(FUZZ_CFLAGS) -Wall -Wextra -Werror $(FUZZ_CPPFLAGS) $(LWIP_CPPFLAGS) $^ -o $@
# A process's connection table as ulsd reads it (netif/conntab.c).
tests/fuzz/fuzz_conntab: tests/fuzz/fuzz_conntab.c netif/conntab.c netif/sys.c
	@$(MKDIR_P) tests/fuzz
	$(AM_V_GEN)$(FUZZ_CC) $(FUZZ_CFLAGS) -Wall -Wextra -Werror $(FUZZ_CPPFLAGS) $^ -o $@
# ulsd's handling of its processes' messages (server/ but its main, the fake TAP of
# tests/unit/faketap.c instead of netif/tap.c).
FUZZ_ULSD_SRC = tests/fuzz/fuzz_ulsd.c tests/fuzz/fuzz_srv.c tests/unit/faketap.c server/ctl.c server/stats.c server/lease.c \
	server/ports.c server/custody.c server/counters.c server/handoff.c server/demux.c server/reply.c \
	server/reply6.c server/neigh6.c server/reass.c server/fragment.c \
	server/bpf_none.c $(filter %.c,$(filter_libflt_la_SOURCES)) netif/ring.c \
	netif/ctl/ctl.c netif/conntab.c netif/chksum.c netif/vnet.c netif/breakdown.c netif/frame.c \
	netif/sys.c netif/siphash.c netif/synshed.c netif/wire/wire.c
tests/fuzz/fuzz_ulsd: $(addprefix $(top_srcdir)/,$(FUZZ_ULSD_SRC) tests/fuzz/fuzz_srv.h)
	@$(MKDIR_P) tests/fuzz
	$(AM_V_GEN)$(FUZZ_CC) $(FUZZ_CFLAGS) -Wall -Wextra -Werror $(FUZZ_CPPFLAGS) $(filter %.c,$^) -lpthread -o $@
# Frames for the node itself into ulsd's demux thread (the same sources as fuzz_ulsd).
tests/fuzz/fuzz_node: $(addprefix $(top_srcdir)/,tests/fuzz/fuzz_node.c tests/fuzz/fuzz_node_frames.c \
		tests/fuzz/fuzz_node.h tests/fuzz/fuzz_srv.h tests/fuzz/fuzz_input.h \
		$(filter-out tests/fuzz/fuzz_ulsd.c,$(FUZZ_ULSD_SRC)))
	@$(MKDIR_P) tests/fuzz
	$(AM_V_GEN)$(FUZZ_CC) $(FUZZ_CFLAGS) -Wall -Wextra -Werror $(FUZZ_CPPFLAGS) $(filter %.c,$^) -lpthread -o $@

# A whole process's stack: lwIP's core as patched, our stack and netif, built again with the
# fuzzer's instrumentation (lwIP is not our code: no -Werror, its warnings off).
FUZZ_STACK_SRC = $(nodist_stack_liblwipcore_la_SOURCES) \
	$(addprefix $(top_srcdir)/,$(filter %.c,$(ULS_STACK_SOURCES) $(netif_libnif_la_SOURCES) \
	$(netif_libwire_la_SOURCES) $(netif_libopt_la_SOURCES) $(netif_libctl_la_SOURCES)))
FUZZ_STACK_FLAGS = -w $(FUZZ_CPPFLAGS) $(LWIP_CPPFLAGS) -I$(top_srcdir)/stack/include -DULS_BUILDING
# The harness and its peer (fuzz_stack_peer.c), compiled together for each target.
FUZZ_STACK_MAIN = tests/fuzz/fuzz_stack.c tests/fuzz/fuzz_stack_peer.c
tests/fuzz/fuzz_stack: $(FUZZ_STACK_MAIN) tests/fuzz/fuzz_stack.h tests/fuzz/fuzz_input.h $(FUZZ_STACK_SRC) \
		stack/libuls.la
	@$(MKDIR_P) tests/fuzz
	$(AM_V_GEN)$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_STACK_FLAGS) $(addprefix $(top_srcdir)/,$(FUZZ_STACK_MAIN)) $(FUZZ_STACK_SRC) \
		$(LIBURING_LIBS) -lpthread -o $@
tests/fuzz/fuzz_stack_offload: $(FUZZ_STACK_MAIN) tests/fuzz/fuzz_stack.h tests/fuzz/fuzz_input.h $(FUZZ_STACK_SRC) \
		stack/libuls.la
	@$(MKDIR_P) tests/fuzz
	$(AM_V_GEN)$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_STACK_FLAGS) -DFUZZ_OFFLOAD=1 $(addprefix $(top_srcdir)/,$(FUZZ_STACK_MAIN)) \
		$(FUZZ_STACK_SRC) $(LIBURING_LIBS) -lpthread -o $@
# The same over IPv6 (FUZZ_IPV6: TCPv6, extension headers, fragments, ICMPv6, ND).
tests/fuzz/fuzz_stack6: $(FUZZ_STACK_MAIN) tests/fuzz/fuzz_stack.h tests/fuzz/fuzz_input.h $(FUZZ_STACK_SRC) \
		stack/libuls.la
	@$(MKDIR_P) tests/fuzz
	$(AM_V_GEN)$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_STACK_FLAGS) -DFUZZ_IPV6=1 $(addprefix $(top_srcdir)/,$(FUZZ_STACK_MAIN)) \
		$(FUZZ_STACK_SRC) $(LIBURING_LIBS) -lpthread -o $@
endif
