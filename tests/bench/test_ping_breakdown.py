"""ulsping --breakdown against the build it belongs to.

A build without --enable-breakdown must refuse (exit 2, a message naming the option, no
numbers on stdout). A build with it measures: one short relay-mode run (the stamps travel in
the relay's rings) on a testbed of its own
(TB_NAME=ulsbrktest, root), whose JSON must hold a breakdown per direction whose stage
means add up to the one-way latency. The refusal needs no root and no network.
"""
import json
import os
import subprocess
import tempfile

import pytest

SRC = os.environ.get("ULS_SRCDIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("ULS_BUILDDIR") or os.path.join(SRC, "build")
PING = os.path.join(BUILD, "apps", "ulsping")
STAGES = ["send_stack", "tx_netif", "tx_ring", "ulsd_tx", "kernel", "ulsd_demux", "ulsd_rx",
          "rx_ring", "recv_stack"]


def _breakdown_build():
    with open(os.path.join(BUILD, "config.h")) as f:
        return any(line.startswith("#define ULS_BREAKDOWN 1") for line in f)


BREAKDOWN = _breakdown_build()


def _run(*args, env=None, timeout=60):
    return subprocess.run([PING, *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, env=env)


def test_worker_breakdown_option_is_refused_where_it_cannot_measure():
    r = _run("client", "--to", "198.18.0.2:7100", "--size", "1", "--breakdown",
             "/nonexistent/bd")
    assert r.returncode == 2
    assert r.stdout == ""
    # without the option compiled in, that is the reason; with it, the missing --ctl is
    assert ("--ctl" if BREAKDOWN else "--enable-breakdown") in r.stderr


def test_driver_breakdown_refuses_without_the_build_option_or_measures_with_it():
    if not BREAKDOWN:
        r = _run("--breakdown", "--mode", "relay", "--sizes", "1")
        assert r.returncode == 2
        assert "needs a build configured with --enable-breakdown" in r.stderr
        assert r.stdout == ""
        return
    if os.geteuid() != 0:
        pytest.skip("the measuring run builds a testbed: needs root")
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "ping.json")
        env = dict(os.environ, TB_NAME="ulsbrktest")
        r = _run("--breakdown", "--mode", "relay", "--sizes", "64", "--json", out, env=env,
                 timeout=180)
        assert r.returncode == 0, r.stderr
        assert "One-way latency by layer" in r.stdout
        with open(out) as f:
            runs = json.load(f)["runs"]
    assert len(runs) == 1
    run = runs[0]
    assert run["mode"] == "relay" and run["ok"]
    one_ways = 0
    for direction in ("client_to_server", "server_to_client"):
        b = run["breakdown"][direction]
        assert b["messages"] == 2950
        assert b["samples"] >= 0.95 * b["messages"]
        assert [s["stage"] for s in b["stages"]] == STAGES
        assert all(s["mean_us"] >= 0 and s["p50_us"] >= 0 for s in b["stages"])
        total = sum(s["mean_us"] for s in b["stages"])
        assert total == pytest.approx(b["one_way_us"]["mean"], abs=0.01)
        one_ways += b["one_way_us"]["mean"]
    # a round trip is the two one-way trips and the server's turn-around
    assert one_ways <= run["rtt_us"]["mean"] * 1.05
    assert one_ways >= run["rtt_us"]["mean"] * 0.8
