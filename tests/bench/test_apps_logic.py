"""`ulsbench apps`' own logic (apps/ulsbench_apps.py): no root, no network.

What the driver parses from the programs' reports, what it counts as a verified run, how it
orders the runs, the medians and ratios it reports, and the schema of its JSON records.
"""

import pytest

import appmod



def _load():
    return appmod.load("ulsbench_apps")


ap = _load()

WRK = """\
Running 1s test @ http://198.18.0.100:8100/small.bin
  1 threads and 1 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency    64.07us   98.53us   7.37ms   99.43%
    Req/Sec    15.58k     1.10k   16.73k    72.73%
  Latency Distribution
     50%   49.00us
     75%   55.00us
     90%   67.00us
     99%    7.37ms
  15658 requests in 1.01s, 65.53MB read
Requests/sec:  15501.43
Transfer/sec:     64.87MB
"""

REDIS_CSV = ('"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",'
             '"p95_latency_ms","p99_latency_ms","max_latency_ms"\n'
             '"SET","48017.48","0.020","0.008","0.015","0.031","0.063","1.511"\n')


def record(**kw):
    rec = {"program": "redis", "config": "SET, 50 clients", "stack": "kernel",
           "throughput": 1000.0, "unit": "req/s", "p50_us": 10.0, "p99_us": 20.0,
           "cpu_seconds": 1.0, "seconds": 1.0, "verified": True}
    rec.update(kw)
    return rec


def test_apps_list_keeps_the_fixed_order_and_refuses_unknown_names():
    assert ap.parse_apps("all") == list(ap.APPS)
    assert ap.parse_apps("pingpong,redis,redis") == ["redis", "pingpong"]
    for bad in ("", "redis,memcached", "all,redis"):
        with pytest.raises(ap.UsageError):
            ap.parse_apps(bad)


def test_seconds_and_repeat_are_bounded():
    assert ap.parse_args([])["seconds"] == ap.DEFAULT_SECONDS
    for argv in (["--seconds", "0.1"], ["--seconds", "x"], ["--repeat", "0"],
                 ["--repeat", "21"], ["--bogus"]):
        with pytest.raises(ap.UsageError):
            ap.parse_args(argv)


def test_plot_goes_next_to_the_json_unless_told(tmp_path):
    o = ap.parse_args(["--json", str(tmp_path / "a.json")])
    assert o["plot"] == str(tmp_path)
    assert ap.parse_args(["--json", str(tmp_path / "a.json"), "--plot", "/x"])["plot"] == "/x"
    with pytest.raises(ap.UsageError):
        ap.parse_args(["--json", str(tmp_path / "missing" / "a.json")])


def test_every_configuration_runs_on_both_stacks_alternating_which_goes_first():
    plan = ap.plan_runs(["redis", "iperf3"], 3)
    assert len(plan) == 3 * (4 + 2) * 2
    firsts = [p["stack"] for i, p in enumerate(plan) if i % 2 == 0]
    per_repeat = len(plan) // 3 // 2
    assert set(firsts[:per_repeat]) == {"kernel"}
    assert set(firsts[per_repeat:2 * per_repeat]) == {"ulstack"}
    pairs = {(p["program"], p["config"], p["stack"], p["repeat"]) for p in plan}
    assert len(pairs) == len(plan)


def test_the_required_configurations_are_there():
    configs = {a: [c["config"] for c in ap.CONFIGS[a]] for a in ap.APPS}
    assert configs["redis"] == ["SET, 1 client", "SET, 50 clients", "GET, 1 client",
                                "GET, 50 clients"]
    assert [c["connections"] for c in ap.CONFIGS["nginx"]] == [1, 32]
    assert [c["streams"] for c in ap.CONFIGS["iperf3"]] == [1, 4]
    assert ap.CONFIGS["pingpong"][0]["size"] == 1


def test_redis_requests_follow_the_probe_rate_within_bounds():
    assert ap.redis_requests(40000.0, 5) == 200000
    assert ap.redis_requests(1.0, 5) == ap.REDIS_MIN_REQUESTS
    assert ap.redis_requests(1e12, 5) == ap.REDIS_MAX_REQUESTS


def test_redis_csv_gives_rate_and_latencies_in_microseconds():
    m = ap.redis_csv(REDIS_CSV, "set")
    assert m == {"throughput": 48017.48, "p50_us": 15.0, "p99_us": 63.0}
    with pytest.raises(ValueError):
        ap.redis_csv(REDIS_CSV, "get")


def test_redis_commandstats_are_read_and_a_missing_command_is_zero():
    info = ap.redis_info("# Commandstats\r\ncmdstat_set:calls=38462,usec=1,usec_per_call=0.1,"
                         "rejected_calls=0,failed_calls=2\r\n")
    assert ap.cmdstat(info, "set") == {"calls": 38462, "failed_calls": 2, "rejected_calls": 0}
    assert ap.cmdstat(info, "get") == {"calls": 0, "failed_calls": 0, "rejected_calls": 0}


def test_wrk_report_is_parsed_with_units():
    m = ap.parse_wrk(WRK)
    assert m["requests"] == 15658 and m["throughput"] == 15501.43
    assert m["p50_us"] == 49.0 and m["p99_us"] == 7370.0 and m["errors"] == []
    bad = WRK.replace("Requests/sec", "  Socket errors: connect 0, read 3, write 0, timeout 0\n"
                      "  Non-2xx or 3xx responses: 5\nRequests/sec")
    assert len(ap.parse_wrk(bad)["errors"]) == 2
    with pytest.raises(ValueError):
        ap.parse_wrk(WRK.replace("Latency Distribution", ""))
    assert ap.wrk_duration_us("1.5s") == 1.5e6


def test_access_log_must_show_every_request_as_a_full_200():
    ok = ['200 4096 "GET /small.bin HTTP/1.1"'] * 5
    assert ap.check_access_log(ok, 5, 4096) == []
    assert ap.check_access_log(ok, 4, 4096) == []          # answered after wrk stopped
    assert ap.check_access_log(ok, 6, 4096)                 # fewer lines than requests
    assert ap.check_access_log(ok[:4] + ['200 100 "GET /small.bin HTTP/1.1"'], 5, 4096)
    assert ap.check_access_log(ok[:4] + ['404 4096 "GET /x HTTP/1.1"'], 5, 4096)


def test_iperf3_ends_must_agree_on_bytes_received():
    def rep(nbytes):
        return {"start": {"test_start": {"num_streams": 4}},
                "end": {"sum_received": {"bytes": nbytes, "bits_per_second": 8e9,
                                         "seconds": 1.0}}}
    assert ap.iperf3_result(rep(10), rep(10)) == {"throughput": 8.0, "bytes": 10, "streams": 4}
    for c, s in ((rep(10), rep(11)), (rep(0), rep(0)), (rep(10), dict(rep(10), error="x"))):
        with pytest.raises(ValueError):
            ap.iperf3_result(c, s)


def test_records_are_medians_of_their_runs_in_the_fixed_order():
    runs = [record(stack="ulstack", throughput=t, cpu_seconds=c)
            for t, c in ((3.0, 1.0), (1.0, 3.0), (2.0, 2.0))]
    runs.append(record(program="iperf3", config="1 stream", unit="Gbit/s", p50_us=None,
                       p99_us=None))
    runs.append(record())
    recs = ap.summarize_runs(runs)
    assert [(r["program"], r["stack"]) for r in recs] == [
        ("redis", "kernel"), ("redis", "ulstack"), ("iperf3", "kernel")]
    u = recs[1]
    assert u["throughput"] == 2.0 and u["cpu_seconds"] == 2.0 and u["repeats"] == 3
    assert len(u["runs"]) == 3 and recs[2]["p50_us"] is None
    for r in recs:
        assert ap.check_record_schema(r) == [], r


def test_ratios_are_ulstack_over_kernel_with_cpu_per_unit_of_work():
    recs = [record(throughput=1000.0, cpu_seconds=1.0),
            record(stack="ulstack", throughput=500.0, p50_us=20.0, cpu_seconds=1.0)]
    (x,) = ap.ratios(recs)
    assert x["throughput"] == 0.5 and x["p50_us"] == 2.0 and x["cpu_seconds"] == 1.0
    assert x["cpu_per_work"] == 2.0          # the same CPU for half the requests
    assert x["throughput_paired"] is None    # no runs to pair
    text = ap.format_table(recs)
    assert "0.50x" in text and "2.00x" in text


def test_paired_ratio_is_the_median_of_each_repeats_own_ratio():
    def rec(stack, tps):
        return record(stack=stack, runs=[{"repeat": i, "throughput": t}
                                         for i, t in enumerate(tps)])
    # a machine that slowed down in repeat 1: both stacks' runs moved together
    k, u = rec("kernel", [100.0, 10.0, 100.0]), rec("ulstack", [50.0, 5.0, 60.0])
    assert ap.paired_ratio(k, u) == 0.5
    (x,) = ap.ratios([dict(k, throughput=100.0), dict(u, throughput=50.0)])
    assert x["throughput_paired"] == 0.5


def test_record_schema_catches_what_the_issue_promises():
    assert ap.check_record_schema(record()) == []
    assert ap.check_record_schema(record(stack="dpdk"))
    assert ap.check_record_schema(record(unit="Gbit/s"))
    assert ap.check_record_schema(record(throughput=0.0))
    assert ap.check_record_schema(record(p99_us=1.0))           # below p50
    assert ap.check_record_schema(record(verified="yes"))
    assert ap.check_record_schema(record(config="SET, 7 clients"))
    r = record()
    del r["cpu_seconds"]
    assert ap.check_record_schema(r) == ["missing cpu_seconds"]
