#!/usr/bin/env python3
"""Plot the results of `ulsping --json FILE`: round-trip time (p50, with p99 as a dashed
line) and half-round-trip bandwidth (seed 000's Figure 1) against message size, one colour
per mode.

    python3 apps/ulsping_plot.py RESULTS.json OUT.png    (needs matplotlib)
    python3 apps/ulsping_plot.py RESULTS.json            (prints the table instead)
"""
import json
import sys


def load(path):
    with open(path) as f:
        runs = json.load(f)["runs"]
    by_mode = {}
    for r in runs:
        if r.get("ok", True) and "rtt_us" in r:
            by_mode.setdefault(r["mode"], []).append(r)
    for rs in by_mode.values():
        rs.sort(key=lambda r: r["size"])
    return by_mode


def table(by_mode):
    print("%-8s %9s %11s %11s %11s %12s" % ("mode", "size", "mean_us", "p50_us", "p99_us",
                                           "Mbit/s@p50"))
    for mode, rs in by_mode.items():
        for r in rs:
            t = r["rtt_us"]
            print("%-8s %9d %11.1f %11.1f %11.1f %12.1f" % (
                mode, r["size"], t["mean"], t["p50"], t["p99"],
                r["size"] * 8 / (t["p50"] / 2) if t["p50"] > 0 else 0))


def plot(by_mode, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for mode, rs in by_mode.items():
        sizes = [r["size"] for r in rs]
        line, = ax1.plot(sizes, [r["rtt_us"]["p50"] for r in rs], "o-", label=mode + " p50")
        ax1.plot(sizes, [r["rtt_us"]["p99"] for r in rs], "--", color=line.get_color(),
                 label=mode + " p99")
        ax2.plot(sizes, [s * 8 / (r["rtt_us"]["p50"] / 2) for s, r in zip(sizes, rs)], "o-",
                 color=line.get_color(), label=mode)
    ax1.set(xscale="log", yscale="log", xlabel="message size (bytes)",
            ylabel="round trip (us)", title="TCP round-trip time")
    ax2.set(xscale="log", yscale="log", xlabel="message size (bytes)",
            ylabel="Mbit/s (size / half the p50 round trip)", title="Ping-pong bandwidth")
    for ax in (ax1, ax2):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def main(argv):
    if len(argv) not in (2, 3):
        sys.stderr.write(__doc__)
        return 2
    try:
        by_mode = load(argv[1])
    except (OSError, ValueError, KeyError) as e:
        sys.stderr.write("ulsping_plot: %s: %s\n" % (argv[1], e))
        return 2
    if len(argv) == 2:
        table(by_mode)
        return 0
    try:
        plot(by_mode, argv[2])
    except ImportError:
        sys.stderr.write("ulsping_plot: matplotlib is not installed; without OUT.png the "
                         "table is printed\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
