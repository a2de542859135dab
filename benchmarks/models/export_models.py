#!/usr/bin/python3
"""Exports real architectures to ONNX with seeded random weights, plus a fixed input and torch's
output for it, so troupe's results can be compared with PyTorch's.

  resnet50      torchvision ResNet-50:    input f32[N,3,224,224] (N dynamic) -> output f32[N,1000]
  mobilenet_v2  torchvision MobileNetV2:  input f32[N,3,224,224] (N dynamic) -> output f32[N,1000]
  bert_encoder  a BERT-base-like encoder (4 layers, hidden 768, 12 heads, intermediate 3072, GELU
                with Erf, LayerNorm, attention as MatMul/Softmax): hidden f32[1,128,768] -> output
  bert_encoder_batched  the same with the batch axis dynamic (hidden f32[N,128,768]), so that
                the scheduler can batch it (benchmarks/scheduling/dynamic_batching.sh)
  mlp           256 -> 512 -> 512 -> 10 with Relu: input f32[N,256] (N dynamic) -> output f32[N,10]
  tcn           a temporal convolution network: six residual blocks x + relu(bn(conv1d(x))) with
                Conv1d(64, 64, 3) dilated 1, 2, 4, ..., 32: input f32[N,64,1024] -> output
                f32[N,64,1024] (dilated 1-D convolutions run on oneDNN's gemm path on AVX2)

and the zoo (zoo_models.py), every torchvision classification family that exports to ONNX plus
the other shapes of model users bring:

  resnet18 resnext50 wide_resnet50 mobilenet_v3_large mobilenet_v3_small efficientnet_b0
  efficientnet_v2_s regnet_y_400mf regnet_x_400mf densenet121 googlenet inception_v3 squeezenet
  shufflenet_v2 mnasnet convnext_tiny vgg11 alexnet vit swin_t swin_v2_t maxvit_t
                torchvision, input f32[N,3,H,W] (224; Inception 299, EfficientNetV2-S 288,
                Swin-V2-T 256; Swin and MaxViT with a static batch)
  ghostnet      GhostNet 1.0: ghost modules (1x1 conv, cheap depthwise conv, Concat, channel
                Slice), hard-sigmoid SE, f32[N,3,224,224]
  mlp_mixer     MLP-Mixer-B/16: token- and channel-mixing MLPs (224x224)
  mobilevit_xs  MobileViT-XS: inverted residuals, transformers over unfolded patches (256x256)
  deeplabv3_mobilenet  DeepLabV3 (MobileNetV3 backbone, ASPP, a Resize to a computed size)
  lraspp_mobilenet  LR-ASPP (dilated MobileNetV3, a sigmoid-gated pooled branch) at 512x512
  ssdlite_full  SSDlite320 with its postprocessing: anchor decoding, TopK, batched
                NonMaxSuppression; f32[1,3,320,320] -> the first image's detections f32[K,6]
  raft_small    RAFT-small optical flow: a correlation volume, 12 GridSample-ing ConvGRU
                steps; image1, image2 f32[1,3,368,496] -> flow f32[1,2,368,496]
  unet          a U-Net: max-pooling encoder, ConvTranspose 2x2/2 decoder, Concat skips (256x256)
  yolo_detector a YOLOv5-style detector: SiLU, C3 Split/Concat, SPPF max pools, nearest Resize,
                sigmoid heads reshaped to f32[N,6000,85] (320x320)
  anchor_free_detector  a YOLOv8-style detector: C2f Split/Concat, SPPF, PAN neck, box
                distributions normalized along an inner axis (DFL), anchor-point decoding,
                f32[N,84,8400] (640x640)
  r3d_18        torchvision's 3-D ResNet-18 for video: f32[N,3,8,112,112] (Conv3d, 3-D pooling)
  s3d           torchvision's S3D: separable 3-D convolutions, 3-D Inception, f32[N,3,16,224,224]
  pointnet      PointNet: per-point Conv1d, T-Net transforms by MatMul, max over f32[N,3,1024]
  cyclegan_generator  CycleGAN's ResNet generator: reflection Pad, InstanceNorm, ConvTranspose
                with output_padding, Tanh (256x256)
  espcn         ESPCN super-resolution: f32[N,1,224,224] -> PixelShuffle (DepthToSpace) x3
  edsr          EDSR-baseline x2 super-resolution: 16 residual blocks, f32[N,3,128,128] x2
  diffusion_unet  DDPM's CIFAR-10 U-Net: GroupNorm, attention, a sinusoidal timestep embedding;
                input f32[N,3,32,32] and timestep f32[N]
  mobilefacenet a MobileFaceNet-style face embedder: PReLU, depthwise bottlenecks, a global
                depthwise 7x7 convolution, an L2-normalized 128-d embedding (112x112)
  recurrent     two LSTM layers and a bidirectional GRU over f32[1,64,128]
  bert_tokens   a BERT encoder taking input_ids and attention_mask (i64[1,128]): Gather
                embeddings, the mask turned into an additive bias
  gpt_decoder   a GPT-2-style decoder (causal mask by Where, tanh GELU, a tied LM head) over
                input_ids i64[1,128]
  t5_encoder    a T5-style encoder (RMSNorm, additive position bias, gated tanh-GELU) over
                f32[1,128,512]
  conformer     a Conformer speech encoder (conv subsampling, nn.MultiheadAttention, GLU, a
                31-tap depthwise Conv1d) over filterbank features f32[1,400,80]
  einsum_encoder  six pre-norm encoder layers whose attention is torch.einsum (ONNX Einsum)
                over f32[1,128,512]
  gpt2_kv       one GPT-2-small decode step: input_ids i64[1,1] and past_key / past_value
                f32[12,1,12,127,64] -> logits f32[1,1,50257]
  wav2vec2      wav2vec2-base over one second of 16 kHz audio f32[1,16000]
  textcnn       Kim's TextCNN over input_ids i64[N,256]
  detr          DETR's transformer and heads over a ResNet-50 C5 map f32[1,2048,25,34]
  whisper_enc   Whisper-tiny's audio encoder over f32[1,80,3000] mel frames (1500 positions)
  gcn           a 3-layer graph convolutional network (Gather, ScatterElements add) over 2000
                nodes f32[2000,128] and edge_index i64[2,10000]
  nerf_mlp      NeRF's MLP with its Sin/Cos positional encoding over 65536 points f32[65536,3]
  lstnet        LSTNet: a Conv2d spanning all 64 series, two GRUs, a linear highway over
                f32[1,168,64]
  din_recommender  a Deep Interest Network: embeddings, attention over a history of 100 items
                (history i64[1,100], target i64[1], mask f32[1,100]), PReLU MLP
  dlrm          DLRM: a bottom MLP, eight embedding tables of 100000 rows, pairwise dot
                products, a top MLP (dense f32[1,13], sparse i64[1,8])
  dgcnn         DGCNN: three EdgeConv layers (k-NN by MatMul and TopK, 20 of 1024 points)
                over points f32[1,3,1024]
  dcgan_generator  DCGAN's generator (ConvTranspose 4x4 stride 2, the last to 3 channels) from
                z f32[N,100,1,1] to a 64x64 image
  dncnn         DnCNN, a 17-layer denoiser (3x3 convolutions of 64 channels, the last to one)
                over f32[N,1,256,256]
  mixnet        MixNet-S-like: depthwise kernels of 3-9 mixed over split channel groups,
                normalized after the join, squeeze-and-excitation by a mean, f32[N,3,224,224]
  x3d           X3D-S-like video network: 3x3x3 depthwise convolutions over 54-432 channels,
                squeeze-and-excitation, SiLU, f32[N,3,13,160,160]
  cspdarknet_mish  CSPDarknet53-like (YOLOv4's backbone): cross-stage joins, Mish activations,
                f32[N,3,256,256]

For each model NAME it writes
  OUT_DIR/NAME.onnx
  OUT_DIR/NAME/inputs/<onnx input name>.npy     a fixed seeded input
  OUT_DIR/NAME/expected/<onnx output name>.npy  torch's output for that input, computed in
                                                float64 and rounded to float32
  OUT_DIR/NAME/reference_error.json             how far torch's own float32 output was from it

--reduced writes small variants of the same architectures (the same op mix) that export and run
in seconds: ResNet with one or two bottlenecks per stage and narrow groups, MobileNetV2 at width
0.25, both at 64x64; the encoder with 2 layers, hidden 128, 4 heads, sequence 16; the TCN with 32
channels over 256 steps.

The zoo's reduced variants keep each family's blocks at 64x64 (96x96 to 128x160 where the
architecture needs more), narrow widths and one or two blocks per stage; sequence models with two
layers, RAFT with 3 refinement steps, the KV cache with 15 past positions.

Nothing is downloaded: weights come from torch's initializers under torch.manual_seed, with
BatchNorm statistics and LayerNorm affine parameters also drawn at random so that folding them is
really exercised; the zoo's BatchNorm statistics are then re-estimated on random batches, so deep
networks keep their activations at a sane scale. Every model is exported in eval mode, opset 17, with constant folding.

Usage: /usr/bin/python3 benchmarks/models/export_models.py OUT_DIR [--only NAME ...] [--reduced]
(needs Debian's python3-torch, python3-torchvision, python3-onnx, python3-numpy)
"""
import argparse
import copy
import json
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

    import zoo_models
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


def single_input(factory, input_name):
    """Adapts a factory of this file (module, shape) to the zoo's (module, [(name, tensor)])."""

    def make(reduced):
        net, shape = factory(reduced)
        return net, [(input_name, torch.randn(shape))]

    return make


# name -> (factory, whether the batch axis is dynamic, how the weights are conditioned)
MODELS = {
    "resnet50": (single_input(make_resnet50, "input"), True, "random_norms"),
    "mobilenet_v2": (single_input(make_mobilenet_v2, "input"), True, "random_norms"),
    "bert_encoder": (single_input(make_bert_encoder, "hidden"), False, "as_built"),
    "bert_encoder_batched": (single_input(make_bert_encoder, "hidden"), True, "as_built"),
    "mlp": (single_input(make_mlp, "input"), True, "random_norms"),
    "tcn": (single_input(make_tcn, "input"), True, "random_norms"),
}
# The zoo: every torchvision classification family, segmentation and detection models, recurrent
# layers, a BERT with token ids and a mask, GPT-style decoders, ... (zoo_models.py).
for _name, (_factory, _dynamic) in zoo_models.ZOO.items():
    MODELS[_name] = (_factory, _dynamic,
                     "transformer" if _name in ("bert_tokens", "gpt_decoder", "gpt2_kv")
                     else "calibrated")


def calibrate_batch_norms(net, inputs, batches=4):
    """Re-estimates BatchNorm statistics on random batches (after drawing its affine parameters),
    so a deep network with random weights keeps its activations at a sane scale: with torch's
    initial statistics a DenseNet or EfficientNet outputs ~0 and every comparison would pass."""
    # Heads initialized to zero (ViT's) would make the output 0 whatever the network computes.
    for m in net.modules():
        if isinstance(m, nn.Linear) and not m.weight.detach().any():
            with torch.no_grad():
                m.weight.normal_(0.0, 1.0 / math.sqrt(m.in_features))
    randomize_norms(net)
    norms = [m for m in net.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # a cumulative average over the calibration batches
    net.train()
    generator = torch.Generator().manual_seed(1234)
    with torch.no_grad():
        for _ in range(batches):
            net(*[torch.randn((4,) + tuple(t.shape[1:]), generator=generator)
                  if t.is_floating_point() else t.repeat(4, *([1] * (t.dim() - 1)))
                  for _, t in inputs])
    net.eval()


def graph_io_names(path):
    """The ONNX graph's real input and output names (initializers are not inputs)."""
    graph = onnx.load(path, load_external_data=False).graph
    initializers = {t.name for t in graph.initializer}
    inputs = [i.name for i in graph.input if i.name not in initializers]
    return inputs, [o.name for o in graph.output]


def exact_reference(net, tensors, torch_f32):
    """The expected output computed in float64 (rounded to float32), and how far torch's own
    float32 result is from it (max abs). A deep network in float32 drifts by more than 1e-4 of its
    output's scale in any correct implementation (Inception-v3: 1.3e-4); the checker allows troupe
    a small multiple of torch's own drift instead of failing both."""
    try:
        net64 = copy.deepcopy(net).double()
        with torch.no_grad():
            exact = net64(*[t.double() if t.is_floating_point() else t for t in tensors])
        exact = exact.detach().numpy()
    except RuntimeError:  # an op without a float64 kernel: torch's float32 is the reference
        return torch_f32, 0.0
    return exact.astype(np.float32), float(np.max(np.abs(torch_f32 - exact)))


def export(name, out_dir, reduced):
    factory, dynamic_batch, conditioning = MODELS[name]
    # One seed per model, so `--only NAME` writes the same files as a full run.
    seed = zlib.crc32(name.encode())
    torch.manual_seed(seed)
    net, example = factory(reduced)
    # The example inputs' values are drawn again from a generator of their own, so they do not
    # depend on how many numbers the factory drew.
    generator = torch.Generator().manual_seed(seed + 1)
    inputs = [(n, torch.randn(t.shape, generator=generator) if t.is_floating_point() else t)
              for n, t in example]
    if conditioning == "random_norms":
        randomize_norms(net)
    elif conditioning == "calibrated":
        calibrate_batch_norms(net, inputs)
    elif conditioning == "transformer":
        init_encoder(net)
    net.eval()
    tensors = tuple(t for _, t in inputs)
    with torch.no_grad():
        torch_f32 = net(*tensors).detach().to(torch.float32).numpy()
    expected, torch_error = exact_reference(net, tensors, torch_f32)

    path = os.path.join(out_dir, name + ".onnx")
    names = [n for n, _ in inputs]
    dynamic_axes = None
    if dynamic_batch:
        dynamic_axes = {n: {0: "batch"} for n in names + ["output"]}
    # Not under no_grad: there, eval-mode nn.MultiheadAttention (ViT) takes its fused fast path,
    # which has no ONNX export.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, tensors, path, opset_version=OPSET, do_constant_folding=True,
                          training=torch.onnx.TrainingMode.EVAL, input_names=names,
                          output_names=["output"], dynamic_axes=dynamic_axes)
    onnx.checker.check_model(path)

    graph_inputs, outputs = graph_io_names(path)
    if graph_inputs != names or outputs != ["output"]:
        raise RuntimeError(f"{name}: unexpected ONNX inputs {graph_inputs} / outputs {outputs}")
    for sub in ("inputs", "expected"):
        os.makedirs(os.path.join(out_dir, name, sub), exist_ok=True)
    for n, t in inputs:
        np.save(os.path.join(out_dir, name, "inputs", n + ".npy"), t.numpy())
    np.save(os.path.join(out_dir, name, "expected", "output.npy"), expected)
    with open(os.path.join(out_dir, name, "reference_error.json"), "w") as f:
        json.dump({"output": torch_error}, f)
    return [list(t.shape) for t in tensors], list(expected.shape)


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
