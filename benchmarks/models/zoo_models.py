"""The zoo: real architectures beyond the first five, for export_models.py.

Each factory takes `reduced` and returns (module, [(input name, example tensor), ...]). Full sizes
are the torchvision definitions at their usual resolution; reduced ones keep each family's op mix
(the same block types, activations, SE units, grouping, attention) at sizes that export and run in
seconds, for CI.

Nothing is downloaded: weights are torch's initializers under the caller's seed; BatchNorm
statistics are re-estimated by export_models.py on random batches, so deep networks keep
activations at a sane scale instead of collapsing to ~0 (where every comparison would pass).
"""
import math

import torch
import torch.nn.functional as F
import torchvision
from torch import nn
from torchvision import models as tvm


def image(reduced, full=224, small=64, batch=1):
    size = small if reduced else full
    return [("input", torch.randn(batch, 3, size, size))]


# --- torchvision classification families -----------------------------------------------------

def resnet18(reduced):
    if reduced:
        return tvm.resnet.ResNet(tvm.resnet.BasicBlock, [1, 1, 1, 1], num_classes=100), image(True)
    return tvm.resnet18(), image(False)


def resnext50(reduced):
    if reduced:
        net = tvm.resnet.ResNet(tvm.resnet.Bottleneck, [1, 1, 1, 1], groups=8, width_per_group=4,
                                num_classes=100)
        return net, image(True)
    return tvm.resnext50_32x4d(), image(False)


def wide_resnet50(reduced):
    if reduced:
        net = tvm.resnet.ResNet(tvm.resnet.Bottleneck, [1, 1, 1, 1], width_per_group=32,
                                num_classes=100)
        return net, image(True)
    return tvm.wide_resnet50_2(), image(False)


def mobilenet_v3_large(reduced):
    if reduced:
        return tvm.mobilenet_v3_large(width_mult=0.5, num_classes=100), image(True)
    return tvm.mobilenet_v3_large(), image(False)


def mobilenet_v3_small(reduced):
    if reduced:
        return tvm.mobilenet_v3_small(width_mult=0.5, num_classes=100), image(True)
    return tvm.mobilenet_v3_small(), image(False)


def efficientnet_b0(reduced):
    if reduced:
        return tvm.efficientnet_b0(num_classes=100), image(True)
    return tvm.efficientnet_b0(), image(False)


def efficientnet_v2_s(reduced):
    if reduced:
        return tvm.efficientnet_v2_s(num_classes=100), image(True)
    return tvm.efficientnet_v2_s(), image(False, full=288)


def regnet_y_400mf(reduced):
    return tvm.regnet_y_400mf(num_classes=100 if reduced else 1000), image(reduced)


def regnet_x_400mf(reduced):
    return tvm.regnet_x_400mf(num_classes=100 if reduced else 1000), image(reduced)


def densenet121(reduced):
    if reduced:
        net = tvm.densenet.DenseNet(growth_rate=16, block_config=(2, 3, 4, 2),
                                    num_init_features=32, num_classes=100)
        return net, image(True)
    return tvm.densenet121(), image(False)


class _Logits(nn.Module):
    """GoogLeNet/Inception return namedtuples in training mode and a tensor in eval; this wrapper
    pins the tensor so the export has one output."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        out = self.net(x)
        return out if isinstance(out, torch.Tensor) else out[0]


def googlenet(reduced):
    net = tvm.googlenet(aux_logits=False, init_weights=True, num_classes=100 if reduced else 1000)
    return _Logits(net), image(reduced, small=96)


def inception_v3(reduced):
    net = tvm.inception_v3(aux_logits=False, init_weights=True,
                           num_classes=100 if reduced else 1000)
    return _Logits(net), image(reduced, full=299, small=96)


def squeezenet(reduced):
    return tvm.squeezenet1_1(num_classes=100 if reduced else 1000), image(reduced)


def shufflenet_v2(reduced):
    if reduced:
        return tvm.shufflenet_v2_x0_5(num_classes=100), image(True)
    return tvm.shufflenet_v2_x1_0(), image(False)


def mnasnet(reduced):
    if reduced:
        return tvm.mnasnet0_5(num_classes=100), image(True)
    return tvm.mnasnet1_0(), image(False)


def convnext_tiny(reduced):
    if reduced:
        setting = [tvm.convnext.CNBlockConfig(32, 64, 1), tvm.convnext.CNBlockConfig(64, 128, 1),
                   tvm.convnext.CNBlockConfig(128, 256, 2), tvm.convnext.CNBlockConfig(256, None, 1)]
        return tvm.convnext.ConvNeXt(setting, num_classes=100), image(True)
    return tvm.convnext_tiny(), image(False)


def vgg11(reduced):
    if reduced:
        features = tvm.vgg.make_layers([16, "M", 32, "M", 64, 64, "M", 128, 128, "M"],
                                       batch_norm=False)
        net = tvm.vgg.VGG(features, num_classes=100)
        # VGG's head is sized for 512 x 7 x 7 features; a narrow one keeps the op mix.
        net.avgpool = nn.AdaptiveAvgPool2d((2, 2))
        net.classifier = nn.Sequential(nn.Linear(128 * 4, 256), nn.ReLU(True), nn.Dropout(),
                                       nn.Linear(256, 256), nn.ReLU(True), nn.Dropout(),
                                       nn.Linear(256, 100))
        return net, image(True)
    return tvm.vgg11_bn(), image(False)


def alexnet(reduced):
    net = tvm.alexnet(num_classes=100 if reduced else 1000)
    if reduced:
        net.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        net.classifier = nn.Sequential(nn.Dropout(), nn.Linear(256, 256), nn.ReLU(True),
                                       nn.Linear(256, 100))
    return net, image(reduced)


def vit(reduced):
    if reduced:
        net = tvm.vision_transformer.VisionTransformer(image_size=64, patch_size=16, num_layers=2,
                                                       num_heads=4, hidden_dim=128, mlp_dim=256,
                                                       num_classes=100)
        return net, image(True)
    return tvm.vit_b_16(), image(False)


def swin_t(reduced):
    if reduced:
        # Two blocks per stage: every second block shifts its windows (the attention mask built
        # with ScatterND, Roll as Slice/Concat).
        net = tvm.swin_transformer.SwinTransformer(patch_size=[4, 4], embed_dim=32, depths=[2, 2],
                                                   num_heads=[2, 4], window_size=[4, 4],
                                                   num_classes=100)
        return net, image(True)
    return tvm.swin_t(), image(False)


# --- dense prediction ------------------------------------------------------------------------

class _SegmentationOut(nn.Module):
    """torchvision's segmentation models return {'out': ...}; export the tensor."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        return self.net(x)["out"]


def deeplabv3_mobilenet(reduced):
    net = torchvision.models.segmentation.deeplabv3_mobilenet_v3_large(
        weights=None, weights_backbone=None, num_classes=21, aux_loss=False)
    return _SegmentationOut(net), image(reduced, full=320, small=96)


class _ConvBnRelu(nn.Sequential):
    def __init__(self, inputs, outputs):
        super().__init__(nn.Conv2d(inputs, outputs, 3, padding=1, bias=False),
                         nn.BatchNorm2d(outputs), nn.ReLU(inplace=True))


class UNet(nn.Module):
    """The original U-Net's shape: a max-pooling encoder, a decoder upsampling with 2x2
    stride-2 ConvTranspose, skip connections joined by Concat, a 1x1 head."""

    def __init__(self, width, depth, classes=2):
        super().__init__()
        channels = [width * 2**i for i in range(depth + 1)]
        self.down = nn.ModuleList()
        inputs = 3
        for c in channels[:-1]:
            self.down.append(nn.Sequential(_ConvBnRelu(inputs, c), _ConvBnRelu(c, c)))
            inputs = c
        self.middle = nn.Sequential(_ConvBnRelu(channels[-2], channels[-1]),
                                    _ConvBnRelu(channels[-1], channels[-1]))
        self.upsample = nn.ModuleList(nn.ConvTranspose2d(channels[d + 1], channels[d], 2, 2)
                                      for d in reversed(range(depth)))
        self.up = nn.ModuleList(nn.Sequential(_ConvBnRelu(2 * channels[d], channels[d]),
                                              _ConvBnRelu(channels[d], channels[d]))
                                for d in reversed(range(depth)))
        self.head = nn.Conv2d(width, classes, 1)

    def forward(self, x):
        skips = []
        for block in self.down:
            x = block(x)
            skips.append(x)
            x = F.max_pool2d(x, 2)
        x = self.middle(x)
        for upsample, block in zip(self.upsample, self.up):
            x = block(torch.cat([upsample(x), skips.pop()], 1))
        return self.head(x)


def unet(reduced):
    width, depth = (8, 3) if reduced else (32, 4)
    return UNet(width, depth), image(reduced, full=256, small=64)


class _ConvBnSiLU(nn.Module):
    def __init__(self, inputs, outputs, kernel=1, stride=1):
        super().__init__()
        self.conv = nn.Conv2d(inputs, outputs, kernel, stride, kernel // 2, bias=False)
        self.norm = nn.BatchNorm2d(outputs)

    def forward(self, x):
        return F.silu(self.norm(self.conv(x)))


class _CrossStage(nn.Module):
    """YOLOv5's C3 block: one half through residual bottlenecks, Split/Concat with the other."""

    def __init__(self, inputs, outputs, blocks):
        super().__init__()
        half = outputs // 2
        self.split = _ConvBnSiLU(inputs, 2 * half)
        self.blocks = nn.Sequential(*[nn.Sequential(_ConvBnSiLU(half, half),
                                                    _ConvBnSiLU(half, half, 3))
                                      for _ in range(blocks)])
        self.join = _ConvBnSiLU(2 * half, outputs)

    def forward(self, x):
        a, b = self.split(x).chunk(2, 1)
        return self.join(torch.cat([self.blocks(a) + a, b], 1))


class _SpatialPyramidPool(nn.Module):
    """YOLOv5's SPPF: three chained 5x5 stride-1 max pools, concatenated."""

    def __init__(self, channels):
        super().__init__()
        self.reduce = _ConvBnSiLU(channels, channels // 2)
        self.expand = _ConvBnSiLU(channels * 2, channels)

    def forward(self, x):
        x = self.reduce(x)
        pooled = [x]
        for _ in range(3):
            pooled.append(F.max_pool2d(pooled[-1], 5, 1, 2))
        return self.expand(torch.cat(pooled, 1))


class Detector(nn.Module):
    """A YOLOv5-style one-stage detector: SiLU convolutions, C3 blocks, SPPF, a feature pyramid
    with nearest upsampling (Resize) and Concat, and sigmoid heads reshaped to [N, boxes, 5 +
    classes] (Reshape/Transpose)."""

    def __init__(self, width, classes):
        super().__init__()
        w = width
        self.stem = _ConvBnSiLU(3, w, 3, 2)
        self.stage2 = nn.Sequential(_ConvBnSiLU(w, 2 * w, 3, 2), _CrossStage(2 * w, 2 * w, 1))
        self.stage3 = nn.Sequential(_ConvBnSiLU(2 * w, 4 * w, 3, 2), _CrossStage(4 * w, 4 * w, 2))
        self.stage4 = nn.Sequential(_ConvBnSiLU(4 * w, 8 * w, 3, 2), _CrossStage(8 * w, 8 * w, 3))
        self.stage5 = nn.Sequential(_ConvBnSiLU(8 * w, 16 * w, 3, 2),
                                    _CrossStage(16 * w, 16 * w, 1), _SpatialPyramidPool(16 * w))
        self.lateral5 = _ConvBnSiLU(16 * w, 8 * w)
        self.merge4 = _CrossStage(16 * w, 8 * w, 1)
        self.lateral4 = _ConvBnSiLU(8 * w, 4 * w)
        self.merge3 = _CrossStage(8 * w, 4 * w, 1)
        self.outputs = 5 + classes
        self.heads = nn.ModuleList([nn.Conv2d(4 * w, 3 * self.outputs, 1),
                                    nn.Conv2d(8 * w, 3 * self.outputs, 1)])

    def forward(self, x):
        p3 = self.stage3(self.stage2(self.stem(x)))
        p4 = self.stage4(p3)
        p5 = self.stage5(p4)
        up = F.interpolate(self.lateral5(p5), scale_factor=2.0, mode="nearest")
        f4 = self.merge4(torch.cat([up, p4], 1))
        up = F.interpolate(self.lateral4(f4), scale_factor=2.0, mode="nearest")
        f3 = self.merge3(torch.cat([up, p3], 1))
        boxes = []
        for head, features in zip(self.heads, (f3, f4)):
            y = head(features)
            n, _, h, w = y.shape
            y = y.view(n, 3, self.outputs, h, w).permute(0, 1, 3, 4, 2).sigmoid()
            boxes.append(y.reshape(n, -1, self.outputs))
        return torch.cat(boxes, 1)


def yolo_detector(reduced):
    width, classes = (8, 4) if reduced else (32, 80)
    return Detector(width, classes), image(reduced, full=320, small=96)


def r3d_18(reduced):
    """torchvision's 3-D ResNet-18 for video (Conv3d, BatchNorm3d, 3-D pooling) over a clip."""
    if reduced:
        net = tvm.video.resnet.VideoResNet(tvm.video.resnet.BasicBlock,
                                           [tvm.video.resnet.Conv3DSimple] * 4, [1, 1, 1, 1],
                                           tvm.video.resnet.BasicStem, num_classes=10)
        return net, [("input", torch.randn(1, 3, 4, 32, 32))]
    return tvm.video.r3d_18(weights=None), [("input", torch.randn(1, 3, 8, 112, 112))]


class _ReflectResidual(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.body = nn.Sequential(
            nn.ReflectionPad2d(1), nn.Conv2d(channels, channels, 3), nn.InstanceNorm2d(channels),
            nn.ReLU(True), nn.ReflectionPad2d(1), nn.Conv2d(channels, channels, 3),
            nn.InstanceNorm2d(channels))

    def forward(self, x):
        return x + self.body(x)


class CycleGanGenerator(nn.Module):
    """CycleGAN's ResNet generator (image-to-image translation, style transfer): reflection
    padding (Pad mode=reflect), InstanceNorm, stride-2 convolutions down, residual blocks, and
    3x3 stride-2 ConvTranspose with output_padding up, Tanh out."""

    def __init__(self, width, blocks):
        super().__init__()
        layers = [nn.ReflectionPad2d(3), nn.Conv2d(3, width, 7), nn.InstanceNorm2d(width),
                  nn.ReLU(True)]
        for m in (1, 2):
            layers += [nn.Conv2d(width * m, width * m * 2, 3, 2, 1),
                       nn.InstanceNorm2d(width * m * 2), nn.ReLU(True)]
        layers += [_ReflectResidual(width * 4) for _ in range(blocks)]
        for m in (4, 2):
            layers += [nn.ConvTranspose2d(width * m, width * m // 2, 3, 2, 1, output_padding=1),
                       nn.InstanceNorm2d(width * m // 2), nn.ReLU(True)]
        layers += [nn.ReflectionPad2d(3), nn.Conv2d(width, 3, 7), nn.Tanh()]
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


def cyclegan_generator(reduced):
    width, blocks = (8, 2) if reduced else (64, 6)
    return CycleGanGenerator(width, blocks), image(reduced, full=256, small=64)


class SuperResolution(nn.Module):
    """ESPCN: convolutions at low resolution, then a sub-pixel shuffle (PixelShuffle, exported as
    DepthToSpace) to 3x the size."""

    def __init__(self, width, factor=3):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, width, 5, padding=2), nn.Tanh(), nn.Conv2d(width, width // 2, 3, padding=1),
            nn.Tanh(), nn.Conv2d(width // 2, factor * factor, 3, padding=1), nn.PixelShuffle(factor))

    def forward(self, x):
        return self.net(x)


def espcn(reduced):
    size = 48 if reduced else 224
    return SuperResolution(16 if reduced else 64), [("input", torch.randn(1, 1, size, size))]


class MobileFaceNet(nn.Module):
    """A MobileFaceNet-style face embedder: PReLU after every convolution, depthwise and linear
    bottlenecks, a global depthwise 7x7 convolution, an L2-normalized embedding."""

    def __init__(self, width, repeats):
        super().__init__()

        def conv(i, o, k=3, s=1, g=1):
            return nn.Sequential(nn.Conv2d(i, o, k, s, k // 2, groups=g, bias=False),
                                 nn.BatchNorm2d(o), nn.PReLU(o))

        layers = [conv(3, width, 3, 2), conv(width, width, 3, 1, width)]
        c = width
        for out, stride, n in ((width, 2, repeats), (2 * width, 2, 1), (2 * width, 1, repeats),
                               (2 * width, 2, 1), (2 * width, 1, 2)):
            for i in range(n):
                layers += [conv(c, 2 * c, 1), conv(2 * c, 2 * c, 3, stride if i == 0 else 1, 2 * c),
                           nn.Conv2d(2 * c, out, 1, bias=False), nn.BatchNorm2d(out)]
                c = out
        layers += [conv(c, 8 * width, 1), nn.Conv2d(8 * width, 8 * width, 7, groups=8 * width,
                                                    bias=False), nn.Flatten(),
                   nn.Linear(8 * width, 128)]
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return F.normalize(self.net(x), dim=1)


def mobilefacenet(reduced):
    width, repeats = (16, 1) if reduced else (64, 4)
    return MobileFaceNet(width, repeats), image(reduced, full=112, small=112)


# --- sequence models -------------------------------------------------------------------------

class Recurrent(nn.Module):
    """Two stacked LSTM layers, then a bidirectional GRU, then a linear head on every step: the
    ONNX LSTM and GRU ops with their initial states, directions and sequence outputs."""

    def __init__(self, features, hidden, classes):
        super().__init__()
        self.lstm = nn.LSTM(features, hidden, num_layers=2, batch_first=True)
        self.gru = nn.GRU(hidden, hidden, batch_first=True, bidirectional=True)
        self.head = nn.Linear(2 * hidden, classes)

    def forward(self, x):
        x, _ = self.lstm(x)
        x, _ = self.gru(x)
        return self.head(x)


def recurrent(reduced):
    features, hidden, steps = (16, 32, 12) if reduced else (128, 256, 64)
    net = Recurrent(features, hidden, 10)
    return net, [("input", torch.randn(1, steps, features))]


class BertLayer(nn.Module):
    def __init__(self, hidden, heads, intermediate):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)
        self.norm1 = nn.LayerNorm(hidden, eps=1e-12)
        self.ffn = nn.Sequential(nn.Linear(hidden, intermediate), nn.GELU(),
                                 nn.Linear(intermediate, hidden))
        self.norm2 = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x, additive_mask):
        b, s, h = x.shape
        q, k, v = self.qkv(x).split(h, dim=-1)
        q, k, v = (t.reshape(b, s, self.heads, self.head_dim).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim) + additive_mask
        context = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, h)
        x = self.norm1(x + self.out(context))
        return self.norm2(x + self.ffn(x))


class Bert(nn.Module):
    """A BERT-style encoder as Hugging Face exports it: token ids, an attention mask, word +
    position + token-type embeddings (Gather), the mask broadcast to an additive bias, a pooled
    first token."""

    def __init__(self, vocab, hidden, heads, intermediate, layers, max_positions):
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.position = nn.Embedding(max_positions, hidden)
        self.token_type = nn.Embedding(2, hidden)
        self.norm = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.ModuleList(BertLayer(hidden, heads, intermediate) for _ in range(layers))
        self.pool = nn.Linear(hidden, hidden)

    def forward(self, input_ids, attention_mask):
        seq = input_ids.shape[1]
        positions = torch.arange(seq, device=input_ids.device).unsqueeze(0)
        x = self.word(input_ids) + self.position(positions) + self.token_type(
            torch.zeros_like(input_ids))
        x = self.norm(x)
        mask = attention_mask[:, None, None, :].to(x.dtype)
        additive = (1.0 - mask) * torch.finfo(x.dtype).min
        for layer in self.layers:
            x = layer(x, additive)
        return torch.tanh(self.pool(x[:, 0]))


def token_inputs(batch, seq, vocab):
    ids = torch.randint(0, vocab, (batch, seq), dtype=torch.int64)
    mask = torch.ones(batch, seq, dtype=torch.int64)
    mask[:, seq - seq // 4:] = 0  # padded tail: the mask must really mask
    return [("input_ids", ids), ("attention_mask", mask)]


def bert_tokens(reduced):
    if reduced:
        vocab, hidden, heads, inter, layers, seq = 1000, 64, 4, 128, 2, 16
    else:
        vocab, hidden, heads, inter, layers, seq = 30522, 768, 12, 3072, 4, 128
    net = Bert(vocab, hidden, heads, inter, layers, 512)
    return net, token_inputs(1, seq, vocab)


class GptBlock(nn.Module):
    def __init__(self, hidden, heads, max_positions):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.norm1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.norm2 = nn.LayerNorm(hidden)
        self.fc = nn.Linear(hidden, 4 * hidden)
        self.fc_out = nn.Linear(4 * hidden, hidden)
        causal = torch.tril(torch.ones(max_positions, max_positions, dtype=torch.bool))
        self.register_buffer("causal", causal.view(1, 1, max_positions, max_positions))

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(h, dim=-1)
        q, k, v = (t.view(b, s, self.heads, self.head_dim).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(self.head_dim))
        scores = scores.masked_fill(~self.causal[:, :, :s, :s], float("-inf"))
        context = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, h)
        x = x + self.proj(context)
        return x + self.fc_out(F.gelu(self.fc(self.norm2(x)), approximate="tanh"))


class Gpt(nn.Module):
    """A GPT-2-style decoder: token and position embeddings, pre-norm blocks with a causal mask
    (Where), tanh-GELU MLPs, a tied LM head."""

    def __init__(self, vocab, hidden, heads, layers, max_positions):
        super().__init__()
        self.token = nn.Embedding(vocab, hidden)
        self.position = nn.Embedding(max_positions, hidden)
        self.blocks = nn.ModuleList(GptBlock(hidden, heads, max_positions) for _ in range(layers))
        self.norm = nn.LayerNorm(hidden)

    def forward(self, input_ids):
        positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        x = self.token(input_ids) + self.position(positions)
        for block in self.blocks:
            x = block(x)
        return self.norm(x) @ self.token.weight.t()


def gpt_decoder(reduced):
    if reduced:
        vocab, hidden, heads, layers, seq = 512, 64, 4, 2, 16
    else:
        vocab, hidden, heads, layers, seq = 8192, 512, 8, 4, 128
    net = Gpt(vocab, hidden, heads, layers, 256)
    return net, [("input_ids", torch.randint(0, vocab, (1, seq), dtype=torch.int64))]


class _RmsNorm(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


class T5Layer(nn.Module):
    def __init__(self, hidden, heads, intermediate):
        super().__init__()
        self.heads = heads
        self.norm1 = _RmsNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden, bias=False)
        self.out = nn.Linear(hidden, hidden, bias=False)
        self.norm2 = _RmsNorm(hidden)
        self.gate = nn.Linear(hidden, intermediate, bias=False)
        self.up = nn.Linear(hidden, intermediate, bias=False)
        self.down = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x, position_bias):
        b, s, h = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, self.heads, h // self.heads).permute(
            2, 0, 3, 1, 4)
        context = torch.softmax(q @ k.transpose(-1, -2) + position_bias, -1) @ v
        x = x + self.out(context.transpose(1, 2).reshape(b, s, h))
        y = self.norm2(x)
        return x + self.down(F.gelu(self.gate(y), approximate="tanh") * self.up(y))


class T5Encoder(nn.Module):
    """A T5-style encoder: RMSNorm (Pow, ReduceMean, Sqrt, Reciprocal), unscaled attention with a
    learned additive position bias, gated tanh-GELU feed-forward, no biases."""

    def __init__(self, hidden, heads, intermediate, layers, seq):
        super().__init__()
        self.layers = nn.ModuleList(T5Layer(hidden, heads, intermediate) for _ in range(layers))
        self.position_bias = nn.Parameter(torch.randn(1, heads, seq, seq) * 0.1)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x, self.position_bias)
        return x


def t5_encoder(reduced):
    hidden, heads, inter, layers, seq = (64, 4, 128, 2, 16) if reduced else (512, 8, 1024, 6, 128)
    return T5Encoder(hidden, heads, inter, layers, seq), [("input", torch.randn(1, seq, hidden))]


class ConformerBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ffn1 = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.SiLU(),
                                  nn.Linear(4 * d, d))
        self.norm_attention = nn.LayerNorm(d)
        self.attention = nn.MultiheadAttention(d, heads, batch_first=True)
        self.norm_conv = nn.LayerNorm(d)
        self.pointwise1 = nn.Conv1d(d, 2 * d, 1)
        self.depthwise = nn.Conv1d(d, d, 31, padding=15, groups=d)
        self.norm_depthwise = nn.BatchNorm1d(d)
        self.pointwise2 = nn.Conv1d(d, d, 1)
        self.ffn2 = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.SiLU(),
                                  nn.Linear(4 * d, d))
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        x = x + 0.5 * self.ffn1(x)
        y = self.norm_attention(x)
        x = x + self.attention(y, y, y, need_weights=False)[0]
        y = F.glu(self.pointwise1(self.norm_conv(x).transpose(1, 2)), dim=1)
        y = self.pointwise2(F.silu(self.norm_depthwise(self.depthwise(y))))
        x = x + y.transpose(1, 2)
        return self.norm(x + 0.5 * self.ffn2(x))


class Conformer(nn.Module):
    """A Conformer speech encoder: 2-D convolution subsampling of filterbank features, then
    blocks of macaron feed-forward (SiLU), multi-head attention (nn.MultiheadAttention), and a
    convolution module (GLU, a 31-tap depthwise Conv1d, BatchNorm1d)."""

    def __init__(self, d, heads, layers, features):
        super().__init__()
        self.subsample = nn.Sequential(nn.Conv2d(1, d, 3, 2), nn.ReLU(), nn.Conv2d(d, d, 3, 2),
                                       nn.ReLU())
        reduced_features = ((features - 1) // 2 - 1) // 2
        self.project = nn.Linear(d * reduced_features, d)
        self.blocks = nn.Sequential(*[ConformerBlock(d, heads) for _ in range(layers)])

    def forward(self, features):
        y = self.subsample(features.unsqueeze(1))
        n, c, t, f = y.shape
        return self.blocks(self.project(y.permute(0, 2, 1, 3).reshape(n, t, c * f)))


def conformer(reduced):
    d, heads, layers, frames = (64, 4, 2, 64) if reduced else (256, 4, 6, 400)
    return Conformer(d, heads, layers, 80), [("input", torch.randn(1, frames, 80))]


class EinsumEncoderLayer(nn.Module):
    """A pre-norm encoder layer whose attention is written with torch.einsum (exported as Einsum),
    as research code and some model libraries write it."""

    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)
        self.norm1 = nn.LayerNorm(hidden)
        self.norm2 = nn.LayerNorm(hidden)
        self.ffn = nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.GELU(),
                                 nn.Linear(4 * hidden, hidden))

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, self.heads, d // self.heads).unbind(2)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) * (d // self.heads) ** -0.5
        context = torch.einsum("bhqk,bkhd->bqhd", scores.softmax(-1), v).reshape(b, s, d)
        x = x + self.out(context)
        return x + self.ffn(self.norm2(x))


def einsum_encoder(reduced):
    hidden, heads, layers, seq = (64, 4, 2, 16) if reduced else (512, 8, 6, 128)
    net = nn.Sequential(*[EinsumEncoderLayer(hidden, heads) for _ in range(layers)])
    return net, [("input", torch.randn(1, seq, hidden))]


# name -> (factory, whether the leading (batch) axis is exported as dynamic)
ZOO = {
    "resnet18": (resnet18, True),
    "resnext50": (resnext50, True),
    "wide_resnet50": (wide_resnet50, True),
    "mobilenet_v3_large": (mobilenet_v3_large, True),
    "mobilenet_v3_small": (mobilenet_v3_small, True),
    "efficientnet_b0": (efficientnet_b0, True),
    "efficientnet_v2_s": (efficientnet_v2_s, True),
    "regnet_y_400mf": (regnet_y_400mf, True),
    "regnet_x_400mf": (regnet_x_400mf, True),
    "densenet121": (densenet121, True),
    "googlenet": (googlenet, True),
    "inception_v3": (inception_v3, True),
    "squeezenet": (squeezenet, True),
    "shufflenet_v2": (shufflenet_v2, True),
    "mnasnet": (mnasnet, True),
    "convnext_tiny": (convnext_tiny, True),
    "vgg11": (vgg11, True),
    "alexnet": (alexnet, True),
    "vit": (vit, True),
    "swin_t": (swin_t, False),
    "deeplabv3_mobilenet": (deeplabv3_mobilenet, True),
    "unet": (unet, True),
    "yolo_detector": (yolo_detector, True),
    "r3d_18": (r3d_18, True),
    "cyclegan_generator": (cyclegan_generator, True),
    "espcn": (espcn, True),
    "mobilefacenet": (mobilefacenet, True),
    "recurrent": (recurrent, False),
    "bert_tokens": (bert_tokens, False),
    "gpt_decoder": (gpt_decoder, False),
    "t5_encoder": (t5_encoder, False),
    "conformer": (conformer, False),
    "einsum_encoder": (einsum_encoder, False),
}
