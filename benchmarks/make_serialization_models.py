#!/usr/bin/python3
"""Writes the models benchmarks/serialization_bench.cpp measures (random weights, fixed seed):

  resnet50.onnx      ResNet-50 v1.5 layout (BatchNorm folded into the convolutions, as exporters
                     do in inference mode): input f32[1,3,224,224] -> logits f32[1,1000]
  bert_encoder.onnx  a BERT-base-like encoder, 12 layers, d=768, 12 heads, ffn 3072, GELU (Erf),
                     attention as MatMul/Softmax: input f32[1,128,768] -> f32[1,128,768]

Usage: /usr/bin/python3 benchmarks/make_serialization_models.py OUT_DIR  (needs python3-onnx, numpy)
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(2024)


class Graph:
    def __init__(self):
        self.nodes, self.inits, self.n = [], [], 0

    def name(self, prefix):
        self.n += 1
        return f"{prefix}_{self.n}"

    def const(self, array, prefix="w"):
        name = self.name(prefix)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def op(self, op_type, inputs, **attrs):
        out = self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out + "_node", **attrs))
        return out


def weights(*shape, fan_in):
    return (rng.standard_normal(shape, dtype=np.float32) * np.float32(np.sqrt(2.0 / fan_in)))


def conv(g, x, cin, cout, k, stride=1, relu=True):
    w = g.const(weights(cout, cin, k, k, fan_in=cin * k * k))
    b = g.const(np.zeros(cout, np.float32))
    y = g.op("Conv", [x, w, b], kernel_shape=[k, k], strides=[stride, stride],
             pads=[k // 2] * 4)
    return g.op("Relu", [y]) if relu else y


def resnet50(path):
    g = Graph()
    x = conv(g, "input", 3, 64, 7, 2)
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for width, blocks, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
        for i in range(blocks):
            s = stride if i == 0 else 1
            y = conv(g, x, cin, width, 1)
            y = conv(g, y, width, width, 3, s)
            y = conv(g, y, width, width * 4, 1, relu=False)
            short = conv(g, x, cin, width * 4, 1, s, relu=False) if i == 0 else x
            x = g.op("Relu", [g.op("Add", [y, short])])
            cin = width * 4
    x = g.op("Flatten", [g.op("GlobalAveragePool", [x])], axis=1)
    fc_w = g.const(weights(1000, 2048, fan_in=2048))
    fc_b = g.const(np.zeros(1000, np.float32))
    logits = g.op("Gemm", [x, fc_w, fc_b], transB=1)
    g.nodes.append(helper.make_node("Identity", [logits], ["logits"], name="logits_node"))
    graph = helper.make_graph(
        g.nodes, "resnet50",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 224, 224])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1000])], g.inits)
    save(graph, path, opset=13)


def bert_encoder(path, layers=12, d=768, heads=12, ffn=3072, tokens=128):
    g = Graph()
    hd = d // heads
    x = "hidden"
    split_shape = g.const(np.array([1, tokens, heads, hd], np.int64), "shape")
    merge_shape = g.const(np.array([1, tokens, d], np.int64), "shape")
    scale = g.const(np.array(1.0 / np.sqrt(hd), np.float32), "scale")
    half = g.const(np.array(0.5, np.float32), "half")
    one = g.const(np.array(1.0, np.float32), "one")
    inv_sqrt2 = g.const(np.array(1.0 / np.sqrt(2.0), np.float32), "inv_sqrt2")

    def linear(x, cin, cout):
        w = g.const(weights(cin, cout, fan_in=cin))
        b = g.const(np.zeros(cout, np.float32))
        return g.op("Add", [g.op("MatMul", [x, w]), b])

    def layer_norm(x):
        gamma = g.const(np.ones(d, np.float32))
        beta = g.const(np.zeros(d, np.float32))
        return g.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=1e-5)

    def heads_of(y):  # [1,t,d] -> [1,h,t,hd]
        return g.op("Transpose", [g.op("Reshape", [y, split_shape])], perm=[0, 2, 1, 3])

    for _ in range(layers):
        q = heads_of(linear(x, d, d))
        k_t = g.op("Transpose", [g.op("Reshape", [linear(x, d, d), split_shape])],
                   perm=[0, 2, 3, 1])
        v = heads_of(linear(x, d, d))
        scores = g.op("Mul", [g.op("MatMul", [q, k_t]), scale])
        attn = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
        merged = g.op("Reshape", [g.op("Transpose", [attn], perm=[0, 2, 1, 3]), merge_shape])
        x = layer_norm(g.op("Add", [x, linear(merged, d, d)]))
        h = linear(x, d, ffn)
        gelu = g.op("Mul", [g.op("Mul", [h, half]),
                            g.op("Add", [g.op("Erf", [g.op("Mul", [h, inv_sqrt2])]), one])])
        x = layer_norm(g.op("Add", [x, linear(gelu, ffn, d)]))
    g.nodes.append(helper.make_node("Identity", [x], ["out"], name="out_node"))
    graph = helper.make_graph(
        g.nodes, "bert_encoder",
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, [1, tokens, d])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, tokens, d])], g.inits)
    save(graph, path, opset=17)


def save(graph, path, opset):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="troupe-benchmarks")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    print(f"wrote {path} ({os.path.getsize(path) / 1e6:.1f} MB, {len(graph.node)} nodes)")


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    resnet50(os.path.join(out, "resnet50.onnx"))
    bert_encoder(os.path.join(out, "bert_encoder.onnx"))
