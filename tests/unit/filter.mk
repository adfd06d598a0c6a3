# Unit tests of filter/ (cmocka): one program per source file under test.
FILTER_UNIT_TESTS = tests/unit/test_filter_parse tests/unit/test_filter_table tests/unit/test_filter_table6
check_PROGRAMS += $(FILTER_UNIT_TESTS)
TESTS += $(FILTER_UNIT_TESTS)

tests_unit_test_filter_parse_SOURCES = tests/unit/test_filter_parse.c tests/unit/filter_frames.h
tests_unit_test_filter_parse_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_filter_parse_LDADD = filter/libflt.la $(CMOCKA_LIBS)

tests_unit_test_filter_table_SOURCES = tests/unit/test_filter_table.c tests/unit/filter_frames.h \
	tests/unit/filter_table_fixture.h
tests_unit_test_filter_table_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_filter_table_LDADD = filter/libflt.la $(CMOCKA_LIBS)
tests_unit_test_filter_table6_SOURCES = tests/unit/test_filter_table6.c tests/unit/filter_frames.h \
	tests/unit/filter_table_fixture.h
tests_unit_test_filter_table6_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_filter_table6_LDADD = filter/libflt.la $(CMOCKA_LIBS)

# The direct data path's BPF programs (filter/datapath.bpf.c, IPv6) run in the kernel
# (BPF_PROG_TEST_RUN) against maps mirrored from a filter table; root only, else skipped.
if ULS_DIRECT
check_PROGRAMS += tests/unit/test_datapath6
TESTS += tests/unit/test_datapath6
tests_unit_test_datapath6_SOURCES = tests/unit/test_datapath6.c tests/unit/dp_fixture.h
nodist_tests_unit_test_datapath6_SOURCES = server/datapath.skel.h
tests_unit_test_datapath6_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS) $(LIBBPF_CFLAGS)
tests_unit_test_datapath6_LDADD = filter/libflt.la $(LIBBPF_LIBS) $(CMOCKA_LIBS)
# IPv4 steering, with and without IP options (the programs' one-read peek).
check_PROGRAMS += tests/unit/test_datapath4
TESTS += tests/unit/test_datapath4
tests_unit_test_datapath4_SOURCES = tests/unit/test_datapath4.c tests/unit/dp_fixture.h
nodist_tests_unit_test_datapath4_SOURCES = server/datapath.skel.h
tests_unit_test_datapath4_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS) $(LIBBPF_CFLAGS)
tests_unit_test_datapath4_LDADD = filter/libflt.la $(LIBBPF_LIBS) $(CMOCKA_LIBS)
# synguard, the direct path's SYN shedding (filter/datapath_syn.bpf.h).
check_PROGRAMS += tests/unit/test_datapath_syn
TESTS += tests/unit/test_datapath_syn
tests_unit_test_datapath_syn_SOURCES = tests/unit/test_datapath_syn.c tests/unit/dp_fixture.h
nodist_tests_unit_test_datapath_syn_SOURCES = server/datapath.skel.h
tests_unit_test_datapath_syn_CPPFLAGS = $(AM_CPPFLAGS) $(CMOCKA_CFLAGS) $(LIBBPF_CFLAGS)
tests_unit_test_datapath_syn_LDADD = filter/libflt.la $(LIBBPF_LIBS) $(CMOCKA_LIBS)
endif
