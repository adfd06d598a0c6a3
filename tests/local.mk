# tests/: every test speaks TAP, so each case counts on its own in test-suite.log.
#   unit/        cmocka, one program per source file
#   testbed/     the namespace testbed's self-check
#   conformance/ pytest + Scapy against a ulstack node on a real TAP
#   e2e/         pytest: long verified transfers, captures
#   node/        pytest: many processes on ulsd nodes: isolation, crashes, restarts
#   bench/       pytest: the benchmark sweep's own logic (fairness, schema, checks)
#   shim/        pytest: what libuls-preload promises programs (fds, epoll, signals, fork)
#   interop/     pytest: real programs under ulsrun (nc, curl, iperf3, redis, nginx, asyncio)
LOG_DRIVER = env AM_TAP_AWK='$(AWK)' $(SHELL) $(top_srcdir)/build-aux/tap-driver.sh
AM_TESTS_ENVIRONMENT = \
	CMOCKA_MESSAGE_OUTPUT=TAP; export CMOCKA_MESSAGE_OUTPUT; \
	ULS_BUILDDIR='$(abs_top_builddir)'; export ULS_BUILDDIR; \
	ULS_SRCDIR='$(abs_top_srcdir)'; export ULS_SRCDIR; \
	PYTHON_TESTS='$(PYTHON_TESTS)'; export PYTHON_TESTS;

include tests/unit/local.mk
include tests/node/local.mk

TESTS += tests/testbed/test_testbed.sh tests/conformance/run tests/e2e/run tests/node/run \
	tests/bench/run tests/shim/run tests/interop/run
EXTRA_DIST += tests/testbed tests/conformance tests/e2e tests/node/run tests/node/conftest.py \
	tests/node/test_node.py tests/bench/run tests/pytest-tap
EXTRA_DIST += tests/tblib.py tests/shim/run tests/shim/conftest.py tests/shim/test_shim.py tests/shim/cases.py \
	tests/shim/peer.py
EXTRA_DIST += tests/interop/run tests/interop/conftest.py tests/interop/asyncio_echo.py \
	tests/interop/test_asyncio.py tests/interop/test_curl.py tests/interop/test_iperf3.py \
	tests/interop/test_nc.py tests/interop/test_nginx.py tests/interop/test_redis.py

# What the suites leave in the build tree (captures of every conformance exchange).
clean-local: clean-test-outputs
clean-test-outputs:
	-rm -rf tests/conformance/captures
.PHONY: clean-test-outputs
