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
    "recurrent": (recurrent, False),
    "bert_tokens": (bert_tokens, False),
    "gpt_decoder": (gpt_decoder, False),
}
