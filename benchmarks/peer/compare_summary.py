"""Summarizes a compare_models.sh run: medians over rounds, troupe/ORT ratios, a table on stdout
and everything as JSON.

Usage: compare_summary.py RUN_DIR OUT.json
RUN_DIR holds meta.json and, per model, r<round>_<case>.{json,txt} and r<round>_load_*.txt as
written by compare_models.sh (troupe cases: the `troupe bench -report json` file; ORT cases: the
last JSON line of ort_bench.js's output in the .txt).
"""
import json
import os
import re
import statistics
import subprocess
import sys

TROUPE_CASES = ("troupe_latency", "troupe_throughput", "troupe_bf16", "troupe_batched")


def last_json_line(path):
    if not os.path.exists(path):
        return None
    for line in reversed(open(path, encoding="utf-8", errors="replace").read().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                return None
    return None


def read_case(model_dir, rnd, case):
    """{fps, p50_ms, ...} of one run, or None when it failed."""
    base = os.path.join(model_dir, f"r{rnd}_{case}")
    if case.startswith("troupe"):
        if not os.path.exists(base + ".json"):
            return None
        report = json.load(open(base + ".json"))
        cfg, res = report["config"], report["results"]
        if res.get("count", 0) == 0:
            return None
        # troupe bench counts every element of a batch as benchmark_app does (a [64, 128] input
        # is 64 frames); ONNX Runtime's runner counts inferences. The ratios compare inferences.
        return {"fps": res["throughput_fps"] / max(1, cfg.get("batch", 1)),
                "p50_ms": res["latency_ms"]["median"],
                "count": res["count"], "precision": cfg["inference_precision"],
                "hint": cfg["performance_hint"], "streams": cfg["num_streams"],
                "threads": cfg["inference_num_threads"], "nireq": cfg["nireq"],
                "auto_batch": cfg.get("auto_batch_max_size", 1),
                "mean_batch": report["pipeline"].get("execute_mean_batch", 1)}
    line = last_json_line(base + ".txt")
    if not line or "results" not in line or line["results"]["count"] == 0:
        return None
    res = line["results"]
    return {"fps": res["throughput_fps"], "p50_ms": res["latency_ms"]["median"],
            "count": res["count"], "config": line["config"], "version": line["version"]}


def median_of(runs, key):
    values = [r[key] for r in runs if r is not None]
    return statistics.median(values) if values else None


def ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def fmt(value, digits=2):
    return "-" if value is None else f"{value:.{digits}f}"


def fmt_range(center, values):
    """The ratio of the medians, then the per-round ratios' range."""
    values = [v for v in values if v is not None]
    if center is None or not values:
        return "-"
    return f"{center:.2f} [{min(values):.2f}-{max(values):.2f}]"


def cpu_summary():
    name, flags = "?", set()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name") and name == "?":
                name = line.split(":", 1)[1].strip()
            if line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    isa = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in flags]
    return {"model_name": name, "cores": os.cpu_count(), "isa": isa,
            "bf16_hardware": "avx512_bf16" in flags or "amx_bf16" in flags}


def main():
    run_dir, out_path = sys.argv[1], sys.argv[2]
    meta = json.load(open(os.path.join(run_dir, "meta.json")))
    rounds = int(meta["rounds"])
    ort_tp = meta["ort_throughput_configs"].split()
    try:
        troupe_version = subprocess.run([meta["troupe"], "--version"], capture_output=True,
                                        text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        troupe_version = "?"
    cpu = cpu_summary()
    summary = {"meta": meta, "cpu": cpu, "troupe_version": troupe_version, "models": {}}
    rows, loads, checks, ort_version = [], [], [], None

    for name in meta["models"].split():
        model_dir = os.path.join(run_dir, name)
        if not os.path.isdir(model_dir):
            continue
        cases = ["ort_intra2"] + [f"ort_{c}" for c in ort_tp] + list(TROUPE_CASES)
        runs = {c: [read_case(model_dir, r, c) for r in range(1, rounds + 1)] for c in cases}
        for r in range(1, rounds + 1):
            before = open(os.path.join(model_dir, f"r{r}_load_before.txt")).read().split()
            after_path = os.path.join(model_dir, f"r{r}_load_after.txt")
            after = open(after_path).read().split() if os.path.exists(after_path) else []
            loads.append((name, r, " ".join(before), " ".join(after)))
        for c in cases:
            for run in runs[c]:
                if run and "version" in run:
                    ort_version = run["version"]
        check = last_json_line(os.path.join(model_dir, "ort_check.txt"))
        check = check.get("check") if check else None
        if check:
            checks.append((name, check))

        # ORT's throughput figure: its configuration with the best median FPS (the single
        # session one-at-a-time run counts: it is what the latency case measured).
        ort_candidates = ["ort_intra2"] + [f"ort_{c}" for c in ort_tp]
        ort_best = max(ort_candidates, key=lambda c: median_of(runs[c], "fps") or -1.0)

        def row(mode, troupe_case, ort_case, note=""):
            t, o = runs[troupe_case], runs[ort_case]
            fps_ratios = [ratio(a and a["fps"], b and b["fps"]) for a, b in zip(t, o)]
            p50_ratios = [ratio(b and b["p50_ms"], a and a["p50_ms"]) for a, b in zip(t, o)]
            t_fps, o_fps = median_of(t, "fps"), median_of(o, "fps")
            t_p50, o_p50 = median_of(t, "p50_ms"), median_of(o, "p50_ms")
            first = next((x for x in t if x), None)
            troupe_cfg = (f"{first['hint'].lower()} {first['streams']} stream(s) "
                          f"{first['threads']} thr nireq {first['nireq']} {first['precision']}"
                          if first else "failed")
            result = {
                "model": name, "mode": mode, "troupe_case": troupe_case,
                "ort_config": ort_case[len("ort_"):], "troupe_config": troupe_cfg,
                "troupe_fps": t_fps, "ort_fps": o_fps, "fps_ratio_troupe_over_ort":
                ratio(t_fps, o_fps), "fps_ratio_per_round": fps_ratios,
                "troupe_p50_ms": t_p50, "ort_p50_ms": o_p50,
                "p50_ratio_ort_over_troupe": ratio(o_p50, t_p50),
                "p50_ratio_per_round": p50_ratios, "note": note,
                "troupe_runs": t, "ort_runs": o}
            rows.append(result)
            return result

        model_rows = [row("latency", "troupe_latency", "ort_intra2"),
                      row("throughput", "troupe_throughput", ort_best)]
        bf16_runs = [x for x in runs["troupe_bf16"] if x]
        ran = sorted({x["precision"] for x in bf16_runs})
        note = ("bf16 requested, ran " + "/".join(ran)) if ran else "bf16 requested, failed"
        if ran and "bf16" not in ran:
            note += (" (the CPU has no bf16 instructions: this row is f32 again)"
                     if not cpu["bf16_hardware"] else " (although the CPU has bf16)")
        bf16_ort = "ort_intra2" if meta["bf16_hint"] == "latency" else ort_best
        model_rows.append(row(f"bf16 {meta['bf16_hint']}", "troupe_bf16", bf16_ort, note))
        batched_runs = [x for x in runs["troupe_batched"] if x]
        if batched_runs:
            sizes = sorted({x["auto_batch"] for x in batched_runs})
            mean = statistics.median(x["mean_batch"] for x in batched_runs)
            note = (f"AUTO_BATCH_MAX_SIZE {'/'.join(map(str, sizes))}: {mean:.2f} requests per "
                    "execute run (median); ORT runs one request per run"
                    if sizes != [1] else "the model cannot batch: unbatched again")
            model_rows.append(row("batched throughput", "troupe_batched", ort_best, note))
        candidates = {c[len("ort_"):]: median_of(runs[c], "fps") for c in ort_candidates}
        model_rows[1]["note"] = "ORT median FPS by config: " + ", ".join(
            f"{c} {fmt(v)}" for c, v in candidates.items())
        summary["models"][name] = {"rows": model_rows, "ort_check": check,
                                   "ort_throughput_best": ort_best[len("ort_"):],
                                   "ort_throughput_candidates_fps": candidates}

    summary["ort_version"] = ort_version
    summary["load_average"] = [{"model": m, "round": r, "before": b, "after": a}
                               for m, r, b, a in loads]

    print(f"troupe vs ONNX Runtime ({'onnxruntime-node ' + ort_version if ort_version else 'ORT'})"
          f" on {cpu['model_name']} ({cpu['cores']} vCPU, {' '.join(cpu['isa'])}), 2 threads "
          f"each, {meta['seconds_per_case']} s per case, median of {rounds} round(s)")
    print(f"{troupe_version}; troupe OMP_WAIT_POLICY={meta['omp_wait_policy'] or '(default)'}"
          f", ORT allow_spinning={meta['ort_spinning'] or '(default)'}")
    print("FPS ratio = troupe/ORT, p50 ratio = ORT p50 / troupe p50: > 1 means troupe is better;"
          " ratio of the medians, [min-max] of the per-round ratios\n")
    header = (f"{'model':<13} {'mode':<18} {'troupe FPS':>10} {'ORT FPS':>9} "
              f"{'FPS troupe/ORT':>20} {'troupe p50':>10} {'ORT p50':>9} {'p50 ORT/troupe':>20}"
              f"  ORT config | troupe config")
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r['model']:<13} {r['mode']:<18} {fmt(r['troupe_fps']):>10} {fmt(r['ort_fps']):>9} "
              f"{fmt_range(r['fps_ratio_troupe_over_ort'], r['fps_ratio_per_round']):>20} {fmt(r['troupe_p50_ms'], 3):>10} "
              f"{fmt(r['ort_p50_ms'], 3):>9} {fmt_range(r['p50_ratio_ort_over_troupe'], r['p50_ratio_per_round']):>20}  "
              f"{r['ort_config']} | {r['troupe_config']}")
        if r["note"]:
            print(f"{'':<13} note: {r['note']}")
    print("(p50 in ms; ORT configs: intra2 = 1 session x 2 threads, one request at a time; "
          "sessions2x1 = 2 sessions x 1 thread in 2 worker threads, 2 requests in flight)")
    if checks:
        print("\nORT vs exported expected outputs (max abs diff / max abs expected):")
        for name, check in checks:
            parts = [f"{k} {v['max_abs_diff']:.3g} / {v['max_abs_expected']:.3g}"
                     + ("" if v["size_matches"] else " SIZE MISMATCH") for k, v in check.items()]
            print(f"  {name:<13} " + ", ".join(parts))
    print("\nload average (1/5/15 min) before -> after each round:")
    for m, r, b, a in loads:
        print(f"  {m:<13} round {r}: {b} -> {a}")
    with open(out_path, "w") as f:
        json.dump(summary, f, indent=1)
    print(f"\nJSON written to {out_path}; raw runs in {run_dir}")


if __name__ == "__main__":
    main()
