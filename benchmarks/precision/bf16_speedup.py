#!/usr/bin/env python3
"""bf16 against f32 on the same troupe build, and optionally against an older build's bf16.

Each model runs `troupe bench -hint throughput` in f32 and with `-infer_precision bf16` (and the
older binary's bf16 with --baseline), interleaved: every round runs each configuration once, in a
rotated order, so drift on a shared machine falls on all of them alike. Prints the median FPS per
configuration, the ratios, and their geometric means over the models.

  bf16_speedup.py --troupe build/bin/troupe [--baseline OLD_TROUPE] [--rounds 3] [--seconds 3]
                  MODEL.onnx ...
"""
import argparse
import math
import re
import statistics
import subprocess
import sys


def throughput(binary, model, seconds, extra):
    out = subprocess.run([binary, "bench", "-m", model, "-t", str(seconds), "-hint", "throughput"]
                         + extra, capture_output=True, text=True, timeout=600).stdout
    match = re.search(r"^throughput\s+([\d.]+)", out, re.M)
    return float(match.group(1)) if match else float("nan")


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--troupe", required=True)
    parser.add_argument("--baseline", help="an older troupe whose bf16 is compared too")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3)
    parser.add_argument("models", nargs="+")
    args = parser.parse_args()
    configs = [("f32", args.troupe, []), ("bf16", args.troupe, ["-infer_precision", "bf16"])]
    if args.baseline:
        configs.append(("bf16 baseline", args.baseline, ["-infer_precision", "bf16"]))
    header = "model                   f32 FPS  bf16 FPS  bf16/f32"
    if args.baseline:
        header += "  baseline bf16  baseline bf16/f32  bf16 new/baseline"
    print(header, flush=True)
    ratios = {"bf16/f32": [], "baseline/f32": [], "new/baseline": []}
    for model in args.models:
        runs = {name: [] for name, _, _ in configs}
        for r in range(args.rounds):
            shift = r % len(configs)
            for name, binary, extra in configs[shift:] + configs[:shift]:
                runs[name].append(throughput(binary, model, args.seconds, extra))
        f32 = statistics.median(runs["f32"])
        bf16 = statistics.median(runs["bf16"])
        ratios["bf16/f32"].append(bf16 / f32)
        name = model.rsplit("/", 1)[-1].removesuffix(".onnx")
        line = f"{name:22s} {f32:8.1f} {bf16:9.1f} {bf16 / f32:9.2f}"
        if args.baseline:
            old = statistics.median(runs["bf16 baseline"])
            ratios["baseline/f32"].append(old / f32)
            ratios["new/baseline"].append(bf16 / old)
            line += f" {old:14.1f} {old / f32:18.2f} {bf16 / old:18.2f}"
        print(line, flush=True)
    summary = f"geomean bf16/f32 {geomean(ratios['bf16/f32']):.3f} " \
              f"(lowest {min(ratios['bf16/f32']):.2f})"
    if args.baseline:
        summary += f"; baseline bf16/f32 {geomean(ratios['baseline/f32']):.3f}; " \
                   f"bf16 new/baseline {geomean(ratios['new/baseline']):.3f}"
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
