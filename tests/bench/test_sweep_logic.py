"""Unit tests of the pure logic of the ulsbench sweep driver (apps/ulsbench_sweep.py).

No root, no network, no processes: the module is imported by path, which must not run
anything.
"""
import json
import math
import os
import subprocess
import sys
import time

import pytest

import appmod

SRC = os.environ.get("ULS_SRCDIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(SRC, "apps", "ulsbench_sweep.py")


def _load():
    return appmod.load("ulsbench_sweep")


sw = _load()


# --- Jain's fairness index -----------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 7, 64, 1024])
def test_jain_equal_is_one(n):
    assert sw.jain([3.5] * n) == pytest.approx(1.0)


@pytest.mark.parametrize("n", [2, 4, 64, 1024])
def test_jain_one_hog_is_one_over_n(n):
    assert sw.jain([5.0] + [0.0] * (n - 1)) == pytest.approx(1.0 / n)


def test_jain_known_vectors():
    # (1+2+3)^2 / (3 * (1+4+9)) = 36/42
    assert sw.jain([1, 2, 3]) == pytest.approx(36 / 42)
    # (1+3)^2 / (2 * (1+9)) = 16/20
    assert sw.jain([1, 3]) == pytest.approx(0.8)
    # half the streams get everything: index 1/2
    assert sw.jain([2, 2, 0, 0]) == pytest.approx(0.5)


def test_jain_scale_invariant_and_bounded():
    xs = [0.3, 1.7, 2.2, 9.0, 0.01]
    assert sw.jain(xs) == pytest.approx(sw.jain([x * 1000 for x in xs]))
    assert 1 / len(xs) <= sw.jain(xs) <= 1


def test_jain_undefined():
    assert sw.jain([]) is None
    assert sw.jain([0, 0, 0]) is None


# --- min / median / max --------------------------------------------------------------
def test_summarize_odd_even_single():
    assert sw.summarize([3, 1, 2]) == {"min": 1, "median": 2, "max": 3}
    assert sw.summarize([4, 1, 3, 2]) == {"min": 1, "median": 2.5, "max": 4}
    assert sw.summarize([7.5]) == {"min": 7.5, "median": 7.5, "max": 7.5}


def test_summarize_empty():
    with pytest.raises(ValueError):
        sw.summarize([])


# --- streams per process ---------------------------------------------------------------
@pytest.mark.parametrize("n", list(range(1, 130)) + [255, 256, 500, 512, 777, 1000, 1023, 1024])
def test_split_streams(n):
    groups = sw.split_streams(n)
    assert sum(groups) == n
    assert len(groups) == min(n, sw.MAX_PROCS)
    assert max(groups) - min(groups) <= 1
    assert all(g >= 1 for g in groups)


def test_split_streams_paper_cases():
    assert sw.split_streams(1) == [1]
    assert sw.split_streams(64) == [1] * 64           # one stream per process up to 64
    assert sw.split_streams(128) == [2] * 64
    assert sw.split_streams(1024) == [16] * 64
    assert sw.split_streams(100) == [2] * 36 + [1] * 28


@pytest.mark.parametrize("bad", [0, -1, 1.5, "4"])
def test_split_streams_rejects(bad):
    with pytest.raises(ValueError):
        sw.split_streams(bad)


# --- argument validation -----------------------------------------------------------
def test_defaults():
    o = sw.parse_args([])
    assert o["modes"] == ["raw", "kernel", "perproc", "relay", "central"]
    assert o["streams"] == [1, 2, 4, 8, 16, 32, 64]
    assert o["mtus"] == [1500]
    assert o["seconds"] == sw.DEFAULT_SECONDS and o["bytes"] is None
    assert o["json"] is None and o["plot"] is None


def test_parse_lists_sorted_and_deduplicated():
    o = sw.parse_args(["--mode", "central,kernel,kernel", "--streams", "8,1,8,1024",
                       "--mtu", "9000,1500", "--seconds", "2.5"])
    assert o["modes"] == ["kernel", "central"]          # run order, not command-line order
    assert o["streams"] == [1, 8, 1024]
    assert o["mtus"] == [1500, 9000]
    assert o["seconds"] == 2.5


def test_mode_all():
    assert sw.parse_args(["--mode", "all"])["modes"] == list(sw.MODES)


def test_plot_defaults_next_to_json(tmp_path):
    o = sw.parse_args(["--json", str(tmp_path / "r.json")])
    assert o["plot"] == str(tmp_path)
    o = sw.parse_args(["--json", str(tmp_path / "r.json"), "--plot", "/x/y"])
    assert o["plot"] == "/x/y"


def test_bytes_option():
    o = sw.parse_args(["--mode", "kernel,perproc", "--bytes", "64M"])
    assert o["bytes"] == 64 << 20 and o["seconds"] is None


@pytest.mark.parametrize("argv", [
    ["--mode", "bogus"],
    ["--mode", ""],
    ["--mode", "kernel,"],
    ["--streams", "0"],
    ["--streams", "1025"],
    ["--streams", "-4"],
    ["--streams", "2,x"],
    ["--streams", "1.5"],
    ["--streams", ""],
    ["--mtu", "100"],
    ["--mtu", "65535"],                  # above the TAP maximum of 65521
    ["--mtu", "70000"],
    ["--mtu", "jumbo"],
    ["--seconds", "0"],
    ["--seconds", "-1"],
    ["--seconds", "nan"],
    ["--seconds", "inf"],
    ["--seconds", "1000"],
    ["--seconds", "abc"],
    ["--seconds", "2", "--bytes", "1M"],  # mutually exclusive
    ["--bytes", "1000"],                 # not a whole number of 64 KiB messages
    ["--bytes", "1T"],
    ["--bytes", "64M"],                  # raw mode is in the default modes: time only
    ["--json", "/nonexistent-dir-for-ulsbench/x.json"],
    ["--unknown"],
    ["positional"],
])
def test_bad_arguments(argv):
    with pytest.raises(sw.UsageError):
        sw.parse_args(argv)


def test_mtu_65535_message_names_the_tap_max():
    with pytest.raises(sw.UsageError, match="65521"):
        sw.parse_args(["--mtu", "65535"])


def test_bad_arguments_exit_2_before_anything_runs():
    # Bad arguments are rejected before the root check, the testbed or any process.
    r = subprocess.run([sys.executable, SCRIPT, "--streams", "0"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2
    assert "--streams" in r.stderr and r.stdout == ""


def test_help_exits_0():
    r = subprocess.run([sys.executable, SCRIPT, "--help"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and "--streams" in r.stdout


# --- phases ----------------------------------------------------------------------------
def test_phases_default():
    ph = sw.plan_phases(list(sw.MODES), [1500, 9000])
    assert ph == [
        {"mtu": 1500, "ulsd": False, "modes": ["raw", "kernel"]},
        {"mtu": 1500, "ulsd": True, "modes": ["perproc", "relay", "central"]},
        {"mtu": 9000, "ulsd": False, "modes": ["raw", "kernel"]},
        {"mtu": 9000, "ulsd": True, "modes": ["perproc", "relay", "central"]},
    ]


def test_phases_kernel_joins_the_ulsd_phase_without_raw():
    assert sw.plan_phases(["kernel", "perproc"], [1500]) == [
        {"mtu": 1500, "ulsd": True, "modes": ["kernel", "perproc"]}]
    assert sw.plan_phases(["kernel"], [1500]) == [
        {"mtu": 1500, "ulsd": False, "modes": ["kernel"]}]
    assert sw.plan_phases(["raw"], [9000]) == [{"mtu": 9000, "ulsd": False, "modes": ["raw"]}]


def test_point_timeout_bounded():
    assert sw.point_timeout(1, seconds=2) < 40
    assert sw.point_timeout(1024, seconds=60) < 400
    assert sw.point_timeout(1024, nbytes=16 << 30) <= 900


# --- worker results: verified or rejected ----------------------------------------------
def _client(streams, verified=True):
    return {"stack": "ulstack", "dir": "send", "verified": verified,
            "streams": [{"bytes_verified": b, "seconds": s, "gbps": b * 8 / s / 1e9 if s else 0.0,
                         "verified": v} for b, s, v in streams],
            "bytes_verified": sum(b for b, _, _ in streams), "seconds": 2.0,
            "gbps": 1.0, "cpu_seconds": 0.5}


def test_client_streams_ok():
    out = sw.client_streams(_client([(1 << 20, 1.0, True), (2 << 20, 2.0, True)]), 2, "c")
    assert [s["bytes"] for s in out] == [1 << 20, 2 << 20]
    assert out[0]["gbps"] == pytest.approx((1 << 20) * 8 / 1e9)


def test_client_streams_single_stream_document():
    doc = {"stack": "kernel", "dir": "send", "bytes": 65536, "bytes_verified": 65536,
           "verified": True, "seconds": 0.5, "gbps": 0.001, "cpu_seconds": 0.1}
    assert sw.client_streams(doc, 1, "c")[0]["bytes"] == 65536


@pytest.mark.parametrize("doc", [
    _client([(1 << 20, 1.0, True)], verified=False),           # whole process unverified
    _client([(1 << 20, 1.0, True), (1 << 20, 1.0, False)]),    # one stream unverified
    _client([(0, 1.0, True), (1 << 20, 1.0, True)]),           # a stream moved nothing
    _client([(1 << 20, 0.0, True), (1 << 20, 1.0, True)]),     # no time
    _client([(1 << 20, 1.0, True)]),                           # too few streams
    {"verified": "true", "streams": []},                       # not a JSON boolean
    {"stack": "kernel", "verified": False, "bytes_verified": 0, "seconds": 1.0},
    [],
])
def test_client_streams_rejects_unverified(doc):
    with pytest.raises(sw.BenchError):
        sw.client_streams(doc, 2, "c")


def test_client_streams_rejects_inconsistent_total():
    doc = _client([(1 << 20, 1.0, True), (1 << 20, 1.0, True)])
    doc["bytes_verified"] += 1
    with pytest.raises(sw.BenchError):
        sw.client_streams(doc, 2, "c")


def test_server_lines():
    ok = ('ulsbench noise\n{"role": "server", "dir": "recv", "bytes": 10, "verified": true, '
          '"seconds": 1.0, "pid": 1}\n{"role": "server", "dir": "recv", "bytes": 20, '
          '"verified": true, "seconds": 1.0, "pid": 1}\n')
    assert [d["bytes"] for d in sw.server_lines(ok, 2, "s")] == [10, 20]
    with pytest.raises(sw.BenchError):
        sw.server_lines(ok, 3, "s")                                    # one missing
    bad = ok.replace('"bytes": 20, "verified": true', '"bytes": 20, "verified": false')
    with pytest.raises(sw.BenchError):
        sw.server_lines(bad, 2, "s")
    with pytest.raises(sw.BenchError):
        sw.server_lines('{"role": "server", "bytes": 1, "verified": tr', 1, "s")


def _raw(streams, **kw):
    d = {"mode": "raw", "role": "recv", "mtu": 1500, "seconds": 2.0, "frames": 100,
         "bytes_verified": sum(streams), "gbps": 1.0, "lost": 0, "corrupt": 0,
         "streams": [{"id": i, "bytes_verified": b, "gbps": b * 8 / 2.0 / 1e9}
                     for i, b in enumerate(streams)], "cpu_seconds": 1.0}
    d.update(kw)
    return d


def test_raw_streams():
    out = sw.raw_streams(_raw([1000, 2000]), 2, "r")
    assert [s["bytes"] for s in out] == [1000, 2000]
    for bad in (_raw([1000, 2000], corrupt=1), _raw([1000, 0]), _raw([1000]),
                _raw([1000, 2000], verified=False), _raw([1000, 2000], seconds=0)):
        with pytest.raises(sw.BenchError):
            sw.raw_streams(bad, 2, "r")


# --- the run object ---------------------------------------------------------------------
def _streams(rates, seconds=2.0):
    return [{"bytes": int(r * 1e9 / 8 * seconds), "seconds": seconds, "gbps": r}
            for r in rates]


def test_make_run_schema_and_numbers():
    st = _streams([1.0, 2.0, 3.0])
    cpu = {"total": 4.25, "workers": 4.0, "ulsd": 0.25, "includes": "x"}
    run = sw.make_run("perproc", 3, 1500, 2.0, st, cpu, {"processes": {"senders": 3}})
    assert sw.check_run_schema(run) == []
    assert json.loads(json.dumps(run)) == run                  # plain JSON types
    for k in sw.RUN_KEYS:
        assert k in run
    assert run["mode"] == "perproc" and run["streams"] == 3 and run["mtu"] == 1500
    assert run["bytes_verified"] == sum(s["bytes"] for s in st)
    assert run["aggregate_gbps"] == pytest.approx(6.0, rel=1e-3)
    assert run["per_stream_gbps"] == {"min": 1.0, "median": 2.0, "max": 3.0}
    assert run["jain"] == pytest.approx(36 / 42, abs=1e-4)
    assert run["cpu_seconds"] == pytest.approx(4.25)
    assert run["cpu"]["includes"] == "x"
    assert run["verified"] is True


def test_make_run_rejects_missing_streams_and_time():
    with pytest.raises(sw.BenchError):
        sw.make_run("kernel", 4, 1500, 2.0, _streams([1.0, 2.0]), {"total": 0.0})
    with pytest.raises(sw.BenchError):
        sw.make_run("kernel", 1, 1500, 0.0, _streams([1.0]), {"total": 0.0})


def test_check_run_schema_finds_problems():
    run = sw.make_run("kernel", 2, 9000, 1.0, _streams([1.0, 1.0]), {"total": 1.0})
    assert sw.check_run_schema(run) == []
    broken = dict(run)
    del broken["jain"]
    assert sw.check_run_schema(broken) == ["missing jain"]
    broken = dict(run, mode="fast")
    assert "mode" in sw.check_run_schema(broken)
    broken = dict(run, per_stream_gbps={"min": 2, "median": 1, "max": 3})
    assert sw.check_run_schema(broken)


def test_table_and_sort():
    runs = [sw.make_run(m, n, 1500, 1.0, _streams([1.0] * n), {"total": 1.0})
            for m in ("central", "kernel") for n in (4, 1)]
    runs = sw.sort_runs(runs)
    assert [(r["mode"], r["streams"]) for r in runs] == [
        ("kernel", 1), ("kernel", 4), ("central", 1), ("central", 4)]
    text = sw.format_table(runs)
    assert len(text.splitlines()) == 2 + 4
    assert "Jain" in text and "central" in text


def test_plots(tmp_path):
    pytest.importorskip("matplotlib")
    runs = [sw.make_run(m, n, mtu, 1.0, _streams([1.0 / n + 0.01 * i for i in range(n)]),
                        {"total": 1.0})
            for m in sw.MODES for n in (1, 2, 4) for mtu in (1500, 9000)]
    paths = sw.plot_runs(runs, str(tmp_path))
    assert sorted(os.path.basename(p) for p in paths) == ["aggregate.png", "per_stream.png"]
    for p in paths:
        with open(p, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"


# --- CPU accounting --------------------------------------------------------------------
class _P:
    def __init__(self, name, cpu):
        self.name, self.cpu = name, cpu


def test_cpu_breakdown():
    procs = [_P("central-n2-server", 1.0), _P("central-n2-relay2", 2.0),
             _P("central-n2-relay1", 2.5), _P("central-n2-client0", 0.25),
             _P("central-n2-client1", 0.25)]
    cpu = sw.cpu_breakdown(procs, ulsd=0.5)
    assert cpu["senders"] == 0.5 and cpu["receivers"] == 1.0 and cpu["relays"] == 4.5
    assert cpu["ulsd"] == 0.5 and cpu["total"] == pytest.approx(6.5)
    assert cpu["includes"] == ["senders", "receivers", "relays", "ulsd"]
    cpu = sw.cpu_breakdown([_P("kernel-n1-server", 1.0), _P("kernel-n1-client0", 2.0)])
    assert cpu["includes"] == ["senders", "receivers"] and cpu["total"] == 3.0
    cpu = sw.cpu_breakdown([_P("raw-n4-recv", 1.0), _P("raw-n4-send", 1.5)])
    assert cpu["senders"] == 1.5 and cpu["receivers"] == 1.0


def test_fault_breakdown():
    # wait4's minor faults by role, and the mean per process (issue 12)
    procs = [_P("perproc-n2-server", 0), _P("perproc-n2-client0", 0),
             _P("perproc-n2-client1", 0)]
    for p, n in zip(procs, (600, 700, 500)):
        p.minflt = n
    pf = sw.fault_breakdown(procs)
    assert pf == {"senders": 1200, "receivers": 600, "per_process": 600}
    assert sw.fault_breakdown([]) == {}


def test_transfer_window():
    # Two processes: one transferred 100.0..102.0, the other 100.5..102.4.
    assert sw.transfer_window([(102.0, 2.0), (102.4, 1.9)]) == pytest.approx(2.4)
    assert sw.transfer_window([(10.0, 1.5)]) == pytest.approx(1.5)
    assert sw.transfer_window([]) is None
    assert sw.transfer_window([(10.0, None)]) is None
    assert sw.transfer_window([(10.0, 1.0), (11.0, 0)]) is None


# --- the warm-up: measured after it, verified throughout --------------------------------
def _measured(streams):
    """A client document after a warm-up: (bytes verified, measured bytes, from, to)."""
    return {"stack": "ulstack", "dir": "send", "verified": True, "warmup_seconds": 1.0,
            "streams": [{"bytes_verified": b, "seconds": 3.0, "measured_bytes": mb,
                         "measured_from": t0, "measured_to": t1, "gbps": 0.0,
                         "verified": True} for b, mb, t0, t1 in streams],
            "bytes_verified": sum(s[0] for s in streams)}


def test_warmup_defaults_to_one_second_and_is_refused_with_bytes():
    assert sw.parse_args([])["warmup"] == sw.DEFAULT_WARMUP == 1.0
    assert sw.parse_args(["--warmup", "0"])["warmup"] == 0.0
    assert sw.parse_args(["--mode", "kernel", "--bytes", "64M"])["warmup"] == 0.0
    for bad in (["--warmup", "-1"], ["--warmup", "nan"], ["--warmup", "61"],
                ["--warmup", "x"], ["--mode", "kernel", "--bytes", "64M", "--warmup", "1"]):
        with pytest.raises(sw.UsageError):
            sw.parse_args(bad)


def test_stream_rate_is_its_measured_bytes_over_its_measured_span():
    out = sw.client_streams(_measured([(300 << 20, 100 << 20, 10.0, 12.0),
                                       (200 << 20, 50 << 20, 10.1, 12.1)]), 2, "c")
    assert out[0]["bytes"] == 300 << 20                  # verified: warm-up included
    assert out[0]["measured_bytes"] == 100 << 20
    assert out[0]["gbps"] == pytest.approx((100 << 20) * 8 / 2.0 / 1e9)
    assert out[1]["seconds"] == pytest.approx(2.0)


@pytest.mark.parametrize("stream", [
    (1 << 20, 0, 10.0, 12.0),           # nothing measured
    (1 << 20, 2 << 20, 10.0, 12.0),     # measured more than verified
    (1 << 20, 1 << 19, 12.0, 12.0),     # no span
    (1 << 20, 1 << 19, None, 12.0),     # no start
])
def test_a_stream_without_a_sound_measured_span_is_rejected(stream):
    with pytest.raises(sw.BenchError):
        sw.client_streams(_measured([stream]), 1, "c")


def test_aggregate_after_warmup_spans_first_mark_to_last_byte():
    st = sw.client_streams(_measured([(3 << 30, 1 << 30, 100.0, 102.0),
                                      (3 << 30, 1 << 30, 100.5, 103.0)]), 2, "c")
    run = sw.make_run("perproc", 2, 1500, 99.0, st, {"total": 1.0})
    assert sw.check_run_schema(run) == []
    assert run["seconds"] == pytest.approx(3.0)         # 100.0 -> 103.0, not the wall
    assert run["bytes_verified"] == 6 << 30
    assert run["measured_bytes"] == 2 << 30
    assert run["aggregate_gbps"] == pytest.approx((2 << 30) * 8 / 3.0 / 1e9, rel=1e-3)


def test_without_warmup_every_verified_byte_is_measured():
    run = sw.make_run("kernel", 2, 1500, 2.0, _streams([1.0, 3.0]), {"total": 1.0})
    assert run["measured_bytes"] == run["bytes_verified"]
    assert run["aggregate_gbps"] == pytest.approx(4.0, rel=1e-3)


def test_offload_defaults_on_and_reaches_ulsd_through_the_testbed_environment():
    assert sw.parse_args([])["offload"] == "on"
    assert sw.parse_args(["--offload", "off"])["offload"] == "off"
    with pytest.raises(sw.UsageError):
        sw.parse_args(["--offload", "maybe"])
    paths = {"build": None, "ulsd": "/x/ulsd"}
    assert sw.Testbed(paths, offload="on")._env()["ULS_TSO"] == "1"
    assert sw.Testbed(paths, offload="off")._env()["ULS_TSO"] == "0"


# --- the loss sweep (--loss): parsing, planning, counters, the ratio table ---------------
def test_loss_option_parses_percentages_sorted_and_deduplicated():
    assert sw.parse_loss("1,0,0.1,1") == [0.0, 0.1, 1.0]
    assert sw.parse_loss("0.001,99.999") == [0.001, 99.999]
    assert sw.parse_loss(" 2.50 ") == [2.5]


@pytest.mark.parametrize("bad", ["", "x", "-1", "100", "150", "0.0001", "1e-3", "1,,2",
                                 "nan", ".5"])
def test_loss_option_rejects(bad):
    with pytest.raises(sw.UsageError):
        sw.parse_loss(bad)


def test_loss_arg_is_what_the_testbed_takes():
    assert [sw.loss_arg(x) for x in (0.0, 0.1, 1.0, 2.5, 0.001, 99.999)] == [
        "0", "0.1", "1", "2.5", "0.001", "99.999"]


def test_loss_defaults_to_the_tcp_modes_and_changes_nothing_without_it():
    o = sw.parse_args([])
    assert o["loss"] is None and o["repeat"] == 1
    assert o["offloads"] == ["on"] and o["offload"] == "on"
    assert o["modes"] == list(sw.MODES)
    o = sw.parse_args(["--loss", "0,0.1,1"])
    assert o["loss"] == [0.0, 0.1, 1.0]
    assert o["modes"] == ["kernel", "perproc", "central"]
    # modes named explicitly are kept, raw included
    assert sw.parse_args(["--loss", "1", "--mode", "raw,perproc"])["modes"] == ["raw", "perproc"]


def test_offload_list_and_repeat():
    o = sw.parse_args(["--offload", "off,on"])
    assert o["offloads"] == ["on", "off"] and o["offload"] == "on,off"
    assert sw.parse_args(["--offload", "off,off"])["offloads"] == ["off"]
    assert sw.parse_args(["--repeat", "3"])["repeat"] == 3
    for bad in (["--offload", "on,maybe"], ["--offload", ""], ["--repeat", "0"],
                ["--repeat", "21"], ["--repeat", "x"]):
        with pytest.raises(sw.UsageError):
            sw.parse_args(bad)


def test_plan_sweep_without_loss_is_the_old_plan():
    for modes in (list(sw.MODES), ["kernel", "perproc"], ["raw"]):
        assert sw.plan_sweep(modes, [1500, 9000], ["on"], None) == [
            dict(ph, offload="on") for ph in sw.plan_phases(modes, [1500, 9000])]


def test_plan_sweep_offload_passes():
    # Without loss the second offload pass only reruns what offload changes (ulsd modes).
    ph = sw.plan_sweep(list(sw.MODES), [1500], ["on", "off"], None)
    assert [(p["offload"], p["ulsd"], p["modes"]) for p in ph] == [
        ("on", False, ["raw", "kernel"]), ("on", True, ["perproc", "relay", "central"]),
        ("off", True, ["perproc", "relay", "central"])]
    # Under loss the kernel's offload follows too, so every mode runs in both passes.
    ph = sw.plan_sweep(["kernel", "perproc", "central"], [1500], ["on", "off"], [0.0, 1.0])
    assert [(p["offload"], p["modes"]) for p in ph] == [
        ("on", ["kernel", "perproc", "central"]), ("off", ["kernel", "perproc", "central"])]


def test_plan_points_interleaves_repeats_and_loss_levels():
    pts = sw.plan_points(["kernel", "perproc"], [1, 8], None, 1)
    assert [(p["mode"], p["streams"]) for p in pts] == [
        ("kernel", 1), ("kernel", 8), ("perproc", 1), ("perproc", 8)]
    assert all(p["loss"] is None and p["repeat"] == 0 for p in pts)
    pts = sw.plan_points(["kernel", "perproc"], [1], [0.0, 1.0], 2)
    assert [(p["repeat"], p["loss"], p["mode"]) for p in pts] == [
        (0, 0.0, "kernel"), (0, 0.0, "perproc"), (0, 1.0, "kernel"), (0, 1.0, "perproc"),
        (1, 0.0, "kernel"), (1, 0.0, "perproc"), (1, 1.0, "kernel"), (1, 1.0, "perproc")]


def _stats(loss, **ports):
    p = {k: {"frames": f, "bytes": f * 1000, "dropped": d, "dropped_bytes": d * 1000}
         for k, (f, d) in ports.items()}
    return {"impaired": True, "loss_pct": loss,
            "frames": sum(f for f, _ in ports.values()),
            "dropped": sum(d for _, d in ports.values()),
            "bytes": sum(f for f, _ in ports.values()) * 1000,
            "dropped_bytes": sum(d for _, d in ports.values()) * 1000, "ports": p}


def test_impair_delta_counts_what_this_point_dropped():
    d = sw.impair_delta(_stats(1, uls1=(100, 1), uls2=(50, 0)),
                        _stats(1, uls1=(1100, 11), uls2=(550, 6)))
    assert d["loss_pct"] == 1 and d["frames"] == 1500 and d["dropped"] == 16
    assert d["bytes"] == 1500 * 1000 and d["dropped_bytes"] == 16000
    assert d["ports"]["uls1"] == {"frames": 1000, "bytes": 1000000, "dropped": 10,
                                  "dropped_bytes": 10000}


@pytest.mark.parametrize("before,after", [
    (_stats(1, uls1=(100, 1)), _stats(1, uls1=(50, 1))),        # counters went back
    (_stats(1, uls1=(100, 1)), _stats(0.1, uls1=(200, 1))),     # another rate
    (_stats(1, uls1=(100, 1)), _stats(1, uls2=(200, 1))),       # other ports
    (_stats(1, uls1=(100, 1)), {"impaired": False, "loss_pct": None, "frames": 0,
                                "dropped": 0, "bytes": 0, "dropped_bytes": 0, "ports": {}}),
    # bytes that saturated at 2^31 - 1 in both readings: 1000 frames of 0 bytes
    (dict(_stats(1, uls1=(100, 1)), ports={"uls1": {"frames": 100, "bytes": 2147483647,
                                                    "dropped": 1, "dropped_bytes": 1000}}),
     dict(_stats(1, uls1=(1100, 1)), ports={"uls1": {"frames": 1100, "bytes": 2147483647,
                                                     "dropped": 1, "dropped_bytes": 1000}})),
])
def test_impair_delta_refuses_counters_that_do_not_belong_together(before, after):
    with pytest.raises(sw.BenchError):
        sw.impair_delta(before, after)


def test_loss_directions_splits_the_rule_by_the_senders_and_receivers_port():
    run = {"bytes_verified": 2 * 10**9, "impairment": sw.impair_delta(
        _stats(0.1, uls1=(0, 0), uls2=(0, 0), **{"k1-br": (0, 0)}),
        _stats(0.1, uls1=(4000, 30), uls2=(1000, 4), **{"k1-br": (7, 0)}))}
    d = sw.loss_directions(run, sw.data_ports("perproc", {"TB_NODE1_TAP": "uls1",
                                                         "TB_NODE2_TAP": "uls2"}))
    lb = d["loss_by_direction"]
    assert lb["data"] == {"port": "uls1", "frames": 4000, "dropped": 30,
                          "mean_frame_bytes": 1000, "mean_dropped_bytes": 1000,
                          "dropped_per_gb": 15.0}
    assert lb["ack"]["port"] == "uls2" and lb["ack"]["dropped_per_gb"] == 2.0
    assert lb["ack_frames_per_data_frame"] == 0.25
    # the kernel's data enter from k2-br; no such port here, so nothing is claimed
    assert sw.loss_directions(run, sw.data_ports("kernel", {})) == {}
    assert sw.data_ports("central", {}) is None and sw.loss_directions(run, None) == {}


def test_kernel_counters_are_read_from_proc_and_differenced():
    text = ("Tcp: RtoAlgorithm OutSegs RetransSegs\nTcp: 1 100 3\n"
            "TcpExt: TCPSackRecovery TCPTimeouts TCPLossProbes\nTcpExt: 2 0 5\n"
            "IpExt: InOctets\nIpExt: 9\n")
    a = sw.parse_proc_netstat(text)
    assert a["Tcp.OutSegs"] == 100 and a["TcpExt.TCPLossProbes"] == 5 and a["IpExt.InOctets"] == 9
    b = dict(a, **{"Tcp.OutSegs": 250, "TcpExt.TCPSackRecovery": 7})
    d = sw.kernel_counter_delta(a, b)
    assert d == {"OutSegs": 150, "RetransSegs": 0, "TCPSackRecovery": 5, "TCPTimeouts": 0,
                 "TCPLossProbes": 0}
    # a header without its values line, or a short values line, is skipped
    assert sw.parse_proc_netstat("Tcp: A B\nTcp: 1\n") == {}


def _loss_run(mode, n, loss, gbps, offload="on", repeat=0, dropped=5, seen=1000):
    run = sw.make_run(mode, n, 1500, 2.0, _streams([gbps / n] * n), {"total": 1.0})
    run.update(sw.loss_fields(loss, {"loss_pct": loss, "frames": seen, "dropped": dropped,
                                     "bytes": seen * 1500, "dropped_bytes": dropped * 1500,
                                     "ports": {}}, offload))
    run["repeat"] = repeat
    return run


def test_loss_fields_recorded_in_each_run_and_checked_by_the_schema():
    run = _loss_run("perproc", 8, 0.1, 4.0, offload="off", dropped=7, seen=7000)
    assert run["loss_pct"] == 0.1 and run["frames_dropped"] == 7
    assert run["frames_seen"] == 7000 and run["offload"] == "off"
    assert run["impairment"]["dropped_bytes"] == 7 * 1500
    assert sw.check_run_schema(run) == []
    for k, v in (("loss_pct", -1), ("loss_pct", "1"), ("frames_dropped", -1),
                 ("frames_dropped", 1.5), ("frames_seen", 6), ("offload", "maybe")):
        assert sw.check_run_schema(dict(run, **{k: v})), (k, v)


def test_loss_table_medians_and_kernel_relative_ratios():
    runs = [_loss_run("kernel", 1, 1.0, g, repeat=i) for i, g in enumerate((3.0, 4.0, 5.0))]
    runs += [_loss_run("perproc", 1, 1.0, g, repeat=i) for i, g in enumerate((0.1, 0.4, 0.2))]
    runs += [_loss_run("central", 1, 1.0, g, repeat=i) for i, g in enumerate((0.05, 0.8))]
    runs += [_loss_run("perproc", 1, 0.0, 8.0), _loss_run("kernel", 1, 0.0, 10.0)]
    rows = sw.loss_summary(runs)
    assert [(r["offload"], r["loss_pct"], r["streams"]) for r in rows] == [
        ("on", 0.0, 1), ("on", 1.0, 1)]
    one = rows[1]["modes"]
    assert one["kernel"]["gbps"] == pytest.approx(4.0) and one["kernel"]["runs"] == 3
    assert one["perproc"]["gbps"] == pytest.approx(0.2)
    assert one["perproc"]["ratio"] == pytest.approx(0.05)
    assert one["central"]["gbps"] == pytest.approx(0.425)      # median of two
    assert one["kernel"]["ratio"] == pytest.approx(1.0)
    assert rows[0]["modes"]["perproc"]["ratio"] == pytest.approx(0.8)
    assert "central" not in rows[0]["modes"]
    text = sw.format_loss_table(rows)
    assert "0.050x" in text and "0.800x" in text and "loss%" in text
    # a table without a kernel run prints no ratio rather than a wrong one
    rows = sw.loss_summary([_loss_run("perproc", 1, 1.0, 0.2)])
    assert rows[0]["modes"]["perproc"]["ratio"] is None
    assert "0.200" in sw.format_loss_table(rows)


def test_loss_runs_sort_by_offload_loss_mode_streams_repeat():
    runs = [_loss_run(m, n, l, 1.0, offload=o, repeat=r)
            for o in ("off", "on") for l in (1.0, 0.0) for m in ("perproc", "kernel")
            for n in (8, 1) for r in (1, 0)]
    keys = [(r["offload"], r["loss_pct"], r["mode"], r["streams"], r["repeat"])
            for r in sw.sort_runs(runs)]
    assert keys[:3] == [("on", 0.0, "kernel", 1, 0), ("on", 0.0, "kernel", 1, 1),
                        ("on", 0.0, "kernel", 8, 0)]
    assert keys[-1] == ("off", 1.0, "perproc", 8, 1)
    assert "loss%" in sw.format_table(sw.sort_runs(runs))


def test_loss_plots(tmp_path):
    pytest.importorskip("matplotlib")
    runs = [_loss_run(m, n, l, g * (1 - l / 2), offload=o, repeat=r)
            for o in ("on", "off") for l in (0.0, 0.1, 1.0) for n in (1, 8) for r in (0, 1)
            for m, g in (("kernel", 8.0), ("perproc", 6.0), ("central", 3.0))]
    paths = sw.plot_loss(runs, str(tmp_path))
    assert sorted(os.path.basename(p) for p in paths) == ["loss.png", "loss_ratio.png"]
    for p in paths:
        with open(p, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_loss_points_get_more_time_and_the_estimate_counts_every_pass():
    assert sw.point_timeout(8, seconds=2, loss=True) > sw.point_timeout(8, seconds=2)
    base = sw.parse_args(["--streams", "1,8"])
    more = sw.parse_args(["--streams", "1,8", "--loss", "0,0.1,1", "--offload", "on,off",
                          "--repeat", "3"])
    one = sw.parse_args(["--streams", "1,8", "--mode", "kernel,perproc,central"])
    # 3 loss levels x 2 offload passes x 3 repeats of the same points
    assert sw.estimate_seconds(more) > 15 * sw.estimate_seconds(one) * 0.8
    assert sw.estimate_seconds(base) > sw.estimate_seconds(one)


def test_kernel_cc_option_and_the_congestion_the_kernel_runs_report():
    # --kernel-cc names the kernel senders' congestion control (ulsbench client
    # --congestion); without it the namespace's default is used and only reported
    assert sw.parse_args([])["kernel_cc"] is None
    assert sw.parse_args(["--kernel-cc", "cubic"])["kernel_cc"] == "cubic"
    for bad in ("", "Cubic", "cu bic", "x" * 16, "cubic;reboot"):
        with pytest.raises(sw.UsageError):
            sw.parse_args(["--kernel-cc", bad])
    runs = [dict(_loss_run("kernel", 1, 1.0, g, repeat=i), congestion="bbr")
            for i, g in enumerate((3.0, 4.0))]
    runs += [_loss_run("perproc", 1, 1.0, 2.0)]
    rows = sw.loss_summary(runs)
    assert rows[0]["modes"]["kernel"]["congestion"] == "bbr"
    assert "congestion" not in rows[0]["modes"]["perproc"]
    assert "(the kernel's congestion control: bbr)" in sw.format_loss_table(rows)
    # runs that disagree (the sysctl changed between repeats) name none
    runs[1]["congestion"] = "cubic"
    assert "congestion" not in sw.loss_summary(runs)[0]["modes"]["kernel"]


def test_family_six_runs_every_mode_but_raw():
    """--family 6: the kernel and the ulstack modes over IPv6 (ulsd's nodes carry it since
    control protocol 3); raw, which writes IPv4 frames of its own, is refused with the
    reason."""
    assert sw.parse_args([])["family"] == 4
    assert sw.parse_args(["--mode", "kernel", "--family", "6"])["family"] == 6
    assert sw.parse_args(["--mode", "kernel,perproc,relay,central", "--family", "6"])["family"] == 6
    for bad in (["--family", "5"], ["--family", ""]):
        with pytest.raises(sw.UsageError):
            sw.parse_args(bad)
    with pytest.raises(sw.UsageError, match="raw mode writes IPv4 frames"):
        sw.parse_args(["--mode", "raw,kernel", "--family", "6"])


# --- Programs the sweep starts: past libtool's wrapper ----------------------------------
def _common():
    return appmod.load("ulsbench_common", "ulsbench_common_t")


def _wrapper(tmp_path, libdirs):
    (tmp_path / ".libs").mkdir()
    real = tmp_path / ".libs" / "ulsbench"
    real.write_bytes(b"\x7fELF")
    real.chmod(0o755)
    wrapper = tmp_path / "ulsbench"
    wrapper.write_text("#! /bin/bash\n# ulsbench - temporary wrapper script for .libs/ulsbench\n"
                       "# Generated by libtool (GNU libtool) 2.5.4\n"
                       "    LD_LIBRARY_PATH=\"%s:$LD_LIBRARY_PATH\"\n" % libdirs)
    wrapper.chmod(0o755)
    return wrapper, real


def test_sweep_runs_the_program_a_libtool_wrapper_would_exec(tmp_path):
    cm = _common()
    wrapper, real = _wrapper(tmp_path, "/b/stack/.libs:/b/netif/.libs")
    assert cm.unwrap_libtool(str(wrapper)) == (str(real), ["/b/stack/.libs", "/b/netif/.libs"])
    env = {"LD_LIBRARY_PATH": "/x:/b/netif/.libs"}
    paths = cm.run_unwrapped({"ulsbench": str(wrapper), "ulsraw": None}, ("ulsbench", "ulsraw"),
                             env)
    assert paths["ulsbench"] == str(real)
    assert env["LD_LIBRARY_PATH"] == "/b/stack/.libs:/b/netif/.libs:/x"


def test_sweep_leaves_programs_that_are_not_libtool_wrappers_alone(tmp_path):
    cm = _common()
    elf = tmp_path / "ulsd"
    elf.write_bytes(b"\x7fELF\x02\x01")
    script = tmp_path / "other"
    script.write_text("#!/bin/sh\nexec true\n")
    wrapper, real = _wrapper(tmp_path, "/b/stack/.libs")
    real.unlink()                       # a wrapper whose program is not built yet
    for p in (elf, script, wrapper, tmp_path / "missing"):
        assert cm.unwrap_libtool(str(p)) == (str(p), [])
    env = {}
    cm.run_unwrapped({"ulsd": str(elf)}, ("ulsd",), env)
    assert "LD_LIBRARY_PATH" not in env


# --- CPU over the measured part ----------------------------------------------------------
def test_window_cpu_counts_processes_in_both_samples_only():
    first = (10.0, {1: 5_000_000_000, 2: 1_000_000_000, 3: 7})
    last = (12.0, {1: 6_500_000_000, 2: 1_500_000_000, 4: 9})
    w = sw.window_cpu(first, last)
    assert w == {"seconds": 2.0, "cpu_seconds": 2.0, "processes": 2, "processes_left_out": 2}


def test_window_cpu_leaves_out_a_pid_whose_clock_went_back():
    w = sw.window_cpu((0.0, {1: 9, 2: 4}), (1.0, {1: 3, 2: 1_000_000_004}))
    assert w["processes"] == 1 and w["processes_left_out"] == 1 and w["cpu_seconds"] == 1.0


def test_steady_state_cpu_per_gb_is_cpu_per_second_over_bytes_per_second():
    streams = [{"bytes": 3_000_000_000, "measured_bytes": 2_000_000_000, "gbps": 8.0,
                "from": 100.0, "to": 102.0, "seconds": 2.0}]
    run = sw.make_run("perproc", 1, 1500, 3.0, streams, {"total": 6.0},
                      {"cpu_window": {"seconds": 1.5, "cpu_seconds": 2.4, "processes": 2,
                                      "processes_left_out": 0}})
    # 1.6 CPU s per s over 1 GB/s; the whole-life figure divides by every verified byte
    assert run["cpu_s_per_gb_measured"] == 1.6
    assert run["cpu_s_per_gb"] == 2.0
    assert "cpu_s_per_gb_measured" not in sw.make_run("perproc", 1, 1500, 3.0, streams,
                                                      {"total": 6.0})


def test_no_steady_state_cpu_per_gb_from_a_window_that_left_processes_out():
    """A window whose second sample came after some processes had ended counts only the
    others' CPU: no steady-state figure from it (it read about 0 on a loaded machine)."""
    streams = [{"bytes": 3_000_000_000, "measured_bytes": 2_000_000_000, "gbps": 8.0,
                "from": 100.0, "to": 102.0, "seconds": 2.0}]
    run = sw.make_run("perproc", 2, 1500, 3.0, streams * 2, {"total": 6.0},
                      {"cpu_window": {"seconds": 1.5, "cpu_seconds": 0.01, "processes": 2,
                                      "processes_left_out": 4}})
    assert "cpu_s_per_gb_measured" not in run
    assert run["cpu_window"]["processes_left_out"] == 4


def test_tree_cpu_counts_a_process_and_its_children_and_zero_when_gone():
    cm = _common()
    child = subprocess.Popen([sys.executable, "-c", "import time\nt = time.process_time()\n"
                              "while time.process_time() - t < 0.2: pass\ntime.sleep(5)"])
    try:
        deadline = time.monotonic() + 10
        while cm.tree_cpu_ns(child.pid) < 150_000_000 and time.monotonic() < deadline:
            time.sleep(0.05)
        own = cm.tree_cpu_ns(os.getpid())
        assert cm.tree_cpu_ns(child.pid) >= 150_000_000
        assert own >= cm.tree_cpu_ns(child.pid)         # the child is in our tree
    finally:
        child.kill()
        child.wait()
    assert cm.tree_cpu_ns(child.pid) == 0


def test_process_cpu_counts_threads_that_have_ended_and_is_none_when_gone():
    """ulsd's CPU in a point (and an application server's) is the process's CPU clock:
    nanoseconds, and the time of threads that already ended still counts."""
    cm = _common()
    child = subprocess.Popen([sys.executable, "-c",
                              "import threading, time\n"
                              "def burn():\n"
                              "    t = time.thread_time()\n"
                              "    while time.thread_time() - t < 0.2: pass\n"
                              "th = threading.Thread(target=burn); th.start(); th.join()\n"
                              "print('done', flush=True)\ntime.sleep(5)"],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "done"
        deadline = time.monotonic() + 5     # join() can return before the thread is gone
        while len(os.listdir("/proc/%d/task" % child.pid)) > 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        whole, live = cm.process_cpu_ns(child.pid), cm.tree_cpu_ns(child.pid)
        assert whole >= 200_000_000
        assert cm.tree_cpu(child.pid) >= 0.2
        # the ended thread's 0.2 s is in no live thread's schedstat (the sleeping main
        # thread's startup is in both)
        assert whole - live >= 190_000_000, (whole, live)
    finally:
        child.kill()
        child.wait()
    assert cm.process_cpu_ns(child.pid) is None


# --- Procs: reaping ---------------------------------------------------------------------
def test_procs_poll_makes_no_wait4_while_every_process_runs(tmp_path, monkeypatch):
    """A driver polls its processes every POLL; with 130 alive (64 streams) a wait4 for
    each was most of its CPU. poll() looks once (waitid WNOWAIT) and reaps only when one
    exited; the exited one is then reaped, with its exit code."""
    cm = _common()
    procs = cm.Procs(str(tmp_path))
    calls = []
    real = os.wait4
    monkeypatch.setattr(cm.os, "wait4", lambda *a: calls.append(a) or real(*a))
    a = procs.spawn("a", ["sleep", "30"])
    b = procs.spawn("b", ["sleep", "30"])
    try:
        for _ in range(5):
            procs.poll()
        assert calls == []
        os.kill(b.pid, 15)
        deadline = time.monotonic() + 5
        while b.rc is None and time.monotonic() < deadline:
            procs.poll()
            time.sleep(0.01)
        assert b.rc == -15 and a.rc is None
        assert calls, "the exited process was not reaped through wait4"
    finally:
        procs.stop([a, b], grace=1)
    assert a.rc is not None


def test_usual_priority_while_reaping_a_fifo_driver(monkeypatch):
    """A SCHED_FIFO driver reaps at SCHED_OTHER: wait4 frees the child's /proc entries,
    and the kernel retries that walk while another task holds them, which a FIFO driver
    keeps off its CPU (it spun for minutes, stop 37). Outside reaping it is FIFO again."""
    cm = _common()
    policies = []
    monkeypatch.setattr(cm.os, "sched_setscheduler",
                        lambda pid, policy, param: policies.append(policy & ~getattr(
                            os, "SCHED_RESET_ON_FORK", 0)))
    assert cm.driver_first(True)
    with cm.usual_priority():
        assert policies[-1] == os.SCHED_OTHER
    assert policies == [os.SCHED_FIFO, os.SCHED_OTHER, os.SCHED_FIFO]
    assert cm.driver_first(False)
    with cm.usual_priority():
        pass
    assert policies[-1] == os.SCHED_OTHER and len(policies) == 4
