# tests/node/: many processes on ulsd nodes (pytest), and a hostile process for them.
check_PROGRAMS += tests/node/hostile
tests_node_hostile_SOURCES = tests/node/hostile.c tests/node/hostile.h tests/node/hostile_rings.c \
	tests/node/forge.c tests/node/forge.h
tests_node_hostile_LDADD = netif/libnif.la
tests_node_hostile_CFLAGS = $(AM_CFLAGS) $(LIBURING_CFLAGS)
tests_node_hostile_LDADD += $(LIBURING_LIBS)

# Threads of one process blocked in libuls calls at once (test_rtc.py).
check_PROGRAMS += tests/node/rtc
tests_node_rtc_SOURCES = tests/node/rtc.c
tests_node_rtc_LDADD = stack/libuls.la -lpthread

# One process's lease under load: a slow answer from ulsd, thousands of closes
# (test_lease.py).
check_PROGRAMS += tests/node/leasectl
tests_node_leasectl_SOURCES = tests/node/leasectl.c
tests_node_leasectl_LDADD = stack/libuls.la -lpthread

# A SYN flood from spoofed sources, raw frames into the bridge (test_synflood.py).
check_PROGRAMS += tests/node/synflood
tests_node_synflood_SOURCES = tests/node/synflood.c

# Load through libuls directly: an echo server and a holder of many connections, no
# descriptor per socket (test_load.py; loadconn.py is the same under ulsrun).
check_PROGRAMS += tests/node/loadconn
tests_node_loadconn_SOURCES = tests/node/loadconn.c
tests_node_loadconn_LDADD = stack/libuls.la

# An idle process's wake-ups: a listener, an idle connection on both sides (test_idle.py;
# its processes are rtc's).
EXTRA_DIST += tests/node/test_idle.py
