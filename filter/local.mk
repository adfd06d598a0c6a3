# filter/: the packet-filter demultiplexer. No I/O, no threads, no lwIP: byte arrays in,
# owners and verdicts out, so that it can be unit-tested and fuzzed on its own.
noinst_LTLIBRARIES += filter/libflt.la
filter_libflt_la_SOURCES = filter/filter.h filter/internal.h \
	filter/siphash.h filter/parse.c filter/table.c filter/demux.c
filter_libflt_la_LIBADD = netif/libwire.la

# Its libFuzzer target is tests/fuzz/fuzz_filter.c (tests/fuzz/local.mk).
