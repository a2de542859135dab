#!/usr/bin/python3
"""Runs the models benchmarks/models/export_models.py wrote through `troupe run` and compares
troupe's outputs with torch's.

For every model NAME in MODELS_DIR (NAME.onnx, NAME/inputs/*.npy, NAME/expected/*.npy) it runs

  troupe run -m MODELS_DIR/NAME.onnx --input <input>=NAME/inputs/<input>.npy ... -o OUT/NAME

and checks every expected output against troupe's, per output. A model with dynamic dimensions
(the batch) is also run as a copy with those dimensions fixed to the input files' (NAME[static]),
because troupe compiles a static model ahead (oneDNN kernels in blocked layouts) but specializes a
dynamic one when the first request's shapes are known: two paths worth checking.
Per output:

  max |troupe - torch|  <=  max(rtol * max |torch|, 4 * torch's float32 error)  +  atol
                                                           (rtol 1e-4, atol 1e-6 by default)

where torch's output is computed in float64 and torch's float32 error is how far torch's own
float32 run was from it (NAME/reference_error.json). The second term matters only for a model
that amplifies rounding (the reduced Inception-v3 drifts ~50x as far as the others, relative to
its scale). Why 4: an F(4x4, 3x3) Winograd convolution rounds more than a direct sum (its
transforms scale the terms up to 8x), and on that model troupe's AVX2 Winograd drifted 2.3-3.3x
as far as torch's direct kernels, depending on the CPU torch ran on (direct kernels: 1.4x).

The error is measured against the output's scale, not element by element: two correct float32
implementations sum in different orders (blocked GEMM, Winograd or direct convolution, folded
BatchNorm), so each element differs by a few ulps of the *terms* that were summed, which for an
element near zero (cancellation) is far more than a few ulps of the element itself. The scale of
those terms is what max |torch| stands for. atol only matters for an output that is all (nearly)
zero.

With --infer-precision, troupe must report that it ran in that precision (a bf16 run that fell
back to f32 fails instead of passing on f32 numbers). With --top1, an output of shape [N, C] (a
classifier's scores) must also pick the same class as torch in every row.

Usage: check_real_models.py TROUPE_BINARY MODELS_DIR [--only NAME ...] [--output-root DIR]
       [--rtol R] [--atol A] [--infer-precision f32|bf16] [--top1]
Prints one line per output with the max absolute and relative error, then "N passed, N failed";
exits 1 when any model fails to run or mismatches.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np


def output_file_name(name):
    """The file `troupe run` writes an output to (apps/run_command.cpp: output_file_name)."""
    name = name.replace("/", "_").replace("\0", "_")
    if name in ("", ".", ".."):
        name = "_" + name
    return name + ".npy"


def find_models(models_dir, only):
    names = sorted(f[:-5] for f in os.listdir(models_dir) if f.endswith(".onnx"))
    if only:
        missing = [n for n in only if n not in names]
        if missing:
            sys.exit(f"no {', '.join(m + '.onnx' for m in missing)} in {models_dir}")
        names = only
    if not names:
        sys.exit(f"no .onnx models in {models_dir}")
    return names


def static_copy(model_path, inputs_dir, out_path):
    """Writes model_path with every named (dynamic) dimension set from the input files; returns
    out_path, or None when the model has no dynamic dimension."""
    import onnx  # only needed here

    model = onnx.load(model_path)
    values = {}
    for value in model.graph.input:
        path = os.path.join(inputs_dir, value.name + ".npy")
        if not os.path.exists(path):
            continue
        shape = np.load(path, mmap_mode="r").shape
        for dim, size in zip(value.type.tensor_type.shape.dim, shape):
            if dim.HasField("dim_param"):
                values[dim.dim_param] = size
    if not values:
        return None
    for value in list(model.graph.input) + list(model.graph.output):
        for dim in value.type.tensor_type.shape.dim:
            if dim.HasField("dim_param") and dim.dim_param in values:
                dim.dim_value = values[dim.dim_param]  # replaces the dim_param (a oneof)
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    onnx.save(model, out_path)
    return out_path


def check_model(troupe, model_path, models_dir, name, out_dir, args):
    """Returns a list of (output name, ok, message)."""
    inputs_dir = os.path.join(models_dir, name, "inputs")
    expected_dir = os.path.join(models_dir, name, "expected")
    reference_errors = {}
    errors_path = os.path.join(models_dir, name, "reference_error.json")
    if os.path.exists(errors_path):
        with open(errors_path) as f:
            reference_errors = json.load(f)
    command = [troupe, "run", "-m", model_path, "-o", out_dir]
    for f in sorted(os.listdir(inputs_dir)):
        command += ["--input", f"{f[:-4]}={os.path.join(inputs_dir, f)}"]
    if args.infer_precision:
        command += ["--infer_precision", args.infer_precision]
    shutil.rmtree(out_dir, ignore_errors=True)
    start = time.monotonic()
    run = subprocess.run(command, capture_output=True, text=True)
    seconds = time.monotonic() - start
    if run.returncode != 0:
        return [(name, False, f"troupe run exited with {run.returncode}:\n{run.stdout}{run.stderr}")]
    if args.infer_precision:
        # `troupe run` ends with "inference T ms in PRECISION".
        ran = run.stdout.strip().splitlines()[-1].split()[-1] if run.stdout.strip() else "?"
        if ran != args.infer_precision:
            return [(name, False, f"asked for {args.infer_precision}, troupe ran {ran}")]

    results = []
    for f in sorted(os.listdir(expected_dir)):
        output = f[:-4]
        expected = np.load(os.path.join(expected_dir, f))
        path = os.path.join(out_dir, output_file_name(output))
        if not os.path.exists(path):
            results.append((output, False, f"troupe wrote no {path}"))
            continue
        actual = np.load(path)
        if actual.shape != expected.shape or actual.dtype != expected.dtype:
            results.append((output, False, f"troupe gave {actual.dtype}{list(actual.shape)}, torch "
                                           f"{expected.dtype}{list(expected.shape)}"))
            continue
        a, e = actual.astype(np.float64), expected.astype(np.float64)
        if not np.isfinite(a).all():
            results.append((output, False, f"{np.count_nonzero(~np.isfinite(a))} non-finite values"))
            continue
        max_abs = float(np.max(np.abs(a - e))) if e.size else 0.0
        scale = float(np.max(np.abs(e))) if e.size else 0.0
        # Float32 drifts from the exact (float64) answer in a deep network; troupe may drift up to
        # 4x as far as torch's own float32 did (reference_error.json, written by the export): its
        # Winograd convolutions round more than torch's direct ones (see the docstring).
        bound = max(args.rtol * scale, 4.0 * reference_errors.get(output, 0.0)) + args.atol
        ok = max_abs <= bound
        rel = max_abs / scale if scale > 0 else float("nan")
        top1 = ""
        if args.top1 and e.ndim == 2 and e.shape[1] > 1:
            agree = int(np.count_nonzero(a.argmax(axis=1) == e.argmax(axis=1)))
            ok = ok and agree == e.shape[0]
            top1 = f", top-1 agrees in {agree} of {e.shape[0]}"
        results.append((output, ok, f"{list(e.shape)} max abs err {max_abs:.3e}, max|torch| "
                                    f"{scale:.3e}, rel {rel:.3e} (bound {bound:.3e}){top1}; "
                                    f"troupe run {seconds:.1f} s"))
    return results


def cpu_can_run_bf16(troupe):
    """Whether troupe can run bf16 here: natively (its OPTIMIZATION_CAPABILITIES say BF16) or, with
    TROUPE_BF16_EMULATION=1, through oneDNN's emulation on AVX-512. troupe's answer follows the
    effective ISA (ONEDNN_MAX_CPU_ISA caps it), which /proc/cpuinfo does not."""
    info = subprocess.run([troupe, "info"], capture_output=True, text=True, check=True).stdout
    caps = next((line.split()[1:] for line in info.splitlines()
                 if line.startswith("OPTIMIZATION_CAPABILITIES")), [])
    return "BF16" in caps or (os.environ.get("TROUPE_BF16_EMULATION") == "1" and "AVX512" in caps)


SKIPPED = 77  # ctest's SKIP_RETURN_CODE for this script


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("troupe", help="the troupe binary")
    parser.add_argument("models_dir", help="export_models.py's OUT_DIR")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="check only these models")
    parser.add_argument("--output-root", help="where troupe writes its outputs (OUT/NAME); "
                                              "default: a temporary directory, removed after")
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--atol", type=float, default=1e-6)
    parser.add_argument("--infer-precision", choices=["f32", "bf16"])
    parser.add_argument("--top1", action="store_true",
                        help="classifier outputs ([N, C]) must pick torch's class in every row")
    args = parser.parse_args()

    if args.infer_precision == "bf16" and not cpu_can_run_bf16(args.troupe):
        print("skipped: the effective ISA runs bf16 neither natively nor in oneDNN's emulation "
              "(AVX-512)")
        return SKIPPED
    names = find_models(args.models_dir, args.only)
    root = args.output_root or tempfile.mkdtemp(prefix="troupe_real_models_")
    passed = failed = 0
    try:
        for name in names:
            runs = [(name, os.path.join(args.models_dir, name + ".onnx"))]
            static = static_copy(runs[0][1], os.path.join(args.models_dir, name, "inputs"),
                                 os.path.join(root, "static", name + ".onnx"))
            if static:
                runs.append((name + "[static]", static))
            for label, model_path in runs:
                for output, ok, message in check_model(args.troupe, model_path, args.models_dir,
                                                       name, os.path.join(root, label), args):
                    print(f"{'ok  ' if ok else 'FAIL'} {label}/{output}: {message}", flush=True)
                    passed, failed = passed + ok, failed + (not ok)
    finally:
        if not args.output_root:
            shutil.rmtree(root, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
