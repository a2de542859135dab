#!/usr/bin/python3
"""Checks troupe's int8 path on the quantized models benchmarks/models/export_int8_models.py
writes (NAME.onnx in QDQ form, NAME/inputs, NAME/expected = torch's int8 output,
NAME/quant_step.json).

Each model is compiled twice with troupe's Python module: as a user gets it (the QDQ fusion
folds quantized layers into QLinearConv/QLinearMatMul on oneDNN's int8 kernels where they are
exact on this CPU) and with DISABLE_TRANSFORMATIONS (every op as written, the graph's own float
semantics). Both run on the model's input. Outputs are compared in quantization steps of the
output (quant_step.json):

  |fused - as written|  <=  max(3, 0.5 * |torch int8 - torch fp32|)   steps,

or, failing that, the fused form is at least as close to torch's own int8 output as the form as
written is (|fused - torch int8| <= max(bound, |as written - torch int8|)).

A quantized network turns a value that rounds the other way at a tie (the int8 kernels round an
int32 accumulator once; the float form rounds float sums) into a few steps at its output, so the
bound scales with how far quantization itself moves this model's output; a wrong kernel or fusion
moves it by far more. Where more layers run in int8 (full-range weights on a VNNI CPU) the
integer kernels can drift further from the float form than the bound while they stay closer to
torch's integer kernels than the float form does (MobileNetV3 on an AVX-512 VNNI CPU: 6 steps
from the float form, 3 from torch, the float form 5 from torch): torch's int8 model is the
reference both try to compute, so that case passes, and a wrong kernel is far from both. The
share of layers that ran in int8 is printed for information.

Usage: check_quantized_models.py MODELS_DIR [--only NAME ...]
Prints one line per model, then "N passed, N failed"; exits 1 when any model fails.
"""
import argparse
import glob
import json
import os
import sys

import numpy as np


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models_dir")
    parser.add_argument("--only", nargs="+", metavar="NAME")
    args = parser.parse_args()
    import troupe  # from PYTHONPATH (the build tree's python/)

    core = troupe.Core()
    passed = failed = 0
    for step_file in sorted(glob.glob(os.path.join(args.models_dir, "*", "quant_step.json"))):
        case = os.path.dirname(step_file)
        name = os.path.basename(case)
        if args.only and name not in args.only:
            continue
        with open(step_file) as f:
            meta = json.load(f)
        step = meta["scale"]["output"]
        quantization_steps = meta["int8_vs_fp32"]["output"]["max_abs_diff"] / step
        bound = max(3.0, 0.5 * quantization_steps)
        inputs = {os.path.splitext(os.path.basename(p))[0]: np.load(p)
                  for p in glob.glob(os.path.join(case, "inputs", "*.npy"))}
        expected = np.load(os.path.join(case, "expected", "output.npy"))
        path = os.path.join(args.models_dir, name + ".onnx")
        try:
            fused_model = core.compile_model(path, "CPU")
            plain_model = core.compile_model(path, "CPU", {"DISABLE_TRANSFORMATIONS": True})
            fused = list(fused_model(inputs).values())[0]
            plain = list(plain_model(inputs).values())[0]
        except Exception as e:
            print(f"FAIL {name}: {e}")
            failed += 1
            continue
        products = [n for n in fused_model.runtime_model.get_ops()
                    if n.op_type in ("Conv", "QLinearConv", "Gemm", "MatMul", "QLinearMatMul")]
        int8 = sum(1 for n in products if n.attributes.get("runtime_precision") in ("u8", "i8"))
        apart = float(np.max(np.abs(fused - plain))) / step
        vs_torch = float(np.max(np.abs(fused - expected))) / step
        plain_vs_torch = float(np.max(np.abs(plain - expected))) / step
        top1 = float(np.mean(fused.argmax(-1) == expected.argmax(-1)))
        close = apart <= bound or vs_torch <= max(bound, plain_vs_torch)
        ok = close and fused.shape == expected.shape
        print(f"{'ok  ' if ok else 'FAIL'} {name}: int8 layers {int8}/{len(products)}, "
              f"fused vs as written {apart:.1f} steps (bound {bound:.1f}), vs torch int8 "
              f"{vs_torch:.1f} steps (as written {plain_vs_torch:.1f}), "
              f"top-1 agreement with torch {top1:.2f} "
              f"(quantization moves the output {quantization_steps:.1f} steps)")
        passed += ok
        failed += not ok
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
