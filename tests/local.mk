# tests/: every test speaks TAP, so each case counts on its own in test-suite.log.
#   unit/        cmocka, one program per source file
#   testbed/     the namespace testbed's self-check
#   conformance/ pytest + Scapy against a ulstack node on a real TAP
#   e2e/         pytest: long verified transfers, captures
#   node/        pytest: many processes on ulsd nodes: isolation, crashes, restarts
#                (run-relay: again on the relay data path; shim/run-relay likewise)
#   bench/       pytest: the benchmark sweep's own logic (fairness, schema, checks)
#   shim/        pytest: what libuls-preload promises programs (fds, epoll, signals, fork)
#   interop/     pytest: real programs under ulsrun (nc, curl, iperf3, redis, nginx, asyncio)
#   hosts/       pytest: two hosts (testbed --hosts 2): nodes and kernel peers across a wire
LOG_DRIVER = env AM_TAP_AWK='$(AWK)' $(SHELL) $(top_srcdir)/build-aux/tap-driver.sh
AM_TESTS_ENVIRONMENT = \
	CMOCKA_MESSAGE_OUTPUT=TAP; export CMOCKA_MESSAGE_OUTPUT; \
	ULS_BUILDDIR='$(abs_top_builddir)'; export ULS_BUILDDIR; \
	ULS_SRCDIR='$(abs_top_srcdir)'; export ULS_SRCDIR; \
	PYTHON_TESTS='$(PYTHON_TESTS)'; export PYTHON_TESTS;

include tests/unit/local.mk
include tests/node/local.mk
include tests/shim/local.mk
include tests/fuzz/local.mk

TESTS += tests/testbed/test_testbed.sh tests/conformance/run tests/e2e/run tests/node/run \
	tests/bench/run tests/shim/run tests/interop/run tests/hosts/run
# The suites whose processes run on ulsd nodes, again with the relay data path forced
# (ulsd's default is the direct path: both are in `make check`).
TESTS += tests/node/run-relay tests/shim/run-relay
# Files, not directories: for a directory, `make dist` would take the build tree's (where
# the suites leave their logs) over the source tree's.
EXTRA_DIST += tests/testbed/README.md tests/testbed/test_testbed.sh tests/testbed/testbed \
	tests/conformance/conftest.py tests/conformance/run tests/conformance/test_rfc1122_ip.py \
	tests/conformance/flight.py tests/conformance/tcppeer.py tests/conformance/test_rfc6298_rto.py \
	tests/conformance/test_rfc5681_recovery.py tests/conformance/test_rfc3042_limited_transmit.py \
	tests/conformance/test_rfc6582_newreno.py tests/conformance/test_rfc6675_sack.py \
	tests/conformance/test_rfc8985_rack_tlp.py tests/conformance/test_rfc5682_frto.py \
	tests/conformance/test_rfc9438_cubic.py tests/conformance/test_rfc9438_spurious_undo.py \
	tests/conformance/test_rfc2018_sack.py tests/conformance/test_rfc2883_dsack.py \
	tests/conformance/test_rfc5681_ack.py \
	tests/conformance/test_rfc5961_rst.py tests/conformance/test_rfc6298_retransmit.py \
	tests/conformance/test_rfc7323_options.py tests/conformance/test_rfc768_udp.py \
	tests/conformance/test_rfc8200_ipv6_stack.py tests/conformance/test_rfc8201_pmtu6.py \
	tests/conformance/test_rfc792_icmp.py tests/conformance/test_rfc826_arp.py \
	tests/conformance/test_rfc4861_nd.py tests/conformance/test_rfc4861_redirect.py tests/conformance/test_rfc4443_icmpv6.py \
	tests/conformance/test_rfc8200_ipv6.py tests/conformance/test_rfc8200_fragments.py \
	tests/conformance/test_rfc9293_close.py tests/conformance/test_rfc9293_data.py \
	tests/conformance/test_rfc9293_handshake.py tests/conformance/test_rfc9293_zero_window.py \
	tests/conformance/reqtable.py tests/conformance/mutate.py tests/conformance/lwip-mutate \
	tests/conformance/mutations.json tests/conformance/test_zz_requirements_table.py \
	tests/conformance/test_rfc9293_mss.py tests/conformance/test_rfc9293_window_edge.py \
	tests/conformance/test_rfc9293_tiny_window.py \
	tests/conformance/test_rfc9293_receive_buffer.py \
	tests/conformance/test_rfc9293_user_timeout.py \
	tests/conformance/test_rfc9293_keepalive.py \
	tests/conformance/test_rfc9293_segment_checks.py tests/conformance/test_rfc7323_paws.py \
	tests/e2e/conftest.py tests/e2e/run tests/e2e/test_transfer.py \
	tests/node/run tests/node/conftest.py tests/node/test_node.py tests/node/test_node_hostile.py tests/node/test_node_ipv6.py tests/node/test_node_wire.py tests/node/test_ulsstat.py tests/node/test_rtc.py tests/node/test_lease.py tests/bench/run tests/pytest-tap \
	tests/bench/test_sweep_logic.py tests/bench/test_ping_breakdown.py tests/bench/test_ulsbench_runs.py
# Conformance tests of issue 13's last items (simultaneous open, per-state matrix).
EXTRA_DIST += tests/conformance/test_rfc9293_simultaneous_open.py tests/conformance/test_rfc9293_syn_received.py
EXTRA_DIST += tests/node/run-relay tests/shim/run-relay
EXTRA_DIST += tests/tblib.py tests/peerlib.py tests/shim/run tests/shim/conftest.py tests/shim/test_shim.py tests/shim/cases.py \
	tests/shim/peer.py tests/shim/test_interfaces.py tests/shim/casebase.py tests/shim/cases_epoll.py \
	tests/shim/cases_rounds.py \
	tests/shim/cases_fork.py
EXTRA_DIST += tests/interop/run tests/interop/conftest.py tests/interop/asyncio_echo.py \
	tests/interop/test_asyncio.py tests/interop/test_curl.py tests/interop/test_iperf3.py \
	tests/interop/test_nc.py tests/interop/test_nginx.py tests/interop/test_redis.py \
	tests/interop/forking_echo.py tests/interop/test_forking.py \
	tests/interop/dualstack.py tests/interop/test_dualstack.py

# What the suites leave in the build tree (captures of every conformance exchange).
clean-local: clean-test-outputs
clean-test-outputs:
	-rm -rf tests/conformance/captures
.PHONY: clean-test-outputs
# ICMP errors, PMTUD, TIME-WAIT reopening, urgent data, reassembly (issue 13)
EXTRA_DIST += tests/conformance/test_rfc1122_icmp_errors.py \
	tests/conformance/test_rfc1191_pmtud.py tests/conformance/test_rfc6191_time_wait.py \
	tests/conformance/test_rfc9293_urgent.py tests/conformance/test_rfc791_reassembly.py \
	tests/conformance/test_rfc1122_udp_icmp_errors.py
# What the path MTU tests of both families share (RFC 1191, RFC 8201)
EXTRA_DIST += tests/conformance/pmtu.py
# SYN floods (issue 18): SYN cookies, and a 50,000 SYN/s flood against 4 streams
EXTRA_DIST += tests/conformance/test_rfc4987_syn_cookies.py tests/node/test_synflood.py
# Two hosts joined by a wire (issue 16): streams, curl and interface discovery across
EXTRA_DIST += tests/hosts/run tests/hosts/conftest.py tests/hosts/test_hosts.py tests/hosts/scaling.py
# The installed tools stand alone (issue 16): make install DESTDIR=..., then ulsping and
# ulsrun from the staged prefix with the source and build trees hidden.
TESTS += tests/install/test_installed.sh
EXTRA_DIST += tests/install/test_installed.sh

# The Debian packages (issue 16): build (build-aux/build-deb, lintian), install with dpkg,
# start a node through ulsd@.service's ExecStart in a namespace of the test's own, check
# it, purge; the machine is compared before and after. Not part of `make check` (it
# installs packages on the machine); .ci/run runs it after the suite. lwIP's source is
# the one this build was configured with.
check-packages:
	ULS_LWIP_SRC='$(LWIP_UPSTREAM)' $(SHELL) $(top_srcdir)/tests/packages/test_packages.sh
.PHONY: check-packages
EXTRA_DIST += tests/packages/test_packages.sh build-aux/build-deb build-aux/debian
# ulsd-service (the unit's ExecStart): the file's keys become ulsd's options (no root).
TESTS += tests/packages/test_ulsd_service.sh
EXTRA_DIST += tests/packages/test_ulsd_service.sh
# Load and scale (issue 18): 10,000 and 20,000 connections at once, 100,000 short ones.
# Not part of `make check` (minutes of CPU on a small machine): `make check-load` runs it,
# and .ci/run runs both. Its summary goes to tests/load-suite.log.
EXTRA_DIST += tests/load/run tests/load/conftest.py tests/load/test_load.py tests/load/compare.py \
	tests/node/loadconn.py
check-load:
	@$(MKDIR_P) tests/load
	$(MAKE) $(AM_MAKEFLAGS) check TESTS=tests/load/run TEST_SUITE_LOG=tests/load-suite.log
# The rule Automake writes for each of TESTS, for this one outside them.
tests/load/run.log: tests/load/run
	@p='tests/load/run'; \
	b='tests/load/run'; \
	$(am__check_pre) $(LOG_DRIVER) --test-name "$$f" \
	--log-file $$b.log --trs-file $$b.trs \
	$(am__common_driver_flags) $(AM_LOG_DRIVER_FLAGS) $(LOG_DRIVER_FLAGS) -- $(LOG_COMPILE) \
	"$$tst" $(AM_TESTS_FD_REDIRECT)
.PHONY: check-load
# Processes on ulsd nodes over IPv6 (issue 17, control protocol 3)
EXTRA_DIST += tests/node/test_ipv6.py tests/node/test_ipv6_router.py tests/node/v6peer.py \
	tests/node/ulscounters.py \
	tests/interop/test_ipv6_servers.py
# The module map in docs/architecture.md is what the sources include (issue 15).
TESTS += tests/layout/test_module_map
EXTRA_DIST += tests/layout/test_module_map
# Every file git tracks is in `make dist`, and every file it lists exists.
TESTS += tests/layout/test_dist_files
EXTRA_DIST += tests/layout/test_dist_files
# One make after a change of stack/patches/ rebuilds lwIP and the library from the patches
# (in scratch copies of the source and build trees; about 35 s of CPU).
TESTS += tests/layout/test_lwip_patches
EXTRA_DIST += tests/layout/test_lwip_patches
# Every plain sed of a conformance test's mutation changes its file (a stale one hid in
# a command whose other part still mutated something; stop 43 found two).
TESTS += tests/layout/test_mutation_seds
EXTRA_DIST += tests/layout/test_mutation_seds
