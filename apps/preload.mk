# apps/preload/: libuls-preload.so, the POSIX shim, and ulsrun, which runs a program on it.
#
# The preload library carries libuls (and lwIP) inside it, so that LD_PRELOAD names one
# file, and exports the C library's names and nothing else (apps/preload/preload.map).
pkglib_LTLIBRARIES += apps/libuls-preload.la
apps_libuls_preload_la_SOURCES = apps/preload/shim.h apps/preload/real.c \
	apps/preload/fdtab.c apps/preload/socket.c apps/preload/io.c apps/preload/fd.c \
	apps/preload/poll.c apps/preload/fork.c apps/preload/exec.c apps/preload/ifaddr.c \
	apps/preload/signal.c apps/preload/sockaddr.c apps/preload/uepoll.c apps/preload/uepoll.h \
	apps/preload/uepwait.c
apps_libuls_preload_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/stack/include
apps_libuls_preload_la_LIBADD = stack/libuls-internal.la -ldl -lpthread
apps_libuls_preload_la_LDFLAGS = -module -avoid-version -shared \
	-Wl,--version-script=$(top_srcdir)/apps/preload/preload.map
EXTRA_apps_libuls_preload_la_DEPENDENCIES = $(top_srcdir)/apps/preload/preload.map
EXTRA_DIST += apps/preload/preload.map

bin_PROGRAMS += apps/ulsrun
apps_ulsrun_SOURCES = apps/ulsrun.c
apps_ulsrun_CPPFLAGS = $(AM_CPPFLAGS) $(INSTDIRS_CPPFLAGS)
apps_ulsrun_LDADD = netif/libopt.la
