# apps/sweep.mk: the ulsbench sweep driver (include it from Makefile.am after apps/local.mk).
#
# `ulsbench` with no worker subcommand (`server`, `client`) execs
#     /usr/bin/python3 DRIVER ARGS...
# with DRIVER = $ULS_SRCDIR/apps/ulsbench_sweep.py when that file exists (the build tree),
# else $(pkglibexecdir)/ulsbench_sweep.py (installed; apps/local.mk passes
# -DPKGLIBEXECDIR='"$(pkglibexecdir)"' to ulsbench.c).
# The driver looks for the testbed script at $ULS_SRCDIR/tests/testbed/testbed, else next
# to itself, so an installed ulsbench sweep needs it installed there too.
dist_pkglibexec_SCRIPTS = apps/ulsbench_sweep.py tests/testbed/testbed

# Unit tests of the driver's pure logic (pytest; no root, no network):
#     $(PYTHON_TESTS) -m pytest tests/bench/test_sweep_logic.py
EXTRA_DIST += tests/bench/test_sweep_logic.py
