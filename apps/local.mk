# apps/: programs built on libuls.
noinst_LTLIBRARIES += apps/libapps.la
# The apps' parts, one responsibility each; the programs' main()s are thin command lines.
apps_libapps_la_SOURCES = apps/netops.c apps/netops.h apps/pattern.c apps/pattern.h \
	apps/clock.c apps/clock.h apps/breakdown.c apps/breakdown.h \
	apps/ping.h apps/pingstats.c apps/pingstats.h apps/pingwork.c apps/pingdrive.c \
	apps/rawframe.c apps/rawframe.h apps/rawopts.c apps/rawopts.h apps/xfer.c apps/xfer.h \
	apps/benchstream.c apps/benchstream.h
apps_libapps_la_CPPFLAGS = $(AM_CPPFLAGS) $(INSTDIRS_CPPFLAGS)
apps_libapps_la_LIBADD = netif/libopt.la

# Where installed programs find each other (apps/instdirs.h): configure's directories.
INSTDIRS_CPPFLAGS = -DULS_BINDIR='"$(bindir)"' -DULS_SBINDIR='"$(sbindir)"' \
	-DULS_PKGLIBDIR='"$(pkglibdir)"' -DULS_PKGLIBEXECDIR='"$(pkglibexecdir)"'
noinst_HEADERS += apps/instdirs.h

bin_PROGRAMS += apps/ulsbench apps/ulsnode
apps_ulsbench_SOURCES = apps/ulsbench.c
apps_ulsbench_CPPFLAGS = $(AM_CPPFLAGS) $(INSTDIRS_CPPFLAGS) \
	-DULS_BUILD_SRCDIR='"$(abs_top_srcdir)"'
apps_ulsbench_LDADD = apps/libapps.la stack/libuls.la netif/libnif.la -lpthread
apps_ulsnode_SOURCES = apps/ulsnode.c
apps_ulsnode_LDADD = apps/libapps.la stack/libuls.la netif/libnif.la -lpthread

bin_PROGRAMS += apps/ulsstat
apps_ulsstat_SOURCES = apps/ulsstat.c apps/ulsstat.h apps/statprom.c
apps_ulsstat_LDADD = netif/libopt.la netif/libnif.la

bin_PROGRAMS += apps/ulsrelay
apps_ulsrelay_SOURCES = apps/ulsrelay.c
apps_ulsrelay_LDADD = apps/libapps.la stack/libuls.la netif/libnif.la -lpthread

include apps/raw.mk
include apps/sweep.mk
include apps/ping.mk
include apps/preload.mk
