#!/usr/bin/python3
"""Fails when a model's convolution, matrix product, pooling or another op that dominated some real
model (CHECKED) runs a reference kernel.

Reference kernels are troupe's specification (implementation "ref") and oneDNN's fallback where
its JIT kernels decline a shape or layout ("dnnl:ref...", "dnnl:ref_int8:any"): both are orders of
magnitude slower, and oneDNN picks its own silently and per ISA (RegNetY's grouped convolutions
once ran as dnnl:ref:any on AVX-512 while AVX2 ran them jitted). This compiles every model of the
given directories with troupe's Python module, the way a user would, and reads each node's
implementation from the runtime model after one inference (a model with a dynamic batch picks
its kernels at its first shapes). Run it under ONEDNN_MAX_CPU_ISA to check a lower ISA.

Usage: check_no_reference_kernels.py MODELS_DIR [MODELS_DIR ...] [--only NAME ...]
Prints one line per model (nodes checked, implementations used), then "N passed, N failed";
exits 1 when any checked node runs a reference kernel or a model fails to compile.
"""
import argparse
import collections
import glob
import os
import sys

# Ops whose reference kernel on a hot path is a defect, not a missing optimization.
CHECKED = {"Conv", "ConvTranspose", "MatMul", "Gemm", "MaxPool", "AveragePool",
           "GlobalAveragePool", "GlobalMaxPool", "QLinearConv", "QLinearMatMul",
           # ops that cost most of some real model's time on their reference kernel (a U-Net's
           # ConvTranspose, a CycleGAN's reflection Pad and InstanceNorm, a face model's PRelu,
           # an einsum attention, a super-resolution head's DepthToSpace, a decoder's Resize)
           "Einsum", "PRelu", "Pad", "InstanceNormalization", "LRN", "DepthToSpace",
           "SpaceToDepth", "Resize", "Expand", "Tile", "ArgMax", "ArgMin",
           # a YOLOv8 head's distribution over 16 bins along axis 1 (oneDNN: reference only)
           "Softmax", "LogSoftmax"}


def is_reference(implementation):
    # troupe's own ("ref"), oneDNN's ("dnnl:ref:any", "dnnl:ref_int8:any", "dnnl:bnorm_ref:any")
    return (implementation == "ref" or implementation.startswith("dnnl:ref")
            or "_ref:" in implementation)


def model_inputs(compiled, inputs_dir):
    import numpy as np
    inputs = {}
    for port in compiled.inputs:
        name = port.get_any_name()
        file = os.path.join(inputs_dir, name + ".npy")
        if os.path.exists(file):
            inputs[name] = np.load(file)
        else:
            shape = [d if d > 0 else 1 for d in port.get_shape()]
            inputs[name] = np.zeros(shape, dtype=port.get_element_type().to_dtype())
    return inputs


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="+")
    parser.add_argument("--only", nargs="+", metavar="NAME")
    args = parser.parse_args()
    import troupe  # from PYTHONPATH (the build tree's python/)

    core = troupe.Core()
    passed = failed = 0
    for directory in args.dirs:
        for path in sorted(glob.glob(os.path.join(directory, "*.onnx"))):
            name = os.path.splitext(os.path.basename(path))[0]
            if args.only and name not in args.only:
                continue
            try:
                compiled = core.compile_model(path, "CPU")
                # A model with a dynamic batch chooses its kernels at its first shapes: run it
                # once on its exported input (or zeros, batch 1) before asking.
                compiled(model_inputs(compiled, os.path.join(directory, name, "inputs")))
                runtime = compiled.runtime_model
            except Exception as e:  # a model that does not compile fails the check
                print(f"FAIL {name}: does not compile: {e}")
                failed += 1
                continue
            used = collections.Counter()
            offenders = []
            for node in runtime.get_ops():
                if node.op_type not in CHECKED:
                    continue
                attributes = node.attributes
                implementation = attributes.get("implementation", "?")
                used[f"{node.op_type}:{implementation}"] += 1
                if is_reference(implementation):
                    offenders.append(f"{node.name} ({node.op_type}, "
                                     f"{attributes.get('runtime_precision', '?')}, "
                                     f"{implementation})")
            summary = ", ".join(f"{k} x{v}" for k, v in sorted(used.items()))
            if offenders:
                print(f"FAIL {name}: reference kernels in {len(offenders)} node(s): "
                      + "; ".join(offenders[:8]) + (" ..." if len(offenders) > 8 else ""))
                failed += 1
            else:
                print(f"ok   {name}: {sum(used.values())} nodes checked ({summary})")
                passed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
