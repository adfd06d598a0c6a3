# tests/node/: many processes on ulsd nodes (pytest), and a hostile process for them.
check_PROGRAMS += tests/node/hostile
tests_node_hostile_SOURCES = tests/node/hostile.c
tests_node_hostile_LDADD = netif/libnif.la
tests_node_hostile_CFLAGS = $(AM_CFLAGS) $(LIBURING_CFLAGS)
tests_node_hostile_LDADD += $(LIBURING_LIBS)
