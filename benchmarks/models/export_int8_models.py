#!/usr/bin/python3
"""Exports int8 models in ONNX QDQ form (QuantizeLinear/DequantizeLinear around float ops), made
by torch's eager-mode post-training static quantization of torchvision's quantizable
architectures, with seeded random weights, plus a fixed input and torch's int8 output for it.

  resnet18            torchvision.models.quantization ResNet-18
  resnet50            ResNet-50
  mobilenet_v2        MobileNetV2
  mobilenet_v3_large  MobileNetV3-Large (Hardswish, squeeze-excitation with Hardsigmoid and Mul)
  googlenet           GoogLeNet (Inception v1; Concat of four branches)
  inception_v3        Inception-v3, input 299x299
  shufflenet_v2       ShuffleNetV2 x1.0 (Split/Concat, channel shuffle as Reshape/Transpose)

each input f32[N,3,224,224] (N dynamic) -> output f32[N,1000].

The quantization is torch's for the qnnpack engine (Debian's torch has no fbgemm):
get_default_qconfig('qnnpack'), i.e. activations uint8 per tensor from a histogram observer and
weights int8 per tensor, symmetric (zero point 0). The model's BatchNorm statistics are first
re-estimated on random batches as export_models.py does for the float zoo, then the model is
fused (Conv+BN+ReLU), prepared, calibrated on a few seeded random batches and converted, and
torch.onnx.export (opset 13) writes each quantized op as DequantizeLinear -> float op ->
QuantizeLinear. Two changes make that export possible and faithful: ShuffleNetV2's blocks split
and shuffle channels by Reshape/Gather/Transpose instead of chunk and size() (which the exporter
cannot take on quantized tensors), and each float bias is nudged so that the exporter's int32
bias (which truncates) is the one torch's kernels use (which round); see the functions below.

The graphs as torch 1.13 writes them: no initializers (weights, scales and zero points are
Constant nodes); every quantized activation is QuantizeLinear (uint8) -> Cast(to=UINT8, a no-op)
-> DequantizeLinear, with a Cast and a DequantizeLinear of its own for each consumer; weights are
DequantizeLinear(int8, scale float[1], zero point int8[1] = 0) without axis (a one-element 1-D
scale: per tensor); biases DequantizeLinear(int32, scale float[1] = input scale * weight scale,
zero point Cast(ConstantOfShape) to int32); ReLUs fused in torch are Conv -> Relu ->
QuantizeLinear.

How close another engine can get: torch's int8 kernels accumulate in int32 and round once, and
the graph's float semantics agree with them layer by layer except at rounding near-ties (float
accumulation, averages landing on .5). But these random-weight networks amplify every flipped
step, so at the output ONNX Runtime without graph optimizations is 1 to 27 steps from torch's
int8 output (reduced models; 2 to 9 at full size) and with its fused int8 kernels up to ~70,
while int8 and fp32 differ by 6 to 54 steps: a checker needs a per-model allowance, or to compare
layer by layer.

For each model NAME it writes
  OUT_DIR/NAME.onnx                              the int8 (QDQ) model
  OUT_DIR/NAME/inputs/input.npy                  a fixed seeded input
  OUT_DIR/NAME/expected/output.npy               torch's int8 output for it (qnnpack)
  OUT_DIR/NAME/quant_step.json                   {"scale": {"output": s}, "zero_point":
                                                 {"output": z}, "int8_vs_fp32": {"output":
                                                 {"max_abs_diff": d, "max_abs_fp32": m}}}: s is
                                                 the scale of the uint8 tensor the output is
                                                 dequantized from, the unit of a checker's
                                                 allowance; d is how far int8 is from the float
                                                 model, for information
  OUT_DIR/NAME_fp32.onnx                         the same model before quantization (identical
                                                 weights and BatchNorm statistics), opset 13
  OUT_DIR/NAME_fp32/inputs/input.npy             the same input
  OUT_DIR/NAME_fp32/expected/output.npy          torch's output computed in float64
  OUT_DIR/NAME_fp32/reference_error.json         as export_models.py writes it

so NAME_fp32 can be checked like any model of export_models.py, and NAME against its int8 output.

--reduced writes small variants that export and run in seconds, for CI: 64x64 inputs (96x96 for
GoogLeNet and Inception-v3, which need more), 100 classes, ResNet-18 with one block per stage,
ResNet-50 with stages of 2, 1, 1, 1 bottlenecks of width 16 per group, MobileNetV2 at width 0.25,
MobileNetV3-Large at width 0.5, ShuffleNetV2 x0.5.

--per-channel quantizes weights per output channel (torch's per_channel_symmetric int8 weight
observer, supported by qnnpack) instead of per tensor: DequantizeLinear of the weights then has
a 1-D scale and zero point with axis=0.

--weight-bits 7 keeps the weights in [-64, 63] (torch's observers with quant_min/quant_max; ONNX
Runtime's quantizer calls it reduce_range, OpenVINO's a saturation fix): without VNNI, oneDNN's
int8 kernels add two u8 x s8 products in 16 bits (vpmaddubsw), which saturates for 8-bit weights;
troupe runs int8 layers there only when their weights fit 7 bits (kernels/int8_exactness.hpp)
and the float form otherwise.

Nothing is downloaded: weights come from torch's initializers under torch.manual_seed.

Usage: /usr/bin/python3 benchmarks/models/export_int8_models.py OUT_DIR [--only NAME ...]
                                                               [--reduced] [--per-channel]
                                                               [--weight-bits 7|8]
(needs Debian's python3-torch, python3-torchvision, python3-onnx, python3-numpy)
"""
import argparse
import copy
import importlib
import json
import os
import sys
import time
import types
import warnings
import zlib

try:
    import numpy as np
    import onnx
    import torch
    import torch.ao.nn.quantized as nnq
    from torch.ao import quantization as tq
    from torchvision.models import quantization as qmodels
    from torchvision.models.quantization.utils import _replace_relu

    import export_models
    from zoo_models import image
except ImportError as e:
    sys.exit(f"{sys.argv[0]}: {e}: this script needs Debian's python3-torch, python3-torchvision, "
             "python3-onnx and python3-numpy under /usr/bin/python3 (scripts/setup.sh installs "
             "them)")

OPSET = 13
ENGINE = "qnnpack"
CALIBRATION_BATCHES = 4
CALIBRATION_BATCH_SIZE = 4

# torchvision.models.quantization exports functions named like some of its modules (googlenet,
# inception_v3 ...); the modules themselves hold the Quantizable* classes.
qresnet = importlib.import_module("torchvision.models.quantization.resnet")
qshufflenet = importlib.import_module("torchvision.models.quantization.shufflenetv2")


def quantizable_resnet(block, layers, **kwargs):
    """A QuantizableResNet of any depth, prepared as torchvision's builders prepare theirs
    (ReLU6 and in-place ReLUs replaced by plain ReLUs, which eager fusion needs)."""
    net = qresnet.QuantizableResNet(block, layers, **kwargs)
    _replace_relu(net)
    return net


def resnet18(reduced):
    if reduced:
        return quantizable_resnet(qresnet.QuantizableBasicBlock, [1, 1, 1, 1],
                                  num_classes=100), image(True)
    return qmodels.resnet18(weights=None, quantize=False), image(False)


def resnet50(reduced):
    if reduced:
        return quantizable_resnet(qresnet.QuantizableBottleneck, [2, 1, 1, 1], width_per_group=16,
                                  num_classes=100), image(True)
    return qmodels.resnet50(weights=None, quantize=False), image(False)


def mobilenet_v2(reduced):
    if reduced:
        return qmodels.mobilenet_v2(weights=None, quantize=False, width_mult=0.25,
                                    num_classes=100), image(True)
    return qmodels.mobilenet_v2(weights=None, quantize=False), image(False)


def mobilenet_v3_large(reduced):
    if reduced:
        return qmodels.mobilenet_v3_large(weights=None, quantize=False, width_mult=0.5,
                                          num_classes=100), image(True)
    return qmodels.mobilenet_v3_large(weights=None, quantize=False), image(False)


def googlenet(reduced):
    # In eval mode (and in training without aux_logits) the model returns the logits tensor.
    net = qmodels.googlenet(weights=None, quantize=False, aux_logits=False, init_weights=True,
                            num_classes=100 if reduced else 1000)
    return net, image(reduced, small=96)


def inception_v3(reduced):
    net = qmodels.inception_v3(weights=None, quantize=False, aux_logits=False, init_weights=True,
                               num_classes=100 if reduced else 1000)
    return net, image(reduced, full=299, small=96)


def shufflenet_v2(reduced):
    if reduced:
        return qmodels.shufflenet_v2_x0_5(weights=None, quantize=False,
                                          num_classes=100), image(True)
    return qmodels.shufflenet_v2_x1_0(weights=None, quantize=False), image(False)


def _exportable_shuffle_block(self, x):
    """QuantizableInvertedResidual.forward in a form torch's ONNX exporter takes once the model is
    quantized: it has no quantized Slice (what x.chunk(2, dim=1) becomes), and the Shape of a
    quantized tensor (channel_shuffle's x.size()) breaks the export. Here the split is a view to
    [N, 2, C/2, H, W] and two selects (Reshape and Gather, which have quantized forms), and every
    size but the batch is a constant of the trace (the batch is -1 in each view, so it stays
    dynamic). The same values, bit for bit."""
    c, h, w = (int(d) for d in x.shape[1:])
    if self.stride == 1:
        halves = x.view(-1, 2, c // 2, h, w)
        out = self.cat.cat([halves.select(1, 0), self.branch2(halves.select(1, 1))], dim=1)
    else:
        out = self.cat.cat([self.branch1(x), self.branch2(x)], dim=1)
    c, h, w = (int(d) for d in out.shape[1:])
    out = torch.transpose(out.view(-1, 2, c // 2, h, w), 1, 2).contiguous()  # channel shuffle
    return out.view(-1, c, h, w)


def exportable_shufflenet(qnet):
    for m in qnet.modules():
        if isinstance(m, qshufflenet.QuantizableInvertedResidual):
            m.forward = types.MethodType(_exportable_shuffle_block, m)


# name -> (factory(reduced) -> (module with QuantStub/DeQuantStub and fuse_model,
#                               [(input name, example tensor)]),
#          what makes the converted model exportable, or None)
MODELS = {
    "resnet18": (resnet18, None),
    "resnet50": (resnet50, None),
    "mobilenet_v2": (mobilenet_v2, None),
    "mobilenet_v3_large": (mobilenet_v3_large, None),
    "googlenet": (googlenet, None),
    "inception_v3": (inception_v3, None),
    "shufflenet_v2": (shufflenet_v2, exportable_shufflenet),
}


def quantize(net, inputs, per_channel, weight_bits, seed):
    """Eager post-training static quantization of a copy of `net` (left as it is): fuse, prepare,
    calibrate on seeded random batches like the input, convert."""
    qnet = copy.deepcopy(net).eval()
    qnet.fuse_model(is_qat=False)
    qconfig = tq.get_default_qconfig(ENGINE)
    if per_channel or weight_bits != 8:
        limits = {} if weight_bits == 8 else {"quant_min": -(1 << (weight_bits - 1)),
                                              "quant_max": (1 << (weight_bits - 1)) - 1}
        observer = (tq.PerChannelMinMaxObserver.with_args(
                        dtype=torch.qint8, qscheme=torch.per_channel_symmetric, **limits)
                    if per_channel else
                    tq.MinMaxObserver.with_args(
                        dtype=torch.qint8, qscheme=torch.per_tensor_symmetric, **limits))
        qconfig = tq.QConfig(activation=qconfig.activation, weight=observer)
    qnet.qconfig = qconfig
    tq.prepare(qnet, inplace=True)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _ in range(CALIBRATION_BATCHES):
            qnet(*[torch.randn((CALIBRATION_BATCH_SIZE,) + tuple(t.shape[1:]), generator=generator)
                   for _, t in inputs])
    with warnings.catch_warnings():
        # The observers of the skip_add that MobileNet blocks without a residual never call.
        warnings.filterwarnings("ignore", "must run observer before calling calculate_qparams")
        tq.convert(qnet, inplace=True)
    return qnet


def round_biases_for_export(qnet, tensors):
    """Makes the exported biases the ones torch's kernels use. A quantized Conv or Linear keeps
    its bias in float and its kernel rounds bias / (input scale * weight scale) to int32, while
    torch.onnx.export writes that quotient through Cast to int32, which truncates: a bias off by
    one accumulator unit in about half the channels, enough to flip an output step now and then
    (0.15% of the first convolution's outputs in ResNet-18), and every later layer amplifies the
    flips. Each bias is moved to k + sign(k)/4 units, k its rounded value, where rounding and
    truncation agree whatever the float32 error of the division: a change of at most 3/4 of a
    unit of the accumulator, about a hundredth of an output step or less."""
    layers = [m for m in qnet.modules() if isinstance(m, (nnq.Conv2d, nnq.Linear))]
    input_scales = {}

    def hook(module, args):
        input_scales[module] = args[0].q_scale()

    handles = [m.register_forward_pre_hook(hook) for m in layers]
    with torch.no_grad():
        qnet(*tensors)
    for handle in handles:
        handle.remove()
    for m in layers:
        weight, bias = m.weight(), m.bias()
        if bias is None:
            continue
        if weight.qscheme() in (torch.per_channel_affine, torch.per_channel_symmetric):
            weight_scales = weight.q_per_channel_scales().to(torch.float64)
        else:
            weight_scales = torch.tensor(weight.q_scale(), dtype=torch.float64)
        unit = input_scales[m] * weight_scales
        k = torch.round(bias.detach().to(torch.float64) / unit)
        m.set_weight_bias(weight, ((k + 0.25 * torch.sign(k)) * unit).to(torch.float32))


def run_quantized(qnet, tensors):
    """The int8 model's output, and the quantization (scale, zero point) of the tensor the final
    DeQuantStub dequantizes (None if that tensor was not quantized)."""
    seen = {}

    def hook(_module, args):
        if args[0].is_quantized:
            seen["scale"], seen["zero_point"] = args[0].q_scale(), args[0].q_zero_point()

    handle = qnet.dequant.register_forward_pre_hook(hook)
    with torch.no_grad():
        out = qnet(*tensors)
    handle.remove()
    return out.numpy(), seen.get("scale"), seen.get("zero_point")


def onnx_export(net, tensors, names, path):
    """Exports with a dynamic batch axis, or with a static one if the exporter refuses the
    dynamic one; returns whether the batch axis is dynamic."""
    for dynamic in (True, False):
        dynamic_axes = {n: {0: "batch"} for n in names + ["output"]} if dynamic else None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(net, tensors, path, opset_version=OPSET,
                                  do_constant_folding=True,
                                  training=torch.onnx.TrainingMode.EVAL, input_names=names,
                                  output_names=["output"], dynamic_axes=dynamic_axes)
        except Exception as e:  # noqa: BLE001 -- any exporter failure: retry without
            if not dynamic:
                raise
            reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            print(f"  {os.path.basename(path)}: dynamic batch export failed ({reason}); "
                  "exporting with a static batch", flush=True)
            continue
        onnx.checker.check_model(path)
        graph_inputs, outputs = export_models.graph_io_names(path)
        if graph_inputs != names or outputs != ["output"]:
            raise RuntimeError(f"{path}: unexpected ONNX inputs {graph_inputs} / outputs "
                               f"{outputs}")
        return dynamic
    raise AssertionError("unreachable")


def write_case(out_dir, name, inputs, expected, extra_json):
    for sub in ("inputs", "expected"):
        os.makedirs(os.path.join(out_dir, name, sub), exist_ok=True)
    for n, t in inputs:
        np.save(os.path.join(out_dir, name, "inputs", n + ".npy"), t.numpy())
    np.save(os.path.join(out_dir, name, "expected", "output.npy"), expected)
    for file_name, content in extra_json.items():
        with open(os.path.join(out_dir, name, file_name), "w") as f:
            json.dump(content, f, indent=1)


def export(name, out_dir, reduced, per_channel, weight_bits):
    # One seed per model, so `--only NAME` writes the same files as a full run.
    seed = zlib.crc32(name.encode())
    torch.manual_seed(seed)
    factory, make_exportable = MODELS[name]
    net, example = factory(reduced)
    generator = torch.Generator().manual_seed(seed + 1)
    inputs = [(n, torch.randn(t.shape, generator=generator)) for n, t in example]
    tensors = tuple(t for _, t in inputs)
    names = [n for n, _ in inputs]

    # Float model: random norm parameters, BatchNorm statistics re-estimated (export_models.py).
    export_models.calibrate_batch_norms(net, inputs)
    net.eval()
    with torch.no_grad():
        fp32 = net(*tensors).numpy()
    fp32_expected, fp32_error = export_models.exact_reference(net, tensors, fp32)
    fp32_dynamic = onnx_export(net, tensors, names, os.path.join(out_dir, name + "_fp32.onnx"))
    write_case(out_dir, name + "_fp32", inputs, fp32_expected,
               {"reference_error.json": {"output": fp32_error}})

    # Int8 model, from the same float model.
    qnet = quantize(net, inputs, per_channel, weight_bits, seed + 2)
    round_biases_for_export(qnet, tensors)
    int8, scale, zero_point = run_quantized(qnet, tensors)
    if make_exportable:
        make_exportable(qnet)
        if not np.array_equal(run_quantized(qnet, tensors)[0], int8):
            raise RuntimeError(f"{name}: the exportable form computes another output")
    int8_dynamic = onnx_export(qnet, tensors, names, os.path.join(out_dir, name + ".onnx"))
    diff = float(np.max(np.abs(int8 - fp32)))
    write_case(out_dir, name, inputs, int8, {"quant_step.json": {
        "scale": {"output": scale} if scale is not None else {},
        "zero_point": {"output": zero_point} if zero_point is not None else {},
        "int8_vs_fp32": {"output": {"max_abs_diff": diff,
                                    "max_abs_fp32": float(np.max(np.abs(fp32)))}},
    }})
    steps = f"{diff / scale:.1f} steps" if scale else "output not quantized"
    batch = "dynamic" if int8_dynamic and fp32_dynamic else "STATIC"
    return (f"{list(tensors[0].shape)} -> {list(int8.shape)}, batch {batch}, output step "
            f"{scale}, int8 vs fp32 max |diff| {diff:.4g} ({steps}; fp32 max |out| "
            f"{np.max(np.abs(fp32)):.4g})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", help="directory to write NAME.onnx, NAME_fp32.onnx and "
                                        "NAME{,_fp32}/{inputs,expected}")
    parser.add_argument("--only", nargs="+", choices=sorted(MODELS), metavar="NAME",
                        help="export only these models (%(choices)s)")
    parser.add_argument("--reduced", action="store_true",
                        help="small variants of the same architectures, for CI")
    parser.add_argument("--per-channel", action="store_true",
                        help="quantize weights per output channel instead of per tensor")
    parser.add_argument("--weight-bits", type=int, choices=(7, 8), default=8,
                        help="7 keeps weights in [-64, 63], as quantizers do for x86 CPUs "
                             "without VNNI (see the docstring)")
    args = parser.parse_args()

    if ENGINE not in torch.backends.quantized.supported_engines:
        sys.exit(f"{sys.argv[0]}: torch has no {ENGINE} quantized engine")
    torch.backends.quantized.engine = ENGINE
    os.makedirs(args.out_dir, exist_ok=True)
    for name in args.only or list(MODELS):
        start = time.monotonic()
        summary = export(name, args.out_dir, args.reduced, args.per_channel, args.weight_bits)
        print(f"{name}: {summary} in {time.monotonic() - start:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
