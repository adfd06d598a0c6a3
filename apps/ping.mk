# ulsping: TCP round-trip latency (ping-pong), worker subcommands and the testbed driver.
bin_PROGRAMS += apps/ulsping
apps_ulsping_SOURCES = apps/ulsping.c
apps_ulsping_LDADD = apps/libapps.la stack/libuls.la netif/libnif.la -lpthread
EXTRA_DIST += apps/ulsping_plot.py
# ulsping --breakdown against the build (refused without --enable-breakdown, measured with it).
EXTRA_DIST += tests/bench/test_ping_breakdown.py
