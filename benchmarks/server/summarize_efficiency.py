#!/usr/bin/python3
"""The table of server_efficiency.sh: per protocol, the medians over rounds of the server's best
throughput, its ratio to the in-process throughput, the server's p50 latency at the lowest
concurrency (1 by default) and its overhead over the in-process latency p50.

Usage: summarize_efficiency.py OUT_DIR PROTOCOL...   (OUT_DIR/roundN/ as the script writes it)
Writes OUT_DIR/summary.json too. A missing or failed case leaves its figure out of the medians.
"""
import csv
import glob
import json
import os
import statistics
import sys


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def perf_rows(path):
    try:
        with open(path, newline="") as f:
            return [row for row in csv.DictReader(f)]
    except OSError:
        return []


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(value, digits=0):
    return "-" if value is None else f"{value:.{digits}f}"


def main():
    out_dir, protocols = sys.argv[1], sys.argv[2:]
    rounds = sorted(glob.glob(os.path.join(out_dir, "round*")))
    bench_fps, bench_p50_us = [], []
    server = {p: {"best_fps": [], "p50_low_us": [], "ratio": [], "overhead_us": []}
              for p in protocols}
    for d in rounds:
        tp = load_json(os.path.join(d, "bench_throughput.json"))
        lat = load_json(os.path.join(d, "bench_latency.json"))
        fps = tp["results"]["throughput_fps"] if tp else None
        p50 = lat["results"]["latency_ms"]["median"] * 1e3 if lat else None
        bench_fps.append(fps)
        bench_p50_us.append(p50)
        for p in protocols:
            rows = [r for r in perf_rows(os.path.join(d, f"perf_{p}.csv"))
                    if int(r["errors"] or 0) == 0]
            best = max((float(r["inferences_per_s"]) for r in rows), default=None)
            low = min(rows, key=lambda r: int(r["concurrency"]), default=None)
            low_p50 = float(low["p50_us"]) if low else None
            s = server[p]
            s["best_fps"].append(best)
            s["p50_low_us"].append(low_p50)
            s["ratio"].append(best / fps if best and fps else None)
            s["overhead_us"].append(low_p50 - p50 if low_p50 is not None and p50 else None)

    summary = {"rounds": len(rounds), "in_process": {"throughput_fps": median(bench_fps),
                                                     "latency_p50_us": median(bench_p50_us)},
               "server": {p: {k: median(v) for k, v in s.items()} for p, s in server.items()}}
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)

    ip = summary["in_process"]
    print(f"\nmedians over {len(rounds)} round(s); in-process: {fmt(ip['throughput_fps'], 1)} "
          f"infer/s (-hint throughput), p50 {fmt(ip['latency_p50_us'])} us (-hint latency)")
    print(f"{'protocol':<12} {'server infer/s':>14} {'ratio':>6} {'p50 c=low us':>13} "
          f"{'overhead us':>12}")
    for p in protocols:
        s = summary["server"][p]
        print(f"{p:<12} {fmt(s['best_fps'], 1):>14} {fmt(s['ratio'], 2):>6} "
              f"{fmt(s['p50_low_us']):>13} {fmt(s['overhead_us']):>12}")
    print(f"(ratio: server's best throughput over the levels / in-process; overhead: server p50 at "
          f"the lowest concurrency - in-process p50; everything in {out_dir})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
