#!/usr/bin/python3
"""Exports real architectures to ONNX with seeded random weights, plus a fixed input and torch's
output for it, so troupe's results can be compared with PyTorch's.

  resnet50      torchvision ResNet-50:    input f32[N,3,224,224] (N dynamic) -> output f32[N,1000]
  mobilenet_v2  torchvision MobileNetV2:  input f32[N,3,224,224] (N dynamic) -> output f32[N,1000]
  bert_encoder  a BERT-base-like encoder (4 layers, hidden 768, 12 heads, intermediate 3072, GELU
                with Erf, LayerNorm, attention as MatMul/Softmax): hidden f32[1,128,768] -> output
  mlp           256 -> 512 -> 512 -> 10 with Relu: input f32[N,256] (N dynamic) -> output f32[N,10]
  tcn           a temporal convolution network: six residual blocks x + relu(bn(conv1d(x))) with
                Conv1d(64, 64, 3) dilated 1, 2, 4, ..., 32: input f32[N,64,1024] -> output
                f32[N,64,1024] (dilated 1-D convolutions run on oneDNN's gemm path on AVX2)

For each model NAME it writes
  OUT_DIR/NAME.onnx
  OUT_DIR/NAME/inputs/<onnx input name>.npy     a fixed seeded input
  OUT_DIR/NAME/expected/<onnx output name>.npy  torch's float32 output for that input

--reduced writes small variants of the same architectures (the same op mix) that export and run
in seconds: ResNet with one or two bottlenecks per stage and narrow groups, MobileNetV2 at width
0.25, both at 64x64; the encoder with 2 layers, hidden 128, 4 heads, sequence 16; the TCN with 32
channels over 256 steps.

Nothing is downloaded: weights come from torch's initializers under torch.manual_seed, with
BatchNorm statistics and LayerNorm affine parameters also drawn at random so that folding them is
really exercised. Every model is exported in eval mode, opset 17, with constant folding.

Usage: /usr/bin/python3 benchmarks/models/export_models.py OUT_DIR [--only NAME ...] [--reduced]
(needs Debian's python3-torch, python3-torchvision, python3-onnx, python3-numpy)
"""
import argparse
import math
import os
import sys
import time
import warnings
import zlib

try:
    import numpy as np
    import onnx
    import torch
    import torch.nn.functional as F
    import torchvision
    from torch import nn
except ImportError as e:
    sys.exit(f"{sys.argv[0]}: {e}: this script needs Debian's python3-torch, python3-torchvision, "
             "python3-onnx and python3-numpy under /usr/bin/python3 (scripts/setup.sh installs "
             "them)")

OPSET = 17


class EncoderLayer(nn.Module):
    """One post-norm BERT layer; attention written out as MatMul/Softmax so it exports as such."""

    def __init__(self, hidden, heads, intermediate, seq):
        super().__init__()
        self.hidden, self.heads, self.seq = hidden, heads, seq
        self.head_dim = hidden // heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.attention_out = nn.Linear(hidden, hidden)
        self.attention_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.ffn_in = nn.Linear(hidden, intermediate)
        self.ffn_out = nn.Linear(intermediate, hidden)
        self.ffn_norm = nn.LayerNorm(hidden, eps=1e-12)

    def split_heads(self, x):
        # [B, S, hidden] -> [B, heads, S, head_dim]
        return x.reshape(-1, self.seq, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x):
        q = self.split_heads(self.query(x))
        k = self.split_heads(self.key(x))
        v = self.split_heads(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        probs = torch.softmax(scores, dim=-1)
        context = torch.matmul(probs, v).transpose(1, 2).reshape(-1, self.seq, self.hidden)
        x = self.attention_norm(x + self.attention_out(context))
        ffn = self.ffn_out(F.gelu(self.ffn_in(x)))  # exact GELU: exported with Erf
        return self.ffn_norm(x + ffn)


class Encoder(nn.Module):
    def __init__(self, layers, hidden, heads, intermediate, seq):
        super().__init__()
        self.layers = nn.ModuleList(
            EncoderLayer(hidden, heads, intermediate, seq) for _ in range(layers))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def randomize_norms(model):
    """Draws BatchNorm statistics and norm affine parameters (torch initializes them to 0/1, which
    would make folding them a no-op). The ranges keep activations at a sane scale."""
    for m in model.modules():
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            with torch.no_grad():
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0.0, 0.1)
                m.running_mean.normal_(0.0, 0.1)
                m.running_var.uniform_(0.5, 1.5)
        elif isinstance(m, nn.LayerNorm):
            with torch.no_grad():
                m.weight.uniform_(0.8, 1.2)
                m.bias.normal_(0.0, 0.1)


def init_encoder(model):
    # Variance-preserving weights so attention scores have a spread of about 1 (BERT's std 0.02
    # would make every softmax nearly uniform and the comparison weak).
    for m in model.modules():
        if isinstance(m, nn.Linear):
            with torch.no_grad():
                m.weight.normal_(0.0, 1.0 / math.sqrt(m.in_features))
                m.bias.normal_(0.0, 0.1)
    randomize_norms(model)


def make_resnet50(reduced):
    if reduced:
        net = torchvision.models.resnet.ResNet(torchvision.models.resnet.Bottleneck, [2, 1, 1, 1],
                                               num_classes=100, width_per_group=16)
        return net, [1, 3, 64, 64]
    return torchvision.models.resnet50(weights=None), [1, 3, 224, 224]


def make_mobilenet_v2(reduced):
    if reduced:
        return torchvision.models.mobilenet_v2(weights=None, width_mult=0.25,
                                               num_classes=100), [1, 3, 64, 64]
    return torchvision.models.mobilenet_v2(weights=None), [1, 3, 224, 224]


def make_bert_encoder(reduced):
    if reduced:
        layers, hidden, heads, intermediate, seq = 2, 128, 4, 512, 16
    else:
        layers, hidden, heads, intermediate, seq = 4, 768, 12, 3072, 128
    net = Encoder(layers, hidden, heads, intermediate, seq)
    init_encoder(net)
    return net, [1, seq, hidden]


def make_mlp(reduced):
    net = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                        nn.Linear(512, 10))
    return net, [1, 256]


class TemporalBlock(nn.Module):
    """x + relu(bn(conv(x))): a dilated causal-free 1-D convolution keeping the length."""

    def __init__(self, channels, dilation):
        super().__init__()
        self.conv = nn.Conv1d(channels, channels, 3, dilation=dilation, padding=dilation)
        self.bn = nn.BatchNorm1d(channels)

    def forward(self, x):
        return x + torch.relu(self.bn(self.conv(x)))


def make_tcn(reduced):
    channels, length = (32, 256) if reduced else (64, 1024)
    net = nn.Sequential(*[TemporalBlock(channels, 2**i) for i in range(6)])
    return net, [1, channels, length]


# name -> (factory, input name, whether the batch axis is dynamic)
MODELS = {
    "resnet50": (make_resnet50, "input", True),
    "mobilenet_v2": (make_mobilenet_v2, "input", True),
    "bert_encoder": (make_bert_encoder, "hidden", False),
    "mlp": (make_mlp, "input", True),
    "tcn": (make_tcn, "input", True),
}


def graph_io_names(path):
    """The ONNX graph's real input and output names (initializers are not inputs)."""
    graph = onnx.load(path, load_external_data=False).graph
    initializers = {t.name for t in graph.initializer}
    inputs = [i.name for i in graph.input if i.name not in initializers]
    return inputs, [o.name for o in graph.output]


def export(name, out_dir, reduced):
    factory, input_name, dynamic_batch = MODELS[name]
    # One seed per model, so `--only NAME` writes the same files as a full run.
    seed = zlib.crc32(name.encode())
    torch.manual_seed(seed)
    net, shape = factory(reduced)
    if name != "bert_encoder":
        randomize_norms(net)
    net.eval()
    x = torch.randn(shape, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float32)
    with torch.no_grad():
        expected = net(x).detach().to(torch.float32).numpy()

    path = os.path.join(out_dir, name + ".onnx")
    dynamic_axes = {input_name: {0: "batch"}, "output": {0: "batch"}} if dynamic_batch else None
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (x,), path, opset_version=OPSET, do_constant_folding=True,
                          training=torch.onnx.TrainingMode.EVAL, input_names=[input_name],
                          output_names=["output"], dynamic_axes=dynamic_axes)
    onnx.checker.check_model(path)

    inputs, outputs = graph_io_names(path)
    if inputs != [input_name] or outputs != ["output"]:
        raise RuntimeError(f"{name}: unexpected ONNX inputs {inputs} / outputs {outputs}")
    for sub in ("inputs", "expected"):
        os.makedirs(os.path.join(out_dir, name, sub), exist_ok=True)
    np.save(os.path.join(out_dir, name, "inputs", input_name + ".npy"), x.numpy())
    np.save(os.path.join(out_dir, name, "expected", "output.npy"), expected)
    return list(x.shape), list(expected.shape)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", help="directory to write NAME.onnx and NAME/{inputs,expected}")
    parser.add_argument("--only", nargs="+", choices=sorted(MODELS), metavar="NAME",
                        help="export only these models (%(choices)s)")
    parser.add_argument("--reduced", action="store_true",
                        help="small variants of the same architectures, for CI")
    args = parser.parse_args()

    os.makedirs(args.out_dir, exist_ok=True)
    for name in args.only or list(MODELS):
        start = time.monotonic()
        in_shape, out_shape = export(name, args.out_dir, args.reduced)
        print(f"{name}: {in_shape} -> {out_shape} in {time.monotonic() - start:.1f} s",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
