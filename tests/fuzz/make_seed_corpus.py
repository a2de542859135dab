#!/usr/bin/python3
"""Writes the seed corpora of the fuzz targets into tests/fuzz/corpus/<target>/.

Seeds are small valid inputs (a few hundred bytes each) that reach deep into each parser: models
with the common ops, dynamic dimensions, external data; .npy files of each dtype; KServe requests
with JSON and binary tensors. The .troupe and blob seeds are converted from the ONNX seeds with
the built library (--troupe-bin build/bin/troupe, PYTHONPATH=build/python for save_model).
Crash inputs found by fuzzing are added by hand as crash-<what> and are not touched here.

Usage: /usr/bin/python3 tests/fuzz/make_seed_corpus.py [--build build]
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")


def model(name, nodes, inputs, outputs, initializers=(), opset=13):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(initializers))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    m.producer_name = "troupe-fuzz-seeds"
    return m


def f32(name, dims):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)


def const(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def onnx_seeds():
    rng = np.random.default_rng(0)
    w = lambda *shape: rng.standard_normal(shape).astype(np.float32)
    seeds = {}
    seeds["add_relu"] = model(
        "add_relu",
        [helper.make_node("Add", ["x", "b"], ["s"]), helper.make_node("Relu", ["s"], ["y"])],
        [f32("x", [1, 4])], [f32("y", [1, 4])], [const("b", w(1, 4))])
    seeds["conv_pool"] = model(
        "conv_pool",
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], strides=[1, 1]),
         helper.make_node("MaxPool", ["c"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
         helper.make_node("GlobalAveragePool", ["p"], ["y"])],
        [f32("x", [1, 2, 4, 4])], [f32("y", [1, 3, 1, 1])],
        [const("w", w(3, 2, 3, 3)), const("b", w(3))])
    seeds["matmul_softmax_dynamic"] = model(
        "matmul_softmax_dynamic",
        [helper.make_node("MatMul", ["x", "w"], ["m"]),
         helper.make_node("Softmax", ["m"], ["y"], axis=-1)],
        [f32("x", ["batch", 3])], [f32("y", ["batch", 2])], [const("w", w(3, 2))])
    seeds["reshape_transpose_concat"] = model(
        "reshape_transpose_concat",
        [helper.make_node("Reshape", ["x", "shape"], ["r"]),
         helper.make_node("Transpose", ["r"], ["t"], perm=[1, 0]),
         helper.make_node("Concat", ["t", "t"], ["y"], axis=0)],
        [f32("x", [2, 3])], [f32("y", [6, 2])], [const("shape", np.array([3, 2], np.int64))])
    seeds["gather_reduce"] = model(
        "gather_reduce",
        [helper.make_node("Gather", ["table", "ids"], ["g"], axis=0),
         helper.make_node("ReduceMean", ["g"], ["y"], axes=[1], keepdims=0)],
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [2])], [f32("y", [2])],
        [const("table", w(5, 3))])
    seeds["shape_ops"] = model(
        "shape_ops",
        [helper.make_node("Shape", ["x"], ["s"]),
         helper.make_node("ConstantOfShape", ["s"], ["z"],
                          value=numpy_helper.from_array(np.array([1.0], np.float32))),
         helper.make_node("Expand", ["z", "e"], ["x2"]),
         helper.make_node("Tile", ["x2", "reps"], ["t"]),
         helper.make_node("Add", ["t", "t"], ["y"])],
        [f32("x", [1, 2])], [f32("y", [2, 4])],
        [const("e", np.array([2, 2], np.int64)), const("reps", np.array([1, 2], np.int64))])
    seeds["gemm_layernorm"] = model(
        "gemm_layernorm",
        [helper.make_node("Gemm", ["x", "w", "b"], ["g"], transB=1),
         helper.make_node("LayerNormalization", ["g", "gamma", "beta"], ["n"], axis=-1),
         helper.make_node("Sigmoid", ["n"], ["y"])],
        [f32("x", [2, 4])], [f32("y", [2, 3])],
        [const("w", w(3, 4)), const("b", w(3)), const("gamma", w(3)), const("beta", w(3))],
        opset=17)
    seeds["slice_where_cast"] = model(
        "slice_where_cast",
        [helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["s"]),
         helper.make_node("Greater", ["s", "zero"], ["c"]),
         helper.make_node("Where", ["c", "s", "zero"], ["wh"]),
         helper.make_node("Cast", ["wh"], ["y"], to=TensorProto.INT32)],
        [f32("x", [2, 6])], [helper.make_tensor_value_info("y", TensorProto.INT32, [2, 3])],
        [const("starts", np.array([1], np.int64)), const("ends", np.array([4], np.int64)),
         const("axes", np.array([1], np.int64)), const("zero", np.array(0, np.float32))])
    # External data: 4 floats at offset 16 of w.bin, the file the targets put beside the model.
    ext = const("b", np.zeros((1, 4), np.float32))
    ext.ClearField("raw_data")
    ext.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "w.bin"), ("offset", "16"), ("length", "16")):
        entry = ext.external_data.add()
        entry.key, entry.value = key, value
    seeds["external_data"] = model(
        "external_data", [helper.make_node("Add", ["x", "b"], ["y"])],
        [f32("x", [1, 4])], [f32("y", [1, 4])], [ext])
    return seeds


def write(target, name, data):
    os.makedirs(os.path.join(CORPUS, target), exist_ok=True)
    with open(os.path.join(CORPUS, target, name), "wb") as f:
        f.write(data)


def npy_bytes(array):
    import io
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def kserve_bodies():
    """(name, json header, binary tail) of infer requests."""
    fp32 = {"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [0.5, -1, 2, 3]}
    out = [
        ("fp32_flat", {"inputs": [fp32]}, b""),
        ("nested_int64_id_outputs",
         {"id": "r1", "inputs": [{"name": "ids", "datatype": "INT64", "shape": [2, 2],
                                  "data": [[1, 2], [3, 4]]}],
          "outputs": [{"name": "y", "parameters": {"binary_data": True}}]}, b""),
        ("bool_fp16_bf16_params",
         {"parameters": {"priority": 1, "timeout": 1000, "binary_data_output": True},
          "inputs": [{"name": "b", "datatype": "BOOL", "shape": [2], "data": [True, False]},
                     {"name": "h", "datatype": "FP16", "shape": [1], "data": [1.5]},
                     {"name": "g", "datatype": "BF16", "shape": [1], "data": [2.0]}]}, b""),
        ("uint8_int8_int32_fp64",
         {"inputs": [{"name": "a", "datatype": "UINT8", "shape": [3], "data": [0, 128, 255]},
                     {"name": "c", "datatype": "INT8", "shape": [2], "data": [-128, 127]},
                     {"name": "d", "datatype": "INT32", "shape": [1], "data": [7]},
                     {"name": "e", "datatype": "FP64", "shape": [1, 1], "data": [[0.25]]}]},
         b""),
        ("binary_two_inputs",
         {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 2],
                      "parameters": {"binary_data_size": 8}},
                     {"name": "i", "datatype": "INT64", "shape": [1],
                      "parameters": {"binary_data_size": 8}}]},
         struct.pack("<ff", 1.0, 2.0) + struct.pack("<q", 3)),
        ("binary_mixed_with_json",
         {"inputs": [{"name": "x", "datatype": "UINT8", "shape": [4],
                      "parameters": {"binary_data_size": 4}},
                     {"name": "y", "datatype": "FP32", "shape": [1], "data": [1.0]}]},
         bytes([1, 2, 3, 4])),
    ]
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = parser.parse_args()

    seeds = onnx_seeds()
    for name, m in seeds.items():
        data = m.SerializeToString()
        write("onnx_buffer", name + ".onnx", data)
        write("onnx_file", name + ".onnx", data)

    # .troupe and compiled blobs of a few seeds, made by the built library.
    troupe_bin = os.path.join(args.build, "bin", "troupe")
    sys.path.insert(0, os.path.join(args.build, "python"))
    import troupe  # noqa: E402  (the module built in args.build)
    core = troupe.Core()
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("add_relu", "conv_pool", "matmul_softmax_dynamic", "shape_ops",
                     "gather_reduce"):
            src = os.path.join(tmp, name + ".onnx")
            onnx.save(seeds[name], src)
            dst = os.path.join(tmp, name + ".troupe")
            troupe.save_model(core.read_model(src), dst)
            write("troupe_model", name + ".troupe", open(dst, "rb").read())
            if name in ("add_relu", "conv_pool", "gather_reduce"):
                blob = os.path.join(tmp, name + ".blob")
                subprocess.run([troupe_bin, "compile", "-m", src, "-o", blob], check=True,
                               stdout=subprocess.DEVNULL)
                write("compiled_blob", name + ".blob", open(blob, "rb").read())

    arrays = {
        "f4_2x3": np.arange(6, dtype=np.float32).reshape(2, 3),
        "f2_3": np.array([1, 2, 3], np.float16),
        "f8_scalar": np.array(1.5),
        "i1_4": np.array([-1, 0, 1, 2], np.int8),
        "u1_2x2": np.array([[0, 1], [2, 255]], np.uint8),
        "i4_0x2": np.zeros((0, 2), np.int32),
        "i8_3": np.array([1, 2, 3], np.int64),
        "b1_2": np.array([True, False]),
        "f4_fortran": np.asfortranarray(np.arange(4, dtype=np.float32).reshape(2, 2)),
    }
    for name, a in arrays.items():
        write("npy", name + ".npy", npy_bytes(a))
    # Version 2.0 and 3.0 headers (4-byte header length).
    v1 = npy_bytes(arrays["f4_2x3"])
    header_len = struct.unpack("<H", v1[8:10])[0]
    header = v1[10:10 + header_len]
    write("npy", "f4_2x3_v2.npy", b"\x93NUMPY\x02\x00" + struct.pack("<I", header_len) + header
          + v1[10 + header_len:])
    write("npy", "f4_2x3_v3.npy", b"\x93NUMPY\x03\x00" + struct.pack("<I", header_len) + header
          + v1[10 + header_len:])

    for name, header, tail in kserve_bodies():
        text = json.dumps(header, separators=(",", ":")).encode()
        if not tail:
            write("kserve_json", name + ".json", text)
        write("kserve_binary", name + ".bin", struct.pack("<Q", len(text)) + text + tail)


if __name__ == "__main__":
    main()
