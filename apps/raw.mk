# ulsraw: the raw link limit (frames through the TAP and bridge path without TCP).
bin_PROGRAMS += apps/ulsraw
apps_ulsraw_SOURCES = apps/ulsraw.c
apps_ulsraw_CFLAGS = $(AM_CFLAGS) $(LIBURING_CFLAGS)
apps_ulsraw_LDADD = apps/libapps.la netif/libnif.la $(LIBURING_LIBS) -lpthread
