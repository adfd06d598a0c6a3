# netif/opt/: command-line values shared by every program (ulsd, the tools, libuls's
# uls_parse_cidr); it includes only libc, so each layer may use it.
noinst_LTLIBRARIES += netif/libopt.la
netif_libopt_la_SOURCES = netif/opt/opt.c netif/opt/opt.h

# netif/wire/: wire formats, the leaf every other module reads headers through
# (docs/architecture.md, "Module map"). Its own library so that filter/ can link it
# without the devices.
noinst_LTLIBRARIES += netif/libwire.la
netif_libwire_la_SOURCES = netif/wire/proto.h netif/wire/wire.h netif/wire/wire.c

# netif/ctl/: the control protocol between a process's stack and ulsd (prefix ctl_): not a
# device, its own module; in netif/ because both stack/ and server/ speak it.
noinst_LTLIBRARIES += netif/libctl.la
netif_libctl_la_SOURCES = netif/ctl/ctl.c netif/ctl/ctl.h

# netif/: network devices. No lwIP here: frames in, frames out.
noinst_LTLIBRARIES += netif/libnif.la
netif_libnif_la_SOURCES = netif/frame.c netif/frame.h netif/tap.c netif/tap.h netif/tun.c netif/tun.h netif/dev.h \
	netif/ring.c netif/ring.h netif/ringdev.c netif/ringdev.h \
	netif/conntab.c netif/conntab.h \
	netif/chksum.c netif/chksum.h netif/copy.c netif/copy.h netif/breakdown.c netif/breakdown.h \
	netif/vnet.c netif/vnet.h netif/qring.c netif/qring.h netif/qring_priv.h netif/qring_rx.c \
	netif/qring_tx.c netif/rxpool.c netif/rxpool.h \
	netif/sys.c netif/sys.h netif/siphash.c netif/siphash.h netif/synshed.c netif/synshed.h \
	netif/txwait.c netif/txwait.h netif/qdisc.c
netif_libnif_la_CFLAGS = $(AM_CFLAGS) $(LIBURING_CFLAGS)
netif_libnif_la_LIBADD = netif/libctl.la netif/libwire.la $(LIBURING_LIBS)
