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


class _GhostModule(nn.Module):
    """Half the output channels by a 1x1 convolution, the other half by a cheap depthwise 3x3
    convolution of the first, concatenated and sliced back to the width asked for."""

    def __init__(self, inputs, outputs, relu=True):
        super().__init__()
        self.outputs = outputs
        half = math.ceil(outputs / 2)
        activation = nn.ReLU() if relu else nn.Identity()
        self.primary = nn.Sequential(nn.Conv2d(inputs, half, 1, bias=False),
                                     nn.BatchNorm2d(half), activation)
        self.cheap = nn.Sequential(nn.Conv2d(half, half, 3, 1, 1, groups=half, bias=False),
                                   nn.BatchNorm2d(half), activation)

    def forward(self, x):
        primary = self.primary(x)
        return torch.cat([primary, self.cheap(primary)], 1)[:, :self.outputs]


class _GhostBottleneck(nn.Module):
    def __init__(self, inputs, middle, outputs, kernel, stride, squeeze):
        super().__init__()
        self.expand = _GhostModule(inputs, middle)
        self.depthwise = (nn.Sequential(nn.Conv2d(middle, middle, kernel, stride, kernel // 2,
                                                  groups=middle, bias=False),
                                        nn.BatchNorm2d(middle))
                          if stride > 1 else nn.Identity())
        self.squeeze = (nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(middle, middle // 4, 1),
                                      nn.ReLU(), nn.Conv2d(middle // 4, middle, 1),
                                      nn.Hardsigmoid()) if squeeze else None)
        self.project = _GhostModule(middle, outputs, relu=False)
        self.shortcut = (nn.Identity() if inputs == outputs and stride == 1 else nn.Sequential(
            nn.Conv2d(inputs, inputs, kernel, stride, kernel // 2, groups=inputs, bias=False),
            nn.BatchNorm2d(inputs), nn.Conv2d(inputs, outputs, 1, bias=False),
            nn.BatchNorm2d(outputs)))

    def forward(self, x):
        y = self.depthwise(self.expand(x))
        if self.squeeze is not None:
            y = y * self.squeeze(y)
        return self.project(y) + self.shortcut(x)


class GhostNet(nn.Module):
    """GhostNet (Han et al., 2020): ghost modules (a 1x1 convolution, a cheap depthwise one,
    Concat, a channel Slice back to the module's width), squeeze-excitation with a hard sigmoid,
    strided depthwise convolutions, a 1x1 head convolution after global pooling."""

    # kernel, middle width, output width, squeeze-excitation, stride (GhostNet 1.0's table)
    FULL = [(3, 16, 16, 0, 1), (3, 48, 24, 0, 2), (3, 72, 24, 0, 1), (5, 72, 40, 1, 2),
            (5, 120, 40, 1, 1), (3, 240, 80, 0, 2), (3, 200, 80, 0, 1), (3, 184, 80, 0, 1),
            (3, 184, 80, 0, 1), (3, 480, 112, 1, 1), (3, 672, 112, 1, 1), (5, 672, 160, 1, 2),
            (5, 960, 160, 0, 1), (5, 960, 160, 1, 1), (5, 960, 160, 0, 1), (5, 960, 160, 1, 1)]
    # odd widths too, so that some slices cut a channel
    REDUCED = [(3, 16, 16, 0, 1), (3, 48, 24, 0, 2), (5, 72, 41, 1, 2), (3, 120, 40, 1, 1),
               (3, 160, 56, 0, 2)]

    def __init__(self, table, classes):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16),
                                  nn.ReLU())
        blocks, width = [], 16
        for kernel, middle, outputs, squeeze, stride in table:
            blocks.append(_GhostBottleneck(width, middle, outputs, kernel, stride, squeeze))
            width = outputs
        self.blocks = nn.Sequential(*blocks)
        head = 6 * width
        self.head = nn.Sequential(nn.Conv2d(width, head, 1, bias=False), nn.BatchNorm2d(head),
                                  nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Conv2d(head, 1280, 1),
                                  nn.ReLU())
        self.classifier = nn.Linear(1280, classes)

    def forward(self, x):
        return self.classifier(self.head(self.blocks(self.stem(x))).flatten(1))


def ghostnet(reduced):
    if reduced:
        return GhostNet(GhostNet.REDUCED, 100), image(True)
    return GhostNet(GhostNet.FULL, 1000), image(False)


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


def _register_aten_zero():
    """torch 1.13 cannot export the in-place `qkv_bias[length:2 * length].zero_()` of
    torchvision's shifted_window_attention for V2 blocks ("Exporting the operator 'aten::zero' to
    ONNX opset version 17 is not supported"). Zeros of the input's shape (Shape, ConstantOfShape)
    are what it means; the exporter writes them back into the slice of the cloned bias."""
    from torch.onnx import register_custom_op_symbolic

    def zero(g, self):
        return g.op("ConstantOfShape", g.op("Shape", self), value_t=torch.tensor([0.0]))

    register_custom_op_symbolic("aten::zero", zero, 17)  # export_models.py's OPSET


def swin_v2_t(reduced):
    """Swin-V2-T: cosine attention (normalize, a clamped and exponentiated logit scale), a
    continuous position bias from a small MLP over log-spaced coordinates (Sign, Log, Sigmoid),
    post-norm residuals, PatchMergingV2, shifted windows."""
    _register_aten_zero()
    if reduced:
        # Two blocks per stage, as swin_t's reduced variant: the second shifts its windows.
        net = tvm.swin_transformer.SwinTransformer(
            patch_size=[4, 4], embed_dim=32, depths=[2, 2], num_heads=[2, 4], window_size=[4, 4],
            block=tvm.swin_transformer.SwinTransformerBlockV2,
            downsample_layer=tvm.swin_transformer.PatchMergingV2, num_classes=100)
        return net, image(True)
    return tvm.swin_v2_t(), image(False, full=256)


def maxvit_t(reduced):
    """MaxViT-T: MBConv blocks (BatchNorm, depthwise convolution, squeeze-excitation), then block
    attention and grid attention with a relative position bias, windows partitioned by
    Reshape/Transpose."""
    if reduced:
        # partition_size must divide every stage's map: 64x64 gives 16x16 and 8x8 stages.
        net = tvm.maxvit.MaxVit(input_size=(64, 64), stem_channels=16, partition_size=4,
                                block_channels=[32, 64], block_layers=[1, 1], head_dim=16,
                                stochastic_depth_prob=0.0, num_classes=100)
        return net, image(True)
    return tvm.maxvit_t(), image(False)


class _MixerBlock(nn.Module):
    def __init__(self, d, tokens, token_mlp, channel_mlp):
        super().__init__()
        self.norm1 = nn.LayerNorm(d, eps=1e-6)
        self.tokens = nn.Sequential(nn.Linear(tokens, token_mlp), nn.GELU(),
                                    nn.Linear(token_mlp, tokens))
        self.norm2 = nn.LayerNorm(d, eps=1e-6)
        self.channels = nn.Sequential(nn.Linear(d, channel_mlp), nn.GELU(),
                                      nn.Linear(channel_mlp, d))

    def forward(self, x):
        x = x + self.tokens(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channels(self.norm2(x))


class MlpMixer(nn.Module):
    """MLP-Mixer: a stride-patch convolution, blocks of token-mixing MLPs (Linear over the
    transposed token axis) and channel MLPs with exact GELU, a mean pool, a head."""

    def __init__(self, d, layers, token_mlp, channel_mlp, patch, size, classes):
        super().__init__()
        tokens = (size // patch) ** 2
        self.stem = nn.Conv2d(3, d, patch, patch)
        self.blocks = nn.Sequential(*[_MixerBlock(d, tokens, token_mlp, channel_mlp)
                                      for _ in range(layers)])
        self.norm = nn.LayerNorm(d, eps=1e-6)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        x = self.stem(x).flatten(2).transpose(1, 2)
        return self.head(self.norm(self.blocks(x)).mean(1))


def mlp_mixer(reduced):
    if reduced:
        return MlpMixer(64, 2, 32, 128, patch=8, size=64, classes=100), image(True)
    return MlpMixer(768, 12, 384, 3072, patch=16, size=224, classes=1000), image(False)  # B/16


def _conv_bn_silu(i, o, k=3, s=1, g=1, act=True):
    layers = [nn.Conv2d(i, o, k, s, k // 2, groups=g, bias=False), nn.BatchNorm2d(o)]
    if act:
        layers.append(nn.SiLU())
    return nn.Sequential(*layers)


class _InvertedResidual(nn.Module):
    def __init__(self, i, o, s, expand=4):
        super().__init__()
        h = i * expand
        self.residual = s == 1 and i == o
        self.body = nn.Sequential(_conv_bn_silu(i, h, 1), _conv_bn_silu(h, h, 3, s, h),
                                  _conv_bn_silu(h, o, 1, act=False))

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


class _MobileVitTransformer(nn.Module):
    def __init__(self, d, heads, ff):
        super().__init__()
        self.norm1 = nn.LayerNorm(d)
        self.attention = nn.MultiheadAttention(d, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, ff), nn.SiLU(), nn.Linear(ff, d))

    def forward(self, x):
        y = self.norm1(x)
        x = x + self.attention(y, y, y, need_weights=False)[0]
        return x + self.ff(self.norm2(x))


class _MobileVitBlock(nn.Module):
    """A local 3x3 convolution and a 1x1 to d channels, an unfold into 2x2 patches
    (Reshape/Transpose to [B*4, N, d]), pre-norm transformer layers, the fold back, a 1x1 to C
    channels, Concat with the input and a 3x3 fusion convolution."""

    def __init__(self, c, d, depth, ff, patch=2, heads=4):
        super().__init__()
        self.p = patch
        self.local = nn.Sequential(_conv_bn_silu(c, c, 3), nn.Conv2d(c, d, 1, bias=False))
        self.transformer = nn.Sequential(*[_MobileVitTransformer(d, heads, ff)
                                           for _ in range(depth)], nn.LayerNorm(d))
        self.project = _conv_bn_silu(d, c, 1)
        self.fuse = _conv_bn_silu(2 * c, c, 3)

    def forward(self, x):
        y = self.local(x)
        b, d, h, w = y.shape
        p = self.p
        y = y.reshape(b, d, h // p, p, w // p, p).permute(0, 3, 5, 2, 4, 1).reshape(
            b * p * p, (h // p) * (w // p), d)
        y = self.transformer(y)
        y = y.reshape(b, p, p, h // p, w // p, d).permute(0, 5, 3, 1, 4, 2).reshape(b, d, h, w)
        return self.fuse(torch.cat([x, self.project(y)], 1))


class MobileVit(nn.Module):
    """MobileViT: MobileNetV2 inverted residuals with SiLU, and MobileViT blocks (convolutions
    around transformer layers over unfolded patches) at the last three strides."""

    def __init__(self, widths, dims, depths, last, classes):
        super().__init__()
        w = widths
        layers = [_conv_bn_silu(3, w[0], 3, 2), _InvertedResidual(w[0], w[1], 1),
                  _InvertedResidual(w[1], w[2], 2), _InvertedResidual(w[2], w[2], 1),
                  _InvertedResidual(w[2], w[2], 1)]
        for i, (d, depth) in enumerate(zip(dims, depths)):
            layers += [_InvertedResidual(w[2 + i], w[3 + i], 2),
                       _MobileVitBlock(w[3 + i], d, depth, 2 * d)]
        layers += [_conv_bn_silu(w[-1], last, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                   nn.Linear(last, classes)]
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


def mobilevit_xs(reduced):
    if reduced:
        # 128x128 so that the last MobileViT block still has 2x2 patches of 2x2 pixels.
        net = MobileVit((8, 16, 16, 24, 32, 40), (32, 48, 64), (1, 1, 1), 160, 100)
        return net, image(True, small=128)
    # Apple's XS configuration at 256x256.
    net = MobileVit((16, 32, 48, 64, 80, 96), (96, 120, 144), (2, 4, 3), 384, 1000)
    return net, image(False, full=256)


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


def lraspp_mobilenet(reduced):
    """LR-ASPP: a dilated MobileNetV3-Large, a sigmoid-gated global-pool branch multiplied into
    the high-level features, a low-level skip, bilinear Resizes to computed sizes."""
    if reduced:
        backbone = tvm.mobilenet_v3_large(width_mult=0.5, dilated=True)
        net = torchvision.models.segmentation.lraspp._lraspp_mobilenetv3(backbone, 21)
        return _SegmentationOut(net), image(True, small=96)
    net = torchvision.models.segmentation.lraspp_mobilenet_v3_large(
        weights=None, weights_backbone=None, num_classes=21)
    return _SegmentationOut(net), image(False, full=512)


class _Detections(nn.Module):
    """torchvision's detectors return a list of {boxes, scores, labels} per image: export the first
    image's as one tensor [K, 6] (box, score, label), K decided by NMS at run time."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        # calibrate_batch_norms (export_models.py) puts the module in train mode so that its
        # BatchNorms collect statistics: the SSD must still take its inference path then (no
        # targets, postprocessing).
        self.net.training = False
        self.net.transform.training = False
        found = self.net(x)[0]
        return torch.cat([found["boxes"], found["scores"][:, None],
                          found["labels"][:, None].to(found["boxes"].dtype)], 1)


def _small_ssdlite(size, classes):
    """ssdlite320_mobilenet_v3_large's construction at another size, with a half-width backbone
    and extra layers and fewer classes and candidates."""
    from torchvision.models.detection import _utils as det_utils
    from torchvision.models.detection import anchor_utils, ssd, ssdlite

    norm = lambda c: nn.BatchNorm2d(c, eps=0.001, momentum=0.03)  # noqa: E731 (as torchvision)
    features = tvm.mobilenet_v3_large(width_mult=0.5, norm_layer=norm, reduced_tail=True).features
    stages = [0] + [i for i, b in enumerate(features) if getattr(b, "_is_cn", False)]
    backbone = ssdlite.SSDLiteFeatureExtractorMobileNet(features, stages[-1], norm, width_mult=0.5)
    anchors = anchor_utils.DefaultBoxGenerator([[2, 3] for _ in range(6)], min_ratio=0.2,
                                               max_ratio=0.95)
    head = ssdlite.SSDLiteHead(det_utils.retrieve_out_channels(backbone, size),
                               anchors.num_anchors_per_location(), classes, norm)
    return ssd.SSD(backbone, anchors, size, classes, head=head, score_thresh=0.001,
                   nms_thresh=0.55, detections_per_img=100, topk_candidates=100,
                   image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])


def ssdlite_full(reduced):
    """SSDlite320 (MobileNetV3-Large, depthwise extra layers and heads) with all of its
    postprocessing: the transform's normalization and Resize, softmax scores, anchor decoding,
    per-class score threshold and TopK, batched NonMaxSuppression, Gather of the kept boxes."""
    if reduced:
        # 11 classes over the 522 anchors of a 128x128 image: about a thousand NMS candidates
        # instead of 27,000, the same op mix.
        return _Detections(_small_ssdlite((128, 128), 11)), image(True, small=128)
    net = torchvision.models.detection.ssdlite320_mobilenet_v3_large(
        weights=None, weights_backbone=None, num_classes=91)
    return _Detections(net), image(False, full=320)


class _LastFlow(nn.Module):
    """RAFT returns the flow after every refinement step: export the last."""

    def __init__(self, net, updates):
        super().__init__()
        self.net, self.updates = net, updates

    def forward(self, image1, image2):
        return self.net(image1, image2, num_flow_updates=self.updates)[-1]


def raft_small(reduced):
    """RAFT-small optical flow: bottleneck encoders with InstanceNorm, an all-pairs correlation
    volume (MatMul), a pyramid of average pools, unrolled ConvGRU refinement steps each looking
    the volume up with GridSample, a bilinear upsampling of the flow."""
    if reduced:
        from torchvision.models.optical_flow import raft
        # raft_small's blocks at a quarter to a half of its widths; 3 refinement steps over a
        # 128x160 pair. Not smaller: the coarsest of the 4 correlation levels (16x20 features
        # pooled 3 times: 2x2) must keep 2 pixels a side, or grid_sample's coordinate
        # normalization divides by 0 and torch's own flow is NaN.
        net = raft._raft(
            feature_encoder_layers=(16, 16, 24, 32, 48), feature_encoder_block=raft.BottleneckBlock,
            feature_encoder_norm_layer=nn.InstanceNorm2d,
            context_encoder_layers=(16, 16, 24, 32, 64), context_encoder_block=raft.BottleneckBlock,
            context_encoder_norm_layer=None, corr_block_num_levels=4, corr_block_radius=3,
            motion_encoder_corr_layers=(32,), motion_encoder_flow_layers=(32, 16),
            motion_encoder_out_channels=34, recurrent_block_hidden_state_size=32,
            recurrent_block_kernel_size=(3,), recurrent_block_padding=(1,),
            flow_head_hidden_size=32, use_mask_predictor=False)
        return _LastFlow(net, 3), [("image1", torch.randn(1, 3, 128, 160)),
                                   ("image2", torch.randn(1, 3, 128, 160))]
    return _LastFlow(tvm.optical_flow.raft_small(), 12), [
        ("image1", torch.randn(1, 3, 368, 496)), ("image2", torch.randn(1, 3, 368, 496))]


class _EdsrBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.ReLU(True),
                                  nn.Conv2d(c, c, 3, padding=1))

    def forward(self, x):
        return x + self.body(x)


class Edsr(nn.Module):
    """EDSR-baseline x2 super-resolution: a mean shift (a fixed 1x1 convolution), residual blocks
    of two 3x3 convolutions without BatchNorm, a long skip, a convolution and PixelShuffle(2)
    (DepthToSpace) upsampler."""

    def __init__(self, c, blocks, scale=2):
        super().__init__()
        mean = torch.tensor([0.4488, 0.4371, 0.4040])
        self.sub_mean = nn.Conv2d(3, 3, 1)
        self.add_mean = nn.Conv2d(3, 3, 1)
        with torch.no_grad():
            for conv, sign in ((self.sub_mean, -1), (self.add_mean, 1)):
                conv.weight.copy_(torch.eye(3).view(3, 3, 1, 1))
                conv.bias.copy_(sign * mean)
        self.head = nn.Conv2d(3, c, 3, padding=1)
        self.body = nn.Sequential(*[_EdsrBlock(c) for _ in range(blocks)],
                                  nn.Conv2d(c, c, 3, padding=1))
        self.tail = nn.Sequential(nn.Conv2d(c, c * scale * scale, 3, padding=1),
                                  nn.PixelShuffle(scale), nn.Conv2d(c, 3, 3, padding=1))

    def forward(self, x):
        x = self.head(self.sub_mean(x))
        return self.add_mean(self.tail(x + self.body(x)))


def edsr(reduced):
    if reduced:
        return Edsr(16, 2), image(True, small=32)
    return Edsr(64, 16), image(False, full=128)


def _timestep_embedding(t, dim):
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=t.dtype) / half)
    args = t[:, None] * freqs[None]
    return torch.cat([torch.sin(args), torch.cos(args)], 1)


class _DiffusionResBlock(nn.Module):
    def __init__(self, cin, cout, temb, groups):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.temb = nn.Linear(temb, cout)
        self.norm2 = nn.GroupNorm(groups, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x, temb):
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.temb(F.silu(temb))[:, :, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        return self.skip(x) + h


class _DiffusionAttention(nn.Module):
    def __init__(self, c, groups):
        super().__init__()
        self.norm = nn.GroupNorm(groups, c)
        self.qkv = nn.Conv2d(c, 3 * c, 1)
        self.out = nn.Conv2d(c, c, 1)

    def forward(self, x):
        b, c, h, w = x.shape
        q, k, v = self.qkv(self.norm(x)).reshape(b, 3, c, h * w).unbind(1)
        attention = torch.softmax(q.transpose(1, 2) @ k * (c ** -0.5), -1)  # [b, hw, hw]
        return x + self.out((v @ attention.transpose(1, 2)).reshape(b, c, h, w))


class DiffusionUNet(nn.Module):
    """DDPM's UNet: GroupNorm + SiLU residual blocks with a sinusoidal timestep embedding (Sin,
    Cos, an MLP) added, self-attention over pixels as MatMul/Softmax at the attention
    resolutions, stride-2 convolutions down, nearest Resize up, Concat skips."""

    def __init__(self, ch, mults, blocks, attention_res, res, groups):
        super().__init__()
        self.ch = ch
        temb = 4 * ch
        self.temb = nn.Sequential(nn.Linear(ch, temb), nn.SiLU(), nn.Linear(temb, temb))
        self.conv_in = nn.Conv2d(3, ch, 3, padding=1)
        self.down = nn.ModuleList()
        chans = [ch]
        c, r = ch, res
        for i, m in enumerate(mults):
            for _ in range(blocks):
                self.down.append(nn.ModuleList([
                    _DiffusionResBlock(c, ch * m, temb, groups),
                    _DiffusionAttention(ch * m, groups) if r in attention_res else nn.Identity()]))
                c = ch * m
                chans.append(c)
            if i != len(mults) - 1:
                self.down.append(nn.Conv2d(c, c, 3, 2, 1))
                chans.append(c)
                r //= 2
        self.mid1 = _DiffusionResBlock(c, c, temb, groups)
        self.mid_attention = _DiffusionAttention(c, groups)
        self.mid2 = _DiffusionResBlock(c, c, temb, groups)
        self.up = nn.ModuleList()
        for i, m in reversed(list(enumerate(mults))):
            for _ in range(blocks + 1):
                self.up.append(nn.ModuleList([
                    _DiffusionResBlock(c + chans.pop(), ch * m, temb, groups),
                    _DiffusionAttention(ch * m, groups) if r in attention_res else nn.Identity()]))
                c = ch * m
            if i != 0:
                self.up.append(nn.Conv2d(c, c, 3, padding=1))
                r *= 2
        self.norm_out = nn.GroupNorm(groups, c)
        self.conv_out = nn.Conv2d(c, 3, 3, padding=1)

    def forward(self, x, timestep):
        temb = self.temb(_timestep_embedding(timestep, self.ch))
        h = self.conv_in(x)
        hs = [h]
        for layer in self.down:
            if isinstance(layer, nn.Conv2d):
                h = layer(h)
            else:
                h = layer[1](layer[0](h, temb))
            hs.append(h)
        h = self.mid2(self.mid_attention(self.mid1(h, temb)), temb)
        for layer in self.up:
            if isinstance(layer, nn.Conv2d):
                h = layer(F.interpolate(h, scale_factor=2.0, mode="nearest"))
            else:
                h = layer[1](layer[0](torch.cat([h, hs.pop()], 1), temb))
        return self.conv_out(F.silu(self.norm_out(h)))


def diffusion_unet(reduced):
    # The timestep is a float input; export_models.py redraws float inputs from N(0, 1), so it is
    # a continuous-time timestep near 0 rather than DDPM's integer steps up to 1000.
    if reduced:
        # Two levels, one block each, attention at 8x8 (and in the middle), 8 groups.
        net = DiffusionUNet(32, (1, 2), 1, (8,), 16, groups=8)
        size = 16
    else:
        # DDPM's CIFAR-10 model: channels 128, multipliers 1, 2, 2, 2, two blocks a level,
        # attention at 16x16, 32 groups.
        net = DiffusionUNet(128, (1, 2, 2, 2), 2, (16,), 32, groups=32)
        size = 32
    return net, [("input", torch.randn(1, 3, size, size)), ("timestep", torch.randn(1))]


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


class _C2f(nn.Module):
    """YOLOv8's C2f block: a 1x1 convolution split in two halves along the channels (Split), each
    bottleneck reading the last piece, every piece concatenated into a 1x1 convolution."""

    def __init__(self, inputs, outputs, blocks, shortcut=True):
        super().__init__()
        self.half = outputs // 2
        self.split = _ConvBnSiLU(inputs, 2 * self.half)
        self.blocks = nn.ModuleList(nn.Sequential(_ConvBnSiLU(self.half, self.half, 3),
                                                  _ConvBnSiLU(self.half, self.half, 3))
                                    for _ in range(blocks))
        self.shortcut = shortcut
        self.join = _ConvBnSiLU((2 + blocks) * self.half, outputs)

    def forward(self, x):
        pieces = list(self.split(x).split((self.half, self.half), 1))
        for block in self.blocks:
            y = block(pieces[-1])
            pieces.append(pieces[-1] + y if self.shortcut else y)
        return self.join(torch.cat(pieces, 1))


class AnchorFreeDetector(nn.Module):
    """A YOLOv8-style anchor-free detector: C2f blocks, SPPF, a PAN neck (nearest upsampling and
    strided convolutions), decoupled box and class heads per level, the box as a distribution over
    `bins` distances normalized along axis 1 (Softmax over an inner axis) and reduced by a fixed
    1x1 convolution of weights 0..bins-1, decoded against grid anchor points into [N, 4 +
    classes, anchors] with sigmoid class scores."""

    def __init__(self, width, classes, size, bins=16):
        super().__init__()
        w = width
        self.stem = nn.Sequential(_ConvBnSiLU(3, w, 3, 2), _ConvBnSiLU(w, 2 * w, 3, 2),
                                  _C2f(2 * w, 2 * w, 1))
        self.stage3 = nn.Sequential(_ConvBnSiLU(2 * w, 4 * w, 3, 2), _C2f(4 * w, 4 * w, 2))
        self.stage4 = nn.Sequential(_ConvBnSiLU(4 * w, 8 * w, 3, 2), _C2f(8 * w, 8 * w, 2))
        self.stage5 = nn.Sequential(_ConvBnSiLU(8 * w, 16 * w, 3, 2), _C2f(16 * w, 16 * w, 1),
                                    _SpatialPyramidPool(16 * w))
        self.top_down4 = _C2f(24 * w, 8 * w, 1, shortcut=False)
        self.top_down3 = _C2f(12 * w, 4 * w, 1, shortcut=False)
        self.down3 = _ConvBnSiLU(4 * w, 4 * w, 3, 2)
        self.bottom_up4 = _C2f(12 * w, 8 * w, 1, shortcut=False)
        self.down4 = _ConvBnSiLU(8 * w, 8 * w, 3, 2)
        self.bottom_up5 = _C2f(24 * w, 16 * w, 1, shortcut=False)
        self.bins, self.classes, self.size = bins, classes, size
        box_width, class_width = max(16, w, 4 * bins), max(4 * w, classes)
        self.box_heads = nn.ModuleList(
            nn.Sequential(_ConvBnSiLU(c, box_width, 3), _ConvBnSiLU(box_width, box_width, 3),
                          nn.Conv2d(box_width, 4 * bins, 1)) for c in (4 * w, 8 * w, 16 * w))
        self.class_heads = nn.ModuleList(
            nn.Sequential(_ConvBnSiLU(c, class_width, 3), _ConvBnSiLU(class_width, class_width, 3),
                          nn.Conv2d(class_width, classes, 1)) for c in (4 * w, 8 * w, 16 * w))
        self.register_buffer("bin_values", torch.arange(bins, dtype=torch.float32).view(1, bins, 1, 1))

    def forward(self, x):
        p3 = self.stage3(self.stem(x))
        p4 = self.stage4(p3)
        p5 = self.stage5(p4)
        t4 = self.top_down4(torch.cat([F.interpolate(p5, scale_factor=2.0, mode="nearest"), p4], 1))
        t3 = self.top_down3(torch.cat([F.interpolate(t4, scale_factor=2.0, mode="nearest"), p3], 1))
        b4 = self.bottom_up4(torch.cat([self.down3(t3), t4], 1))
        b5 = self.bottom_up5(torch.cat([self.down4(b4), p5], 1))
        levels, anchors, strides = [], [], []
        for features, box_head, class_head in zip((t3, b4, b5), self.box_heads, self.class_heads):
            levels.append(torch.cat([box_head(features), class_head(features)], 1).flatten(2))
            h, w = features.shape[2], features.shape[3]
            ys, xs = torch.meshgrid(torch.arange(h, dtype=torch.float32) + 0.5,
                                    torch.arange(w, dtype=torch.float32) + 0.5, indexing="ij")
            anchors.append(torch.stack([xs, ys], -1).view(-1, 2))
            strides.append(torch.full((h * w, 1), self.size / h))
        y = torch.cat(levels, 2)
        anchors = torch.cat(anchors).transpose(0, 1).unsqueeze(0)
        strides = torch.cat(strides).transpose(0, 1)
        box, scores = y.split((4 * self.bins, self.classes), 1)
        n, _, count = box.shape
        distribution = box.view(n, 4, self.bins, count).transpose(2, 1).softmax(1)
        distances = F.conv2d(distribution, self.bin_values).view(n, 4, count)
        near, far = distances.chunk(2, 1)
        top_left, bottom_right = anchors - near, anchors + far
        xywh = torch.cat([(top_left + bottom_right) / 2, bottom_right - top_left], 1) * strides
        return torch.cat([xywh, scores.sigmoid()], 1)


def anchor_free_detector(reduced):
    width, classes, size = (8, 4, 96) if reduced else (16, 80, 640)
    return AnchorFreeDetector(width, classes, size), image(reduced, full=size, small=size)


def r3d_18(reduced):
    """torchvision's 3-D ResNet-18 for video (Conv3d, BatchNorm3d, 3-D pooling) over a clip."""
    if reduced:
        net = tvm.video.resnet.VideoResNet(tvm.video.resnet.BasicBlock,
                                           [tvm.video.resnet.Conv3DSimple] * 4, [1, 1, 1, 1],
                                           tvm.video.resnet.BasicStem, num_classes=10)
        return net, [("input", torch.randn(1, 3, 4, 32, 32))]
    return tvm.video.r3d_18(weights=None), [("input", torch.randn(1, 3, 8, 112, 112))]


def s3d(reduced):
    """torchvision's S3D video classifier: separable 3-D convolutions (1x3x3 then 3x1x1), 3-D max
    pools, Inception branches joined by Concat, a 3-D average pool and a Conv3d classifier."""
    if reduced:
        from torchvision.models.video.s3d import SepInceptionBlock3D, TemporalSeparableConv
        from torchvision.ops.misc import Conv3dNormActivation

        def norm(c):
            return nn.BatchNorm3d(c, eps=0.001, momentum=0.001)

        # S3D's layer sequence (stem, pools, Inception blocks) narrowed and shortened; an 8-frame
        # 64x64 clip ends at 1x2x2, which the average pool covers as 2x7x7 covers S3D's 16x224x224.
        net = tvm.video.S3D(num_classes=10)
        net.features = nn.Sequential(
            TemporalSeparableConv(3, 16, 7, 2, 3, norm),
            nn.MaxPool3d((1, 3, 3), (1, 2, 2), (0, 1, 1)),
            Conv3dNormActivation(16, 16, kernel_size=1, norm_layer=norm),
            TemporalSeparableConv(16, 32, 3, 1, 1, norm),
            nn.MaxPool3d((1, 3, 3), (1, 2, 2), (0, 1, 1)),
            SepInceptionBlock3D(32, 8, 8, 16, 4, 8, 8, norm),  # 40 channels out
            nn.MaxPool3d(3, 2, 1),
            SepInceptionBlock3D(40, 16, 16, 24, 4, 8, 8, norm),  # 56
            nn.MaxPool3d(2, 2),
            SepInceptionBlock3D(56, 24, 16, 32, 8, 16, 16, norm))  # 88
        net.avgpool = nn.AvgPool3d((1, 2, 2), stride=1)
        net.classifier[1] = nn.Conv3d(88, 10, 1)
        return net, [("input", torch.randn(1, 3, 8, 64, 64))]
    return tvm.video.s3d(), [("input", torch.randn(1, 3, 16, 224, 224))]


class _X3dBlock(nn.Module):
    """X3D's bottleneck: 1x1x1 expansion, 3x3x3 depthwise convolution, squeeze-and-excitation,
    SiLU, 1x1x1 projection and a residual sum."""

    def __init__(self, cin, mid, cout, stride):
        super().__init__()
        self.expand = nn.Sequential(nn.Conv3d(cin, mid, 1, bias=False), nn.BatchNorm3d(mid),
                                    nn.ReLU())
        self.depthwise = nn.Sequential(
            nn.Conv3d(mid, mid, 3, (1, stride, stride), 1, groups=mid, bias=False),
            nn.BatchNorm3d(mid))
        squeezed = max(8, mid // 16)
        self.excite = nn.Sequential(nn.AdaptiveAvgPool3d(1), nn.Conv3d(mid, squeezed, 1), nn.ReLU(),
                                    nn.Conv3d(squeezed, mid, 1), nn.Sigmoid())
        self.project = nn.Sequential(nn.Conv3d(mid, cout, 1, bias=False), nn.BatchNorm3d(cout))
        self.shortcut = nn.Identity()
        if cin != cout or stride > 1:
            self.shortcut = nn.Sequential(nn.Conv3d(cin, cout, 1, (1, stride, stride), bias=False),
                                          nn.BatchNorm3d(cout))

    def forward(self, x):
        h = self.depthwise(self.expand(x))
        h = F.silu(h * self.excite(h))
        return F.relu(self.project(h) + self.shortcut(x))


class X3d(nn.Module):
    """An X3D-S-like video network: a (1, 3, 3) stem convolution and a (5, 1, 1) depthwise
    temporal one, stages of _X3dBlock whose expanded widths (54, 108, ...) 16 does not divide."""

    def __init__(self, stages, classes):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv3d(3, 24, (1, 3, 3), (1, 2, 2), (0, 1, 1), bias=False),
            nn.Conv3d(24, 24, (5, 1, 1), 1, (2, 0, 0), groups=24, bias=False),
            nn.BatchNorm3d(24), nn.ReLU())
        blocks, cin = [], 24
        for cout, depth in stages:
            for j in range(depth):
                blocks.append(_X3dBlock(cin, int(cout * 2.25), cout, 2 if j == 0 else 1))
                cin = cout
        self.body = nn.Sequential(*blocks)
        self.head = nn.Sequential(nn.Conv3d(cin, 432, 1, bias=False), nn.BatchNorm3d(432),
                                  nn.ReLU())
        self.fc = nn.Linear(432, classes)

    def forward(self, x):
        return self.fc(self.head(self.body(self.stem(x))).mean([2, 3, 4]))


def x3d(reduced):
    if reduced:
        return X3d([(24, 1), (48, 1)], 10), [("input", torch.randn(1, 3, 4, 32, 32))]
    return X3d([(24, 2), (48, 3), (96, 5), (192, 3)], 400), [
        ("input", torch.randn(1, 3, 13, 160, 160))]


def _conv_bn_mish(cin, cout, k=3, stride=1):
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, k // 2, bias=False),
                         nn.BatchNorm2d(cout), nn.Mish())


class _CspStage(nn.Module):
    """CSPDarknet's stage: a strided convolution, the channels split into a residual path and a
    shortcut, joined again."""

    def __init__(self, cin, cout, depth):
        super().__init__()
        half = cout // 2
        self.down = _conv_bn_mish(cin, cout, 3, 2)
        self.shortcut = _conv_bn_mish(cout, half, 1)
        self.main = _conv_bn_mish(cout, half, 1)
        self.blocks = nn.ModuleList(
            [nn.Sequential(_conv_bn_mish(half, half, 1), _conv_bn_mish(half, half, 3))
             for _ in range(depth)])
        self.transition = _conv_bn_mish(half, half, 1)
        self.join = _conv_bn_mish(cout, cout, 1)

    def forward(self, x):
        x = self.down(x)
        shortcut, main = self.shortcut(x), self.main(x)
        for block in self.blocks:
            main = main + block(main)
        return self.join(torch.cat([self.transition(main), shortcut], 1))


class CspDarknet(nn.Module):
    """YOLOv4's CSPDarknet53-like backbone with Mish activations and a classifier."""

    def __init__(self, stages, classes):
        super().__init__()
        self.stem = _conv_bn_mish(3, 32)
        layers, cin = [], 32
        for cout, depth in stages:
            layers.append(_CspStage(cin, cout, depth))
            cin = cout
        self.stages = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        return self.fc(self.stages(self.stem(x)).mean([2, 3]))


def cspdarknet_mish(reduced):
    if reduced:
        return CspDarknet([(64, 1), (128, 1)], 10), [("input", torch.randn(1, 3, 32, 32))]
    return CspDarknet([(64, 1), (128, 2), (256, 4), (512, 4), (1024, 2)], 1000), [
        ("input", torch.randn(1, 3, 256, 256))]


def _conv_bn_relu_1d(i, o):
    return nn.Sequential(nn.Conv1d(i, o, 1), nn.BatchNorm1d(o), nn.ReLU())


def _linear_bn_relu(i, o):
    return nn.Sequential(nn.Linear(i, o), nn.BatchNorm1d(o), nn.ReLU())


class _TNet(nn.Module):
    """PointNet's T-Net: a k x k transform predicted from the points, plus the identity."""

    def __init__(self, k, widths):
        super().__init__()
        c1, c2, c3, f1, f2 = widths
        self.k = k
        self.convs = nn.Sequential(_conv_bn_relu_1d(k, c1), _conv_bn_relu_1d(c1, c2),
                                   _conv_bn_relu_1d(c2, c3))
        self.fcs = nn.Sequential(_linear_bn_relu(c3, f1), _linear_bn_relu(f1, f2),
                                 nn.Linear(f2, k * k))
        self.register_buffer("identity", torch.eye(k).flatten())

    def forward(self, x):
        y = torch.max(self.convs(x), 2)[0]
        return (self.fcs(y) + self.identity).view(-1, self.k, self.k)


class PointNet(nn.Module):
    """PointNet classification over a point cloud [N, 3, points]: shared per-point MLPs (Conv1d
    k=1 + BatchNorm1d), input and feature transforms predicted by T-Nets and applied with batched
    MatMul, a max over points (ReduceMax), an FC head with BatchNorm1d, LogSoftmax."""

    def __init__(self, widths, classes):
        super().__init__()
        c1, c2, c3, f1, f2 = widths
        self.input_transform = _TNet(3, widths)
        self.conv1 = _conv_bn_relu_1d(3, c1)
        self.feature_transform = _TNet(c1, widths)
        self.convs = nn.Sequential(_conv_bn_relu_1d(c1, c2), nn.Conv1d(c2, c3, 1),
                                   nn.BatchNorm1d(c3))
        self.head = nn.Sequential(_linear_bn_relu(c3, f1), _linear_bn_relu(f1, f2),
                                  nn.Linear(f2, classes))

    def forward(self, points):
        x = self.conv1(torch.bmm(self.input_transform(points), points))
        x = torch.bmm(self.feature_transform(x), x)
        x = torch.max(self.convs(x), 2)[0]
        return F.log_softmax(self.head(x), 1)


def pointnet(reduced):
    if reduced:
        return PointNet((16, 32, 128, 64, 32), 10), [("input", torch.randn(1, 3, 256))]
    return PointNet((64, 128, 1024, 512, 256), 40), [("input", torch.randn(1, 3, 1024))]


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


def _gelu_new(x):
    # Hugging Face's gelu_new as it writes it (Pow, Mul, Add, Tanh), not F.gelu(approximate=...).
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi)
                                       * (x + 0.044715 * torch.pow(x, 3.0))))


class _Gpt2Block(nn.Module):
    def __init__(self, d, heads, max_positions):
        super().__init__()
        self.heads, self.head_dim = heads, d // heads
        self.ln_1 = nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)
        causal = torch.tril(torch.ones(max_positions, max_positions, dtype=torch.bool))
        self.register_buffer("bias", causal.view(1, 1, max_positions, max_positions))

    def forward(self, x, past_k, past_v):
        b, s, d = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(d, 2)
        q, k, v = (t.view(b, s, self.heads, self.head_dim).permute(0, 2, 1, 3) for t in (q, k, v))
        k = torch.cat([past_k, k], -2)
        v = torch.cat([past_v, v], -2)
        w = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)
        length = k.size(-2)
        mask = self.bias[:, :, length - s:length, :length]
        w = torch.where(mask, w, torch.tensor(torch.finfo(w.dtype).min, dtype=w.dtype))
        y = (torch.softmax(w, -1) @ v).permute(0, 2, 1, 3).reshape(b, s, d)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(_gelu_new(self.c_fc(self.ln_2(x))))


class Gpt2Cached(nn.Module):
    """A GPT-2 decode step with a KV cache, as Hugging Face writes it: input_ids [1, 1] and
    past_key / past_value [layers, 1, heads, past, head_dim] (stacked, indexed per layer with
    Gather), the new keys and values Concat'ed to them, the causal mask sliced at the past length
    and applied by Where, tanh-GELU written out (Pow, Tanh), a tied LM head (a GEMV: memory
    bound)."""

    def __init__(self, vocab, d, heads, layers, max_positions):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(max_positions, d)
        self.blocks = nn.ModuleList(_Gpt2Block(d, heads, max_positions) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)

    def forward(self, input_ids, past_key, past_value):
        past = past_key.shape[-2]
        positions = torch.arange(past, past + input_ids.shape[1]).unsqueeze(0)
        x = self.wte(input_ids) + self.wpe(positions)
        for i, block in enumerate(self.blocks):
            x = block(x, past_key[i], past_value[i])
        return self.ln_f(x) @ self.wte.weight.t()


def gpt2_kv(reduced):
    if reduced:
        vocab, d, heads, layers, past = 1000, 64, 4, 2, 15
    else:
        vocab, d, heads, layers, past = 50257, 768, 12, 12, 127  # GPT-2 small
    net = Gpt2Cached(vocab, d, heads, layers, 1024)
    cache = (layers, 1, heads, past, d // heads)
    return net, [("input_ids", torch.randint(0, vocab, (1, 1), dtype=torch.int64)),
                 ("past_key", torch.randn(cache)), ("past_value", torch.randn(cache))]


class _Wav2Vec2Layer(nn.Module):
    """A post-norm wav2vec2 layer as Hugging Face writes it: q/k/v Linear, the heads folded into
    the batch for 3-D MatMul (bmm), a GELU feed-forward."""

    def __init__(self, d, heads, inter):
        super().__init__()
        self.heads, self.head_dim = heads, d // heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.norm1 = nn.LayerNorm(d)
        self.ff1, self.ff2 = nn.Linear(d, inter), nn.Linear(inter, d)
        self.norm2 = nn.LayerNorm(d)

    def forward(self, x):
        b, t, d = x.shape

        def heads(y):
            return y.view(b, t, self.heads, self.head_dim).transpose(1, 2).reshape(
                b * self.heads, t, self.head_dim)

        q = heads(self.q(x) * self.head_dim ** -0.5)
        attention = torch.softmax(torch.bmm(q, heads(self.k(x)).transpose(1, 2)), -1)
        y = torch.bmm(attention, heads(self.v(x))).view(b, self.heads, t, self.head_dim)
        x = self.norm1(x + self.o(y.transpose(1, 2).reshape(b, t, d)))
        return self.norm2(x + self.ff2(F.gelu(self.ff1(x))))


class Wav2Vec2(nn.Module):
    """wav2vec2 over raw 16 kHz audio [N, samples]: a 7-layer Conv1d feature extractor (strides
    5, 2, 2, 2, 2, 2, 2; the first with a per-channel GroupNorm, all GELU), LayerNorm and a
    projection, a weight-normed grouped positional Conv1d with an even kernel (one frame dropped
    by a Slice), then post-norm transformer layers."""

    def __init__(self, conv, d, layers, heads, inter, position_kernel, position_groups):
        super().__init__()
        convs = []
        cin = 1
        for i, (k, s) in enumerate([(10, 5)] + [(3, 2)] * 4 + [(2, 2)] * 2):
            convs.append(nn.Conv1d(cin, conv, k, s, bias=False))
            if i == 0:
                convs.append(nn.GroupNorm(conv, conv))
            convs.append(nn.GELU())
            cin = conv
        self.features = nn.Sequential(*convs)
        self.feature_norm = nn.LayerNorm(conv)
        self.project = nn.Linear(conv, d)
        self.position_conv = nn.utils.weight_norm(
            nn.Conv1d(d, d, position_kernel, padding=position_kernel // 2,
                      groups=position_groups), dim=2)
        self.norm = nn.LayerNorm(d)
        self.layers = nn.ModuleList(_Wav2Vec2Layer(d, heads, inter) for _ in range(layers))

    def forward(self, audio):
        x = self.features(audio[:, None]).transpose(1, 2)
        x = self.project(self.feature_norm(x))
        position = self.position_conv(x.transpose(1, 2))[:, :, :-1]
        x = self.norm(x + F.gelu(position).transpose(1, 2))
        for layer in self.layers:
            x = layer(x)
        return x


def wav2vec2(reduced):
    if reduced:
        # A quarter second: 12 frames.
        return Wav2Vec2(64, 64, 2, 4, 128, 16, 4), [("input", torch.randn(1, 4000))]
    # wav2vec2-base over one second (49 frames).
    return Wav2Vec2(512, 768, 12, 12, 3072, 128, 16), [("input", torch.randn(1, 16000))]


class TextCnn(nn.Module):
    """Kim's TextCNN: an embedding (Gather), Conv1d of widths 3, 4 and 5 over it, ReLU, a max over
    time (ReduceMax), Concat, a linear classifier."""

    def __init__(self, vocab, dim, filters, widths=(3, 4, 5), classes=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.convs = nn.ModuleList(nn.Conv1d(dim, filters, w) for w in widths)
        self.fc = nn.Linear(filters * len(widths), classes)

    def forward(self, input_ids):
        x = self.embed(input_ids).transpose(1, 2)
        return self.fc(torch.cat([F.relu(c(x)).max(2)[0] for c in self.convs], 1))


def textcnn(reduced):
    vocab, dim, filters, seq = (1000, 32, 16, 64) if reduced else (30000, 300, 100, 256)
    return TextCnn(vocab, dim, filters), [
        ("input_ids", torch.randint(0, vocab, (1, seq), dtype=torch.int64))]


class _DetrEncoderLayer(nn.Module):
    def __init__(self, d, heads, ff):
        super().__init__()
        self.attention = nn.MultiheadAttention(d, heads)
        self.ff = nn.Sequential(nn.Linear(d, ff), nn.ReLU(), nn.Linear(ff, d))
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, src, pos):
        q = src + pos
        src = self.norm1(src + self.attention(q, q, src, need_weights=False)[0])
        return self.norm2(src + self.ff(src))


class _DetrDecoderLayer(nn.Module):
    def __init__(self, d, heads, ff):
        super().__init__()
        self.self_attention = nn.MultiheadAttention(d, heads)
        self.cross_attention = nn.MultiheadAttention(d, heads)
        self.ff = nn.Sequential(nn.Linear(d, ff), nn.ReLU(), nn.Linear(ff, d))
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, tgt, memory, pos, query_pos):
        q = tgt + query_pos
        tgt = self.norm1(tgt + self.self_attention(q, q, tgt, need_weights=False)[0])
        tgt = self.norm2(tgt + self.cross_attention(tgt + query_pos, memory + pos, memory,
                                                    need_weights=False)[0])
        return self.norm3(tgt + self.ff(tgt))


class Detr(nn.Module):
    """DETR's transformer and heads over a backbone's C5 feature map: a 1x1 input projection, a
    sine positional embedding built in the graph (CumSum, Sin/Cos, interleaved by Concat and
    Reshape), encoder layers, decoder layers with self- and cross-attention
    (nn.MultiheadAttention, sequence first) over learned queries, class and sigmoid box heads."""

    def __init__(self, features, d, heads, ff, layers, queries, classes):
        super().__init__()
        self.d = d
        self.input_proj = nn.Conv2d(features, d, 1)
        self.encoder = nn.ModuleList(_DetrEncoderLayer(d, heads, ff) for _ in range(layers))
        self.decoder = nn.ModuleList(_DetrDecoderLayer(d, heads, ff) for _ in range(layers))
        self.decoder_norm = nn.LayerNorm(d)
        self.query_embed = nn.Parameter(torch.randn(queries, d))
        self.class_embed = nn.Linear(d, classes + 1)
        self.bbox_embed = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d), nn.ReLU(),
                                        nn.Linear(d, 4))

    def sine_position(self, x):
        b, _, h, w = x.shape
        not_mask = torch.ones(b, h, w, dtype=x.dtype)
        y_embed = not_mask.cumsum(1)
        x_embed = not_mask.cumsum(2)
        scale, eps = 2 * math.pi, 1e-6
        y_embed = y_embed / (y_embed[:, -1:, :] + eps) * scale
        x_embed = x_embed / (x_embed[:, :, -1:] + eps) * scale
        features = self.d // 2
        dim_t = torch.arange(features, dtype=x.dtype)
        dim_t = 10000 ** (2 * torch.div(dim_t, 2, rounding_mode="floor") / features)
        pos_x = x_embed[:, :, :, None] / dim_t
        pos_y = y_embed[:, :, :, None] / dim_t
        pos_x = torch.stack((pos_x[:, :, :, 0::2].sin(), pos_x[:, :, :, 1::2].cos()), 4).flatten(3)
        pos_y = torch.stack((pos_y[:, :, :, 0::2].sin(), pos_y[:, :, :, 1::2].cos()), 4).flatten(3)
        return torch.cat((pos_y, pos_x), 3).permute(0, 3, 1, 2)

    def forward(self, features):
        src = self.input_proj(features)
        b = src.shape[0]
        pos = self.sine_position(src).flatten(2).permute(2, 0, 1)
        memory = src.flatten(2).permute(2, 0, 1)  # [HW, B, d]
        for layer in self.encoder:
            memory = layer(memory, pos)
        query_pos = self.query_embed.unsqueeze(1).repeat(1, b, 1)
        tgt = torch.zeros_like(query_pos)
        for layer in self.decoder:
            tgt = layer(tgt, memory, pos, query_pos)
        hs = self.decoder_norm(tgt).transpose(0, 1)
        return torch.cat([self.class_embed(hs), self.bbox_embed(hs).sigmoid()], -1)


def detr(reduced):
    if reduced:
        net = Detr(256, 64, 4, 128, 2, 20, 10)
        return net, [("input", torch.randn(1, 256, 8, 10))]
    # DETR-R50's: d 256, 8 heads, 6 + 6 layers, 100 queries, 91 classes, over ResNet-50's C5 of an
    # 800x1066 image.
    net = Detr(2048, 256, 8, 2048, 6, 100, 91)
    return net, [("input", torch.randn(1, 2048, 25, 34))]


class _WhisperLayer(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.attn_ln = nn.LayerNorm(d)
        self.query, self.value, self.out = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.key = nn.Linear(d, d, bias=False)
        self.mlp_ln = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        # Variance-preserving weights, so that attention scores spread over about 1.
        for m in self.modules():
            if isinstance(m, nn.Linear):
                with torch.no_grad():
                    m.weight.normal_(0.0, 1.0 / math.sqrt(m.in_features))

    def forward(self, x):
        b, t, d = x.shape
        h = self.attn_ln(x)
        scale = (d // self.heads) ** -0.25
        q = self.query(h).view(b, t, self.heads, -1).permute(0, 2, 1, 3) * scale
        k = self.key(h).view(b, t, self.heads, -1).permute(0, 2, 3, 1) * scale
        v = self.value(h).view(b, t, self.heads, -1).permute(0, 2, 1, 3)
        w = torch.softmax((q @ k).float(), -1)
        x = x + self.out((w @ v).permute(0, 2, 1, 3).flatten(2))
        return x + self.mlp(self.mlp_ln(x))


class WhisperEncoder(nn.Module):
    """Whisper's audio encoder as openai/whisper writes it: two Conv1d + GELU (the second of
    stride 2), a sinusoidal position table added, pre-norm layers whose q and k are each scaled
    by hd^-0.25 (key without bias), a GELU MLP, a final LayerNorm."""

    def __init__(self, mels, ctx, d, heads, layers):
        super().__init__()
        self.conv1 = nn.Conv1d(mels, d, 3, padding=1)
        self.conv2 = nn.Conv1d(d, d, 3, stride=2, padding=1)
        inc = torch.exp(-math.log(10000) / (d // 2 - 1) * torch.arange(d // 2))
        t = torch.arange(ctx)[:, None] * inc[None, :]
        self.register_buffer("positional_embedding", torch.cat([t.sin(), t.cos()], 1))
        self.blocks = nn.ModuleList(_WhisperLayer(d, heads) for _ in range(layers))
        self.ln_post = nn.LayerNorm(d)

    def forward(self, mel):
        x = F.gelu(self.conv1(mel))
        x = F.gelu(self.conv2(x)).permute(0, 2, 1)
        x = x + self.positional_embedding
        for block in self.blocks:
            x = block(x)
        return self.ln_post(x)


def whisper_enc(reduced):
    # Reduced: 100 positions, enough keys for the attention fusion (96 on).
    if reduced:
        return WhisperEncoder(16, 100, 64, 2, 2), [("input", torch.randn(1, 16, 200))]
    # Whisper-tiny's: 80 mels, 3000 frames -> 1500 positions, d 384, 6 heads, 4 layers.
    return WhisperEncoder(80, 1500, 384, 6, 4), [("input", torch.randn(1, 80, 3000))]


class _GcnLayer(nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.lin = nn.Linear(i, o, bias=False)
        self.bias = nn.Parameter(0.05 * torch.randn(o))

    def forward(self, x, src, dst, norm):
        h = self.lin(x)
        msg = h.index_select(0, src) * norm[:, None]
        out = torch.zeros_like(h).scatter_add(0, dst[:, None].expand(-1, h.shape[1]), msg)
        return out + self.bias


class Gcn(nn.Module):
    """Kipf & Welling's GCN as PyG's GCNConv computes it, in plain torch: self loops appended,
    degrees by scatter_add of ones, symmetric D^-1/2 normalization (Pow), messages gathered by
    source (Gather) and summed into destinations (ScatterElements, reduction add), ReLU between
    layers, log_softmax; edge_index [2, E] int64."""

    def __init__(self, dims):
        super().__init__()
        self.layers = nn.ModuleList(_GcnLayer(a, b) for a, b in zip(dims[:-1], dims[1:]))

    def forward(self, x, edge_index):
        n = x.shape[0]
        loops = torch.arange(n, dtype=edge_index.dtype)
        src = torch.cat([edge_index[0], loops])
        dst = torch.cat([edge_index[1], loops])
        deg = torch.zeros(n, dtype=x.dtype).scatter_add(0, dst, torch.ones_like(dst, dtype=x.dtype))
        dinv = deg.pow(-0.5)
        norm = dinv.index_select(0, src) * dinv.index_select(0, dst)
        for i, layer in enumerate(self.layers):
            x = layer(x, src, dst, norm)
            if i != len(self.layers) - 1:
                x = F.relu(x)
        return F.log_softmax(x, -1)


def gcn(reduced):
    nodes, edges, dims = (200, 1000, (16, 32, 32, 8)) if reduced else (2000, 10000,
                                                                      (128, 256, 256, 40))
    return Gcn(dims), [("input", torch.randn(nodes, dims[0])),
                       ("edge_index", torch.randint(0, nodes, (2, edges), dtype=torch.int64))]


class Nerf(nn.Module):
    """The original NeRF MLP: positional encoding of the point (10 frequencies) and the view
    direction (4): x * 2^k, Sin, Cos, Concat; 8 Linear+ReLU layers with the encoded point
    concatenated again after the 5th, a density head, a view-dependent branch, sigmoid RGB."""

    def __init__(self, w, depth=8, skip=4, lx=10, ld=4):
        super().__init__()
        self.register_buffer("fx", 2.0 ** torch.arange(lx, dtype=torch.float32))
        self.register_buffer("fd", 2.0 ** torch.arange(ld, dtype=torch.float32))
        cx, cd = 3 + 6 * lx, 3 + 6 * ld
        self.skip = skip
        self.pts = nn.ModuleList([nn.Linear(cx, w)] + [
            nn.Linear(w + cx if i == skip + 1 else w, w) for i in range(1, depth)])
        self.sigma = nn.Linear(w, 1)
        self.feature = nn.Linear(w, w)
        self.views = nn.Linear(w + cd, w // 2)
        self.rgb = nn.Linear(w // 2, 3)

    @staticmethod
    def encode(p, f):
        x = (p[:, None, :] * f[None, :, None]).flatten(1)
        return torch.cat([p, torch.sin(x), torch.cos(x)], -1)

    def forward(self, points, dirs):
        ex, ed = self.encode(points, self.fx), self.encode(dirs, self.fd)
        h = ex
        for i, lin in enumerate(self.pts):
            if i == self.skip + 1:
                h = torch.cat([ex, h], -1)
            h = F.relu(lin(h))
        sigma = F.relu(self.sigma(h))
        h = F.relu(self.views(torch.cat([self.feature(h), ed], -1)))
        return torch.cat([torch.sigmoid(self.rgb(h)), sigma], -1)


def nerf_mlp(reduced):
    points, width = (1024, 64) if reduced else (65536, 256)
    return Nerf(width), [("points", torch.randn(points, 3)), ("dirs", torch.randn(points, 3))]


class LstNet(nn.Module):
    """LSTNet (Lai et al.), a multivariate time-series forecaster: a Conv2d whose kernel spans all
    the series (over [B, 1, steps, series]), a GRU over its output, a GRU over every `skip`-th
    step (the period), a linear autoregressive highway, a sigmoid."""

    def __init__(self, series, steps, hidden, skip, highway, skip_hidden=10, kernel=6):
        super().__init__()
        self.skip, self.highway, self.hidden = skip, highway, hidden
        self.periods = (steps - kernel + 1) // skip
        self.conv = nn.Conv2d(1, hidden, (kernel, series))
        self.gru = nn.GRU(hidden, hidden)
        self.skip_gru = nn.GRU(hidden, skip_hidden)
        self.fc = nn.Linear(hidden + skip * skip_hidden, series)
        self.ar = nn.Linear(highway, 1)

    def forward(self, x):
        c = F.relu(self.conv(x.unsqueeze(1))).squeeze(3)  # [1, hidden, steps - kernel + 1]
        r = self.gru(c.permute(2, 0, 1))[1].squeeze(0)
        s = c[:, :, -self.periods * self.skip:].reshape(1, self.hidden, self.periods, self.skip)
        s = s.permute(2, 0, 3, 1).reshape(self.periods, self.skip, self.hidden)
        s = self.skip_gru(s)[1].reshape(1, -1)
        z = self.ar(x[:, -self.highway:, :].permute(0, 2, 1)).squeeze(2)
        return torch.sigmoid(self.fc(torch.cat([r, s], 1)) + z)


def lstnet(reduced):
    series, steps, hidden, skip = (16, 48, 32, 8) if reduced else (64, 168, 100, 24)
    return LstNet(series, steps, hidden, skip, highway=skip), [
        ("input", torch.randn(1, steps, series))]


class DinRecommender(nn.Module):
    """A Deep Interest Network: item embeddings (Gather), attention of the candidate over the
    user's history ([h, t, h - t, h * t] through a small MLP, masked Softmax, weighted sum), an
    MLP with PReLU over [interest, candidate, interest * candidate]. Tens of microseconds per
    request: what it measures is a request's fixed cost."""

    def __init__(self, items, dim):
        super().__init__()
        self.embed = nn.Embedding(items, dim)
        self.attention = nn.Sequential(nn.Linear(4 * dim, 80), nn.Sigmoid(), nn.Linear(80, 40),
                                       nn.Sigmoid(), nn.Linear(40, 1))
        self.mlp = nn.Sequential(nn.Linear(3 * dim, 200), nn.PReLU(), nn.Linear(200, 80),
                                 nn.PReLU(), nn.Linear(80, 2))

    def forward(self, history, target, mask):
        h = self.embed(history)
        t = self.embed(target).unsqueeze(1).expand_as(h)
        w = self.attention(torch.cat([h, t, h - t, h * t], -1)).squeeze(-1)
        w = w.masked_fill(mask < 0.5, -1e9).softmax(-1)
        interest = (w.unsqueeze(-1) * h).sum(1)
        return self.mlp(torch.cat([interest, t[:, 0], interest * t[:, 0]], -1)).softmax(-1)


def din_recommender(reduced):
    items, dim, length = (1000, 16, 20) if reduced else (100000, 64, 100)
    return DinRecommender(items, dim), [
        ("history", torch.randint(0, items, (1, length), dtype=torch.int64)),
        ("target", torch.randint(0, items, (1,), dtype=torch.int64)),
        ("mask", (torch.rand(1, length) > 0.3).float())]


class Dlrm(nn.Module):
    """DLRM (Naumov et al.), a click-through-rate model: a bottom MLP over dense features, one
    embedding table per sparse feature (Gather of one row each), the pairwise dot products of all
    those vectors (a batched MatMul, its upper triangle picked by a constant index), a top MLP.
    Its tables are most of its bytes and a request reads one row of each."""

    def __init__(self, dense, tables, rows, dim):
        super().__init__()
        self.bottom = nn.Sequential(nn.Linear(dense, 512), nn.ReLU(), nn.Linear(512, 256),
                                    nn.ReLU(), nn.Linear(256, dim), nn.ReLU())
        self.tables = nn.ModuleList([nn.Embedding(rows, dim) for _ in range(tables)])
        n = tables + 1
        upper = torch.triu_indices(n, n, 1)
        self.register_buffer("pairs", upper[0] * n + upper[1])
        self.top = nn.Sequential(nn.Linear(dim + n * (n - 1) // 2, 512), nn.ReLU(),
                                 nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 1))

    def forward(self, dense, sparse):
        b = self.bottom(dense)
        vectors = torch.stack([b] + [t(sparse[:, i]) for i, t in enumerate(self.tables)], 1)
        dots = torch.bmm(vectors, vectors.transpose(1, 2)).flatten(1)
        return torch.sigmoid(self.top(torch.cat([b, torch.index_select(dots, 1, self.pairs)], 1)))


def dlrm(reduced):
    tables, rows, dim = (4, 1000, 16) if reduced else (8, 100000, 64)
    return Dlrm(13, tables, rows, dim), [
        ("dense", torch.randn(1, 13)),
        ("sparse", torch.randint(0, rows, (1, tables), dtype=torch.int64))]


def _nearest(x, k):
    # The k nearest points of each point (largest negative squared distances), by TopK.
    inner = -2 * torch.matmul(x.transpose(2, 1), x)
    squares = (x ** 2).sum(1, keepdim=True)
    return (-squares - inner - squares.transpose(2, 1)).topk(k, -1)[1]


def _edge_features(x, k):
    # [x_j - x_i, x_i] for each point i and its k nearest j: [N, 2C, points, k].
    b, c, n = x.shape
    index = (_nearest(x, k) + torch.arange(b).view(-1, 1, 1) * n).view(-1)
    points = x.transpose(2, 1).contiguous()
    neighbours = points.view(b * n, -1)[index].view(b, n, k, c)
    centre = points.view(b, n, 1, c).expand(b, n, k, c)
    return torch.cat([neighbours - centre, centre], 3).permute(0, 3, 1, 2)


class Dgcnn(nn.Module):
    """DGCNN (Wang et al.), point-cloud classification by EdgeConv: each layer finds every point's
    k nearest neighbours in its current features (a MatMul of distances and TopK), gathers them,
    runs a 1x1 convolution over the edge features and takes the maximum over the neighbours."""

    def __init__(self, k):
        super().__init__()
        self.k = k

        def edge(i, o):
            return nn.Sequential(nn.Conv2d(2 * i, o, 1, bias=False), nn.BatchNorm2d(o),
                                 nn.LeakyReLU(0.2))

        self.edges = nn.ModuleList([edge(3, 64), edge(64, 64), edge(64, 128)])
        self.merge = nn.Sequential(nn.Conv1d(256, 512, 1, bias=False), nn.BatchNorm1d(512),
                                   nn.LeakyReLU(0.2))
        self.fc = nn.Linear(512, 40)

    def forward(self, points):
        features, x = [], points
        for edge in self.edges:
            x = edge(_edge_features(x, self.k)).max(-1)[0]
            features.append(x)
        return self.fc(self.merge(torch.cat(features, 1)).max(-1)[0])


def dgcnn(reduced):
    points, k = (256, 10) if reduced else (1024, 20)
    return Dgcnn(k), [("points", torch.randn(1, 3, points))]


class DcganGenerator(nn.Module):
    """DCGAN's generator: ConvTranspose 4x4 stride 2 layers with BatchNorm and ReLU from a latent
    [N, 100, 1, 1] to a 64 x 64 RGB image; the last one has 3 output channels."""

    def __init__(self, latent, width):
        super().__init__()
        layers, channels = [], [latent, width * 8, width * 4, width * 2, width]
        for i in range(4):
            layers += [nn.ConvTranspose2d(channels[i], channels[i + 1], 4, 1 if i == 0 else 2,
                                          0 if i == 0 else 1, bias=False),
                       nn.BatchNorm2d(channels[i + 1]), nn.ReLU()]
        self.net = nn.Sequential(*layers, nn.ConvTranspose2d(width, 3, 4, 2, 1), nn.Tanh())

    def forward(self, z):
        return self.net(z)


def dcgan_generator(reduced):
    latent, width = (16, 8) if reduced else (100, 64)
    return DcganGenerator(latent, width), [("z", torch.randn(1, latent, 1, 1))]


class DnCnn(nn.Module):
    """DnCNN (Zhang et al.), an image denoiser: 3x3 convolutions with BatchNorm and ReLU at full
    resolution, the last one to the image's single channel, the noise subtracted from the input."""

    def __init__(self, depth, width):
        super().__init__()
        layers = [nn.Conv2d(1, width, 3, 1, 1), nn.ReLU()]
        for _ in range(depth - 2):
            layers += [nn.Conv2d(width, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width),
                       nn.ReLU()]
        self.net = nn.Sequential(*layers, nn.Conv2d(width, 1, 3, 1, 1))

    def forward(self, x):
        return x - self.net(x)


def dncnn(reduced):
    depth, width, size = (5, 16, 64) if reduced else (17, 64, 256)
    return DnCnn(depth, width), [("input", torch.randn(1, 1, size, size))]


class _MixedDepthwise(nn.Module):
    """MixConv: the channels split into groups, each with its own depthwise kernel size, joined."""

    def __init__(self, channels, stride, kernels):
        super().__init__()
        self.parts = [channels // len(kernels)] * len(kernels)
        self.parts[0] += channels - sum(self.parts)
        self.convs = nn.ModuleList([nn.Conv2d(c, c, k, stride, k // 2, groups=c, bias=False)
                                    for c, k in zip(self.parts, kernels)])

    def forward(self, x):
        parts = torch.split(x, self.parts, 1)
        return torch.cat([conv(part) for conv, part in zip(self.convs, parts)], 1)


class _MixBlock(nn.Module):
    def __init__(self, i, o, stride, kernels, expand=6):
        super().__init__()
        m = i * expand
        self.expand = nn.Sequential(nn.Conv2d(i, m, 1, bias=False), nn.BatchNorm2d(m), nn.SiLU())
        # The normalization after the join, as timm's MixNet has it.
        self.mixed = nn.Sequential(_MixedDepthwise(m, stride, kernels), nn.BatchNorm2d(m),
                                   nn.SiLU())
        squeezed = max(i // 4, 8)
        self.reduce = nn.Conv2d(m, squeezed, 1)
        self.excite = nn.Conv2d(squeezed, m, 1)
        self.project = nn.Sequential(nn.Conv2d(m, o, 1, bias=False), nn.BatchNorm2d(o))
        self.residual = stride == 1 and i == o

    def forward(self, x):
        h = self.mixed(self.expand(x))
        # timm's squeeze-and-excitation: a mean over the image, not an adaptive pooling.
        h = h * torch.sigmoid(self.excite(F.silu(self.reduce(h.mean((2, 3), keepdim=True)))))
        h = self.project(h)
        return x + h if self.residual else h


class MixNet(nn.Module):
    """MixNet-S-like (Tan & Le): inverted residual blocks whose depthwise convolutions mix kernel
    sizes 3-9 over split channel groups, squeeze-and-excitation by a mean, SiLU."""

    def __init__(self, stages, classes):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16),
                                  nn.ReLU())
        blocks, c = [], 16
        for o, n, stride, kernels in stages:
            for j in range(n):
                blocks.append(_MixBlock(c, o, stride if j == 0 else 1, kernels))
                c = o
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Sequential(nn.Conv2d(c, 1024, 1, bias=False), nn.BatchNorm2d(1024),
                                  nn.ReLU())
        self.fc = nn.Linear(1024, classes)

    def forward(self, x):
        return self.fc(self.head(self.blocks(self.stem(x))).mean((2, 3)))


def mixnet(reduced):
    stages = [(24, 2, 2, (3,)), (40, 3, 2, (3, 5, 7)), (80, 3, 2, (3, 5, 7)),
              (120, 3, 1, (3, 5, 7, 9)), (200, 3, 2, (3, 5, 7, 9))]
    if reduced:
        stages = [(24, 1, 2, (3,)), (40, 1, 2, (3, 5, 7)), (80, 1, 2, (3, 5, 7, 9))]
    size = 64 if reduced else 224
    return MixNet(stages, 1000), [("input", torch.randn(1, 3, size, size))]


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
    "ghostnet": (ghostnet, True),
    "convnext_tiny": (convnext_tiny, True),
    "vgg11": (vgg11, True),
    "alexnet": (alexnet, True),
    "vit": (vit, True),
    "swin_t": (swin_t, False),
    "swin_v2_t": (swin_v2_t, False),
    "maxvit_t": (maxvit_t, False),
    "mlp_mixer": (mlp_mixer, True),
    "mobilevit_xs": (mobilevit_xs, True),
    "deeplabv3_mobilenet": (deeplabv3_mobilenet, True),
    "lraspp_mobilenet": (lraspp_mobilenet, True),
    # the detections of the first image, however many NMS keeps: no batch axis
    "ssdlite_full": (ssdlite_full, False),
    "raft_small": (raft_small, False),
    "unet": (unet, True),
    "yolo_detector": (yolo_detector, True),
    "anchor_free_detector": (anchor_free_detector, True),
    "r3d_18": (r3d_18, True),
    "s3d": (s3d, True),
    "pointnet": (pointnet, True),
    "cyclegan_generator": (cyclegan_generator, True),
    "espcn": (espcn, True),
    "edsr": (edsr, True),
    "diffusion_unet": (diffusion_unet, True),
    "mobilefacenet": (mobilefacenet, True),
    "recurrent": (recurrent, False),
    "bert_tokens": (bert_tokens, False),
    "gpt_decoder": (gpt_decoder, False),
    "t5_encoder": (t5_encoder, False),
    "conformer": (conformer, False),
    "einsum_encoder": (einsum_encoder, False),
    # the cache's leading axis is the layer, its batch the second
    "gpt2_kv": (gpt2_kv, False),
    "wav2vec2": (wav2vec2, False),
    "textcnn": (textcnn, True),
    "detr": (detr, False),
    "whisper_enc": (whisper_enc, False),
    # graph and point sets: their leading axis is no batch
    "gcn": (gcn, False),
    "nerf_mlp": (nerf_mlp, False),
    "lstnet": (lstnet, False),
    # index inputs
    "din_recommender": (din_recommender, False),
    "dlrm": (dlrm, False),
    # a point set: its leading axis is the cloud, its points the last
    "dgcnn": (dgcnn, False),
    "dcgan_generator": (dcgan_generator, True),
    "dncnn": (dncnn, True),
    "mixnet": (mixnet, True),
    "x3d": (x3d, True),
    "cspdarknet_mish": (cspdarknet_mish, True),
}
