# server/: ulsd, the per-node daemon (demultiplexer + connection server).
sbin_PROGRAMS += server/ulsd
server_ulsd_SOURCES = server/ulsd.c server/ctl.c server/lease.c server/ports.c server/handoff.c \
	server/demux.c server/reply.c server/internal.h
server_ulsd_CFLAGS = $(AM_CFLAGS) $(LIBURING_CFLAGS)
server_ulsd_LDADD = filter/libflt.la netif/libnif.la $(LIBURING_LIBS) -lpthread
