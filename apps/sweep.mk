# apps/sweep.mk: the ulsbench drivers (include it from Makefile.am after apps/local.mk).
#
# `ulsbench` with no worker subcommand (`server`, `client`) execs
#     /usr/bin/python3 DRIVER ARGS...
# with DRIVER = ulsbench_sweep.py (the concurrent-stream sweep), or ulsbench_apps.py when
# the first argument is `apps` (real programs, ulstack against the kernel), taken from
# $ULS_SRCDIR/apps/ when that file exists (the build tree), else from $(pkglibexecdir)
# (installed, under the root ulsbench runs from: apps/instdirs.h; ulsbench then also
# points ULSD at the installed ulsd).
# Both import ulsbench_common.py from their own directory, and their pure parts from
# modules next to them (ulsbench_sweepargs.py, ulsbench_sweepresults.py; ulsbench_appslogic.py,
# ulsbench_nginx.py, whose nginx.conf the interop tests use too). The drivers look for the
# testbed script at $ULS_SRCDIR/tests/testbed/testbed, else next to themselves, so an
# installed ulsbench needs it installed there too; `ulsbench apps` runs ulspingpong from
# the build tree's apps/ or from next to itself.
dist_pkglibexec_SCRIPTS = apps/ulsbench_sweep.py apps/ulsbench_apps.py apps/ulsbench_common.py \
	apps/ulsbench_sweepargs.py apps/ulsbench_sweepresults.py apps/ulsbench_appslogic.py \
	apps/ulsbench_nginx.py tests/testbed/testbed
pkglibexec_PROGRAMS = apps/ulspingpong
apps_ulspingpong_SOURCES = apps/ulspingpong.c
# Only apps/xfer.c of it (plain libc: the program is what the shim runs).
apps_ulspingpong_LDADD = apps/libapps.la

# Unit tests of the drivers' pure logic (pytest; no root, no network):
#     $(PYTHON_TESTS) -m pytest tests/bench/test_sweep_logic.py tests/bench/test_apps_logic.py
# and the smoke run of `ulsbench apps` (root): tests/bench/test_ulsbench_apps.py
EXTRA_DIST += tests/bench/test_sweep_logic.py tests/bench/test_apps_logic.py tests/bench/appmod.py \
	tests/bench/test_ulsbench_apps.py
