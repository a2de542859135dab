#!/usr/bin/python3
"""`troupe quantize` end to end on small ONNX models built here (onnx.helper, seeded weights):

- the written model is valid ONNX in QDQ form: s8 weights per output channel that dequantize to
  the fp32 weights within half a step, i32 biases on the x_scale * w_scale grid, u8 activations;
- the graph input's grid is exactly the min/max of the calibration files (the held-out ones
  excluded), and --method percentile narrows it;
- troupe runs the QDQ model on int8 kernels (with 7-bit weights on every CPU, full-range ones
  where VNNI makes them exact), its fused int8 result agrees with the model run as written
  (DISABLE_TRANSFORMATIONS: the graph's own float semantics), and stays near the fp32 model;
- the report (held-out error, top-1 agreement, sensitivity) is printed;
- --exclude keeps layers fp32; a two-input model calibrates from subfolders;
- bad input (no folder, a file of the wrong shape, not an ONNX model, nothing to quantize) fails
  with a message naming it.

Usage: check_quantize.py TROUPE_BINARY WORKDIR     (PYTHONPATH: the build tree's python/)
"""
import os
import pathlib
import re
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import troupe

FAILURES = []


def check(condition, what):
    print(("ok    " if condition else "FAIL  ") + what)
    if not condition:
        FAILURES.append(what)


def cnn_model(path, rng):
    """Conv+Relu -> MaxPool -> Conv+Relu -> Conv -> Add(skip) -> Relu -> Conv+Relu -> GAP ->
    Flatten -> Gemm."""
    def w(name, *shape, scale=0.3):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32),
                                       name)
    inits = [w("w1", 8, 3, 3, 3), w("b1", 8, scale=0.1), w("w2", 8, 8, 3, 3, scale=0.15),
             w("b2", 8, scale=0.1), w("w3", 8, 8, 1, 1), w("b3", 8, scale=0.1),
             w("w4", 8, 8, 1, 1), w("b4", 8, scale=0.1), w("fc_w", 10, 8),
             w("fc_b", 10, scale=0.1)]
    nodes = [
        helper.make_node("Conv", ["input", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("Conv", ["r2", "w3", "b3"], ["c3"], name="conv3"),
        helper.make_node("Add", ["c3", "p1"], ["s"], name="add"),
        helper.make_node("Relu", ["s"], ["r3"], name="relu3"),
        helper.make_node("Conv", ["r3", "w4", "b4"], ["c4"], name="conv4"),
        helper.make_node("Relu", ["c4"], ["r4"], name="relu4"),
        helper.make_node("GlobalAveragePool", ["r4"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["logits"], name="fc", transB=1),
    ]
    graph = helper.make_graph(
        nodes, "cnn", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return model


def two_input_model(path, rng):
    inits = [numpy_helper.from_array(rng.standard_normal((16, 12)).astype(np.float32), "w")]
    nodes = [helper.make_node("Add", ["x", "y"], ["s"], name="add"),
             helper.make_node("MatMul", ["s", "w"], ["z"], name="matmul"),
             helper.make_node("Relu", ["z"], ["out"], name="relu")]
    graph = helper.make_graph(
        nodes, "two", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16]),
                       helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 12])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, path)


def reshape_model(path, rng):
    """Conv+Relu, then a Reshape to (batch, -1) whose shape is computed (Shape -> Gather ->
    Unsqueeze -> Concat, int64, as torch exports flatten), then a MatMul and a Tanh."""
    inits = [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal((64, 5)).astype(np.float32), "m"),
             numpy_helper.from_array(np.array([0], np.int64), "zero"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus_one")]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Shape", ["r"], ["shape"], name="shape"),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], name="batch"),
        helper.make_node("Concat", ["batch", "minus_one"], ["target"], name="target", axis=0),
        helper.make_node("Reshape", ["r", "target"], ["flat"], name="flatten"),
        helper.make_node("MatMul", ["flat", "m"], ["z"], name="matmul"),
        helper.make_node("Tanh", ["z"], ["y"], name="tanh"),
    ]
    graph = helper.make_graph(
        nodes, "reshape", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def quantize(binary, *args):
    result = subprocess.run([binary, "quantize", *map(str, args)], capture_output=True, text=True,
                            timeout=300)
    return result.returncode, result.stdout + result.stderr


def initializers(model):
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def qdq_of(model, tensor):
    """(scale, zero point) of the QuantizeLinear reading `tensor`."""
    inits = initializers(model)
    for n in model.graph.node:
        if n.op_type == "QuantizeLinear" and n.input[0] == tensor:
            return float(inits[n.input[1]]), int(inits[n.input[2]])
    return None


def vnni():
    flags = pathlib.Path("/proc/cpuinfo").read_text()
    capped = os.environ.get("ONEDNN_MAX_CPU_ISA", "").lower()
    if capped and "avx512_core_vnni" not in capped and "amx" not in capped:
        return False  # capped below VNNI (troupe follows the cap)
    return "avx512_vnni" in flags


def runtime_ops(path, properties=None):
    compiled = troupe.Core().compile_model(str(path), "CPU", properties or {})
    return [n.op_type for n in compiled.runtime_model.get_ops()], compiled


def main():
    binary, workdir = sys.argv[1], pathlib.Path(sys.argv[2])
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    rng = np.random.default_rng(5)
    fp32_path = workdir / "cnn.onnx"
    fp32 = cnn_model(fp32_path, rng)
    calib = workdir / "calib"
    calib.mkdir()
    samples = [rng.standard_normal((1, 3, 16, 16)).astype(np.float32) for _ in range(30)]
    samples[-1] *= 10.0  # a held-out outlier: it must not widen the input's grid
    for i, x in enumerate(samples):
        np.save(calib / f"s{i:02d}.npy", x)

    # 1. min/max, 7-bit weights: the int8 kernels are exact, hence used, on every CPU.
    out7 = workdir / "cnn_w7.onnx"
    rc, text = quantize(binary, "-m", fp32_path, "-c", calib, "-o", out7, "--holdout", 6,
                        "--reduce-range", "--sensitivity")
    print(text)
    check(rc == 0, "quantize --reduce-range exits 0")
    q = onnx.load(out7)
    onnx.checker.check_model(q)
    ops = [n.op_type for n in q.graph.node]
    check("QuantizeLinear" in ops and "DequantizeLinear" in ops, "the model is in QDQ form")
    inits = initializers(q)
    fp32_inits = initializers(fp32)
    for name, channels in [("w1", 8), ("w2", 8), ("w3", 8), ("w4", 8), ("fc_w", 10)]:
        check(name not in inits, f"{name}: the float weight is gone")
        wq, ws = inits.get(name + "_quantized"), inits.get(name + "_scale")
        ok = wq is not None and wq.dtype == np.int8 and ws is not None and ws.shape == (channels,)
        check(ok, f"{name}: s8 with one scale per output channel")
        if ok:
            check(np.abs(wq).max() <= 63, f"{name}: 7-bit weights")
            w = fp32_inits[name]
            axis_scale = ws.reshape((-1,) + (1,) * (w.ndim - 1))
            check(np.all(np.abs(wq * axis_scale - w) <= axis_scale / 2 + 1e-7),
                  f"{name}: dequantizes to the fp32 weight within half a step")
    lo = min(0.0, min(float(x.min()) for x in samples[:24]))
    hi = max(0.0, max(float(x.max()) for x in samples[:24]))
    scale, zero = qdq_of(q, "input")
    check(abs(scale - (hi - lo) / 255) < 1e-6 * scale and zero == round(-lo / ((hi - lo) / 255)),
          f"the input's grid is the calibration files' min/max without the held-out ones "
          f"(scale {scale:.6f} vs {(hi - lo) / 255:.6f}, zero point {zero})")
    b1q = inits.get("b1_quantized")
    check(b1q is not None and b1q.dtype == np.int32 and
          np.allclose(inits["b1_scale"], scale * inits["w1_scale"], rtol=1e-6),
          "the bias is i32 on the x_scale * w_scale grid")
    p_in, p_out = qdq_of(q, "r1"), qdq_of(q, "p1")
    check(p_in is not None and p_in == p_out, "MaxPool's output shares its input's grid")
    check(re.search(r"held-out\s+6 samples", text) is not None, "the report names 6 held-out samples")
    check("top-1 agreement" in text and re.search(r"\d+/6 \(", text) is not None,
          "the report gives the top-1 agreement")
    check(re.search(r"sensitivity.*\n\s+(conv1|conv2|conv3|fc)\s", text) is not None,
          "--sensitivity lists layers")

    fused_ops, fused = runtime_ops(out7)
    check(fused_ops.count("QLinearConv") == 4, f"troupe runs the 4 convolutions in int8 ({fused_ops})")
    check("QLinearAdd" in fused_ops, "and the residual Add")
    _, as_written = runtime_ops(out7, {"DISABLE_TRANSFORMATIONS": True})
    _, reference = runtime_ops(fp32_path)
    # The logits come out of the Gemm on its quantized input: one step of that input moves a
    # logit by at most step * max_row |w|_1. A rounding tie resolved the other way in an int8
    # kernel moves the Gemm's input by a step or two; a wrong kernel by far more.
    f_scale, _ = qdq_of(q, "f")
    gemm_step = f_scale * float(np.abs(fp32_inits["fc_w"]).sum(axis=1).max())
    diff_steps = []
    worst_rel, agree = 0.0, 0
    for x in samples[24:29]:  # the held-out samples but the outlier, which the grid clips
        a = fused({"input": x})["logits"]
        b = as_written({"input": x})["logits"]
        f = reference({"input": x})["logits"]
        diff_steps.append(float(np.abs(a - b).max()) / gemm_step)
        worst_rel = max(worst_rel, float(np.linalg.norm(a - f) / np.linalg.norm(f)))
        agree += int(a.argmax() == f.argmax())
    check(max(diff_steps) <= 2.0, f"int8 kernels agree with the QDQ model as written within 2 "
          f"input steps of the Gemm ({max(diff_steps):.2f})")
    check(worst_rel < 0.15, f"int8 vs fp32: relative error {worst_rel:.3f} < 0.15")
    check(agree >= 4, f"int8 vs fp32: top-1 agrees on {agree}/5")

    # 2. Full-range weights: int8 kernels where VNNI makes them exact; the result stays close.
    out8 = workdir / "cnn_w8.onnx"
    rc, text = quantize(binary, "-m", fp32_path, "-c", calib, "-o", out8, "--holdout", 6)
    check(rc == 0, "quantize with full-range weights exits 0")
    w8 = initializers(onnx.load(out8))
    check(np.abs(w8["w2_quantized"]).max() == 127, "full-range weights reach 127")
    ops8, _ = runtime_ops(out8)
    if vnni():
        check(ops8.count("QLinearConv") == 4, f"with VNNI the convolutions run int8 ({ops8})")
    else:
        print(f"skip  full-range int8 kernels: no VNNI here, the fusion keeps float ({ops8})")

    # 3. Percentile ranges are no wider than min/max.
    outp = workdir / "cnn_p.onnx"
    rc, text = quantize(binary, "-m", fp32_path, "-c", calib, "-o", outp, "--holdout", 6,
                        "--method", "percentile", "--percentile", "99.9")
    check(rc == 0, "--method percentile exits 0")
    pscale, _ = qdq_of(onnx.load(outp), "input")
    check(pscale < scale, f"percentile 99.9 narrows the input's grid ({pscale:.5f} < {scale:.5f})")

    # 4. --exclude keeps layers fp32.
    oute = workdir / "cnn_e.onnx"
    rc, text = quantize(binary, "-m", fp32_path, "-c", calib, "-o", oute, "--exclude", "conv2",
                        "Gemm", "--reduce-range")
    e = initializers(onnx.load(oute))
    check(rc == 0 and "w2" in e and "fc_w" in e and "w1_quantized" in e,
          "--exclude conv2 Gemm keeps those weights fp32 and quantizes conv1")

    # 5. Two inputs: a subfolder per sample.
    two = workdir / "two.onnx"
    two_input_model(two, rng)
    calib2 = workdir / "calib2"
    for i in range(8):
        (calib2 / f"{i}").mkdir(parents=True)
        for name in ("x", "y"):
            np.save(calib2 / f"{i}" / f"{name}.npy", rng.standard_normal((2, 16)).astype(np.float32))
    rc, text = quantize(binary, "-m", two, "-c", calib2, "-o", workdir / "two_q.onnx")
    check(rc == 0 and "held-out        1 samples" in text, "a two-input model calibrates from subfolders")

    # 6. A shape computed in int64 (Concat of dimensions) stays int64; the Reshape it shapes
    # moves the quantized activation on its grid.
    rs = workdir / "reshape.onnx"
    reshape_model(rs, rng)
    calib3 = workdir / "calib3"
    calib3.mkdir()
    for i in range(6):
        np.save(calib3 / f"{i}.npy", rng.standard_normal((1, 3, 4, 4)).astype(np.float32))
    rc, text = quantize(binary, "-m", rs, "-c", calib3, "-o", workdir / "reshape_q.onnx",
                        "--reduce-range")
    check(rc == 0, "a model with an int64 shape computation quantizes")
    if rc == 0:
        rq = onnx.load(workdir / "reshape_q.onnx")
        quantized = {n.input[0] for n in rq.graph.node if n.op_type == "QuantizeLinear"}
        check("target" not in quantized and "batch" not in quantized and
              {"x", "r", "flat"} <= quantized,
              f"only float activations are quantized ({sorted(quantized)})")
        check(qdq_of(rq, "flat") == qdq_of(rq, "r"), "the Reshape's output shares its input's grid")
        ops, compiled = runtime_ops(workdir / "reshape_q.onnx")
        x = rng.standard_normal((1, 3, 4, 4)).astype(np.float32)
        check(compiled({"x": x})["y"].shape == (1, 5) and "QLinearMatMul" in ops,
              f"troupe runs it, the MatMul in int8 ({ops})")

    # 7. Bad input is named.
    rc, text = quantize(binary, "-m", fp32_path, "-c", workdir / "nowhere")
    check(rc == 1 and "nowhere" in text, "a missing calibration folder is named")
    bad = workdir / "bad"
    bad.mkdir()
    np.save(bad / "a.npy", np.zeros((1, 3, 8, 8), np.float32))
    rc, text = quantize(binary, "-m", fp32_path, "-c", bad)
    check(rc == 1 and "a.npy" in text and "shape" in text, "a file of the wrong shape is named")
    (workdir / "junk.onnx").write_bytes(b"\x01\x02not a model")
    rc, text = quantize(binary, "-m", workdir / "junk.onnx", "-c", calib)
    check(rc == 1 and "junk.onnx" in text, "a file that is not ONNX is named")
    rc, text = quantize(binary, "-m", fp32_path, "-c", calib, "--exclude", "Conv", "Gemm")
    check(rc == 1 and "no Conv, Gemm or MatMul" in text, "nothing left to quantize is an error")

    print(f"\n{len(FAILURES)} failed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
