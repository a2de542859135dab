#!/usr/bin/python3
"""Writes the pipeline benchmark's trivial model as ONNX: y = Relu(x), x f32 [1,16].

Usage: /usr/bin/python3 make_trivial_onnx.py OUT.onnx   (Debian's python3-onnx)
"""
import sys

from onnx import TensorProto, checker, helper, save

graph = helper.make_graph(
    [helper.make_node("Relu", ["x"], ["y"], name="relu")],
    "trivial_relu",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8  # readable by every ONNX Runtime since 1.10
checker.check_model(model)
save(model, sys.argv[1])
