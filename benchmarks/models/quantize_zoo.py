#!/usr/bin/python3
"""Quantizes float zoo models (export_models.py's NAME.onnx + NAME/inputs/*.npy) with
`troupe quantize`, for the int8 benchmark against ONNX Runtime on models no quantizer was tuned
for: transformers and every other architecture the float zoo has, not only torchvision's
quantizable ones (export_int8_models.py).

For each NAME it writes, into OUT_DIR:
  NAME_calib/            40 calibration samples made from the model's own input: float inputs
                         drawn from a normal distribution with that input's mean and deviation,
                         integer inputs (token ids) as permutations of it (masks are kept);
  NAME_tq.onnx           `troupe quantize` of NAME.onnx on them (default settings: min/max,
                         8-bit per-channel weights), the report in NAME_tq.txt;
  NAME_tq/               a copy of NAME/ (inputs, expected fp32 outputs), so that
                         benchmarks/peer/compare_models.sh runs NAME_tq like any zoo model.

Usage: quantize_zoo.py MODELS_DIR OUT_DIR NAME ... [--troupe build/bin/troupe] [-- ARGS]
  (ARGS after -- go to `troupe quantize`, e.g. -- --reduce-range)
Then: MODELS_DIR=OUT_DIR TROUPE_BATCHED_MODELS= benchmarks/peer/compare_models.sh 4 2 NAME_tq ...
"""
import argparse
import glob
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]


def calibration_samples(model_dir, out_dir, count, rng):
    inputs = sorted(glob.glob(os.path.join(model_dir, "inputs", "*.npy")))
    if not inputs:
        raise SystemExit(f"{model_dir}/inputs holds no .npy input")
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    templates = {os.path.basename(p): np.load(p) for p in inputs}
    for k in range(count):
        sample = {}
        for name, a in templates.items():
            if a.dtype.kind == "f":
                sample[name] = (rng.standard_normal(a.shape) * (a.std() or 1.0)
                                + a.mean()).astype(a.dtype)
            elif a.dtype.kind in "iu" and a.size > 4 and a.max() > 1:  # token ids, not a mask
                sample[name] = rng.permutation(a.reshape(-1)).reshape(a.shape)
            else:
                sample[name] = a
        if len(templates) == 1:
            np.save(os.path.join(out_dir, f"s{k:03d}.npy"), next(iter(sample.values())))
        else:
            os.makedirs(os.path.join(out_dir, f"s{k:03d}"))
            for name, a in sample.items():
                np.save(os.path.join(out_dir, f"s{k:03d}", name), a)


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models_dir")
    parser.add_argument("out_dir")
    parser.add_argument("names", nargs="+")
    parser.add_argument("--troupe", default=str(ROOT / "build/bin/troupe"))
    parser.add_argument("--samples", type=int, default=40)
    args = parser.parse_args(argv)
    os.makedirs(args.out_dir, exist_ok=True)
    rng = np.random.default_rng(1)
    failed = 0
    for name in args.names:
        source = os.path.join(args.models_dir, name)
        calib = os.path.join(args.out_dir, f"{name}_calib")
        calibration_samples(source, calib, args.samples, rng)
        target = os.path.join(args.out_dir, f"{name}_tq")
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(source, target)
        result = subprocess.run([args.troupe, "quantize", "-m", source + ".onnx", "-c", calib,
                                 "-o", target + ".onnx", *extra], capture_output=True, text=True)
        report = result.stdout + result.stderr
        pathlib.Path(target + ".txt").write_text(report)
        print(f"== {name}\n{report}", flush=True)
        failed += result.returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
