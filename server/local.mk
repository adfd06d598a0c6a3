# server/: ulsd, the per-node daemon (demultiplexer + connection server).
sbin_PROGRAMS += server/ulsd
server_ulsd_SOURCES = server/ulsd.c server/ctl.c server/stats.c server/stats.h server/lease.c \
	server/lease.h server/ports.c server/ports.h \
	server/custody.c server/custody.h server/counters.c server/counters.h server/handoff.c \
	server/demux.c server/reply.c server/reply6.c server/neigh6.c server/neigh6.h server/reass.c \
	server/fragment.c \
	server/internal.h
server_ulsd_CFLAGS = $(AM_CFLAGS) $(LIBURING_CFLAGS)
server_ulsd_LDADD = filter/libflt.la netif/libnif.la netif/libopt.la $(LIBURING_LIBS) -lpthread

# The direct data path: the BPF programs (filter/datapath.bpf.c) built into a skeleton that
# ulsd embeds and loads (server/bpf.c).
EXTRA_DIST += filter/datapath.bpf.c filter/datapath_pick.bpf.h filter/datapath_syn.bpf.h filter/datapath.h
if ULS_DIRECT
server_ulsd_SOURCES += server/bpf.c
nodist_server_ulsd_SOURCES = server/datapath.skel.h
BUILT_SOURCES += server/datapath.skel.h
CLEANFILES += server/datapath.bpf.o server/datapath.skel.h
server_ulsd_CFLAGS += $(LIBBPF_CFLAGS)
server_ulsd_LDADD += $(LIBBPF_LIBS)
server/datapath.bpf.o: $(top_srcdir)/filter/datapath.bpf.c $(top_srcdir)/filter/datapath_pick.bpf.h \
		$(top_srcdir)/filter/datapath_syn.bpf.h \
		$(top_srcdir)/filter/datapath.h $(top_srcdir)/filter/siphash.h
	@$(MKDIR_P) server
	$(AM_V_GEN)$(CLANG) $(BPF_CFLAGS) -iquote $(top_srcdir) -c $(top_srcdir)/filter/datapath.bpf.c -o $@
server/datapath.skel.h: server/datapath.bpf.o
	$(AM_V_GEN)$(BPFTOOL) gen skeleton server/datapath.bpf.o name uls_dp > $@.tmp && mv $@.tmp $@
else
server_ulsd_SOURCES += server/bpf_none.c
endif

# ulsd-service NAME: starts the node of $(sysconfdir)/ulstack/NAME.conf (the ExecStart of
# the packages' ulsd@.service, build-aux/debian/). Made here so that it names the
# configured sbindir and sysconfdir.
pkglibexec_SCRIPTS = server/ulsd-service
CLEANFILES += server/ulsd-service
EXTRA_DIST += server/ulsd-service.in
server/ulsd-service: $(top_srcdir)/server/ulsd-service.in Makefile
	@$(MKDIR_P) server
	$(AM_V_GEN)sed -e 's|@sbindir[@]|$(sbindir)|g' -e 's|@sysconfdir[@]|$(sysconfdir)|g' \
		$(top_srcdir)/server/ulsd-service.in >$@.tmp && chmod +x $@.tmp && mv $@.tmp $@
