"""Model profiles: per-layer gradient sizes and compute times of four standard models.

A profile is what a training iteration looks like to the network: which gradient tensors
become ready in which order during the backward pass, how large they are, and how long the
computation between them takes. Parameter counts are facts derived here from each published
architecture (and checked against the well-known totals); FLOP counts follow from the same
shapes. Compute *times* are assumptions (see :data:`DEFAULT_FLOPS_PER_S`).

Layers are listed in forward order; gradients become ready in the reverse order
(:meth:`ModelProfile.backward_order`). Tensor fusion groups them into buckets of at most a
given number of bytes (:meth:`ModelProfile.buckets`), as Horovod and PyTorch DDP do.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

#: Effective training throughput assumed for one accelerator, in FLOP/s. 30 TFLOP/s is what a
#: V100 in mixed precision sustains on ResNet-50 (about 1,200 images/s at 3 x 8.2 GFLOP per
#: image); it is an assumption for shaping traffic, not a measurement.
DEFAULT_FLOPS_PER_S = 30e12

#: Backward pass cost relative to the forward pass (gradients for inputs and weights).
BACKWARD_FACTOR = 2.0


@dataclass(frozen=True)
class Layer:
    """One module with parameters: its name, parameter count and forward FLOPs per sample."""

    name: str
    params: int
    fwd_flops: float


@dataclass(frozen=True)
class Bucket:
    """A fused group of gradient tensors sent as one message (layer names in backward order)."""

    layers: tuple[str, ...]
    params: int
    nbytes: int


@dataclass(frozen=True)
class ModelProfile:
    """A model as the network sees it; ``batch`` samples per worker per iteration."""

    name: str
    layers: tuple[Layer, ...]
    batch: int
    sample: str

    @property
    def params(self) -> int:
        """Total parameter count."""
        return sum(layer.params for layer in self.layers)

    def gradient_bytes(self, bytes_per_param: int = 4) -> int:
        """Size of one full gradient."""
        return self.params * bytes_per_param

    @property
    def fwd_flops(self) -> float:
        """Forward FLOPs per sample."""
        return sum(layer.fwd_flops for layer in self.layers)

    def backward_order(self) -> tuple[Layer, ...]:
        """Layers in the order their gradients become ready (last layer first)."""
        return tuple(reversed(self.layers))

    def compute_times(
        self, flops_per_s: float = DEFAULT_FLOPS_PER_S
    ) -> tuple[tuple[str, float, float], ...]:
        """``(name, forward_s, backward_s)`` per layer for one iteration of ``batch`` samples."""
        if flops_per_s <= 0:
            raise ValueError(f"flops_per_s must be > 0, got {flops_per_s}")
        return tuple(
            (
                layer.name,
                layer.fwd_flops * self.batch / flops_per_s,
                BACKWARD_FACTOR * layer.fwd_flops * self.batch / flops_per_s,
            )
            for layer in self.layers
        )

    def iteration_compute_s(self, flops_per_s: float = DEFAULT_FLOPS_PER_S) -> float:
        """Forward plus backward time of one iteration without communication."""
        return sum(f + b for _, f, b in self.compute_times(flops_per_s))

    def buckets(self, bucket_bytes: int, bytes_per_param: int = 4) -> tuple[Bucket, ...]:
        """Tensor-fusion buckets in backward order.

        A bucket is closed when the next tensor would push it past ``bucket_bytes``; a tensor
        larger than ``bucket_bytes`` travels alone.
        """
        if bucket_bytes < 1:
            raise ValueError(f"bucket_bytes must be >= 1, got {bucket_bytes}")
        out: list[Bucket] = []
        names: list[str] = []
        params = 0
        for layer in self.backward_order():
            size = layer.params * bytes_per_param
            if names and (params * bytes_per_param + size) > bucket_bytes:
                out.append(Bucket(tuple(names), params, params * bytes_per_param))
                names, params = [], 0
            names.append(layer.name)
            params += layer.params
        if names:
            out.append(Bucket(tuple(names), params, params * bytes_per_param))
        return tuple(out)

    def scaled(self, factor: float) -> ModelProfile:
        """The profile shrunk ``factor`` times in parameters and FLOPs (at least 1 parameter each).

        Shrinking both by the same factor keeps the compute-to-communication ratio when the
        emulated links are also ``factor`` times slower than the real ones.
        """
        if factor <= 0:
            raise ValueError(f"factor must be > 0, got {factor}")
        layers = tuple(
            dataclasses.replace(
                layer,
                params=max(1, round(layer.params / factor)),
                fwd_flops=layer.fwd_flops / factor,
            )
            for layer in self.layers
        )
        return dataclasses.replace(self, name=f"{self.name}/{factor:g}", layers=layers)


class _Builder:
    """Collects layers while walking an architecture; tracks nothing else."""

    def __init__(self) -> None:
        self.layers: list[Layer] = []

    def add(self, name: str, params: int, fwd_flops: float) -> None:
        self.layers.append(Layer(name, params, float(fwd_flops)))

    def conv(self, name: str, cin: int, cout: int, k: int, out_hw: int, bias: bool) -> None:
        weights = cin * cout * k * k
        self.add(name, weights + (cout if bias else 0), 2.0 * weights * out_hw * out_hw)

    def bn(self, name: str, channels: int, hw: int) -> None:
        self.add(name, 2 * channels, 4.0 * channels * hw * hw)

    def linear(self, name: str, fin: int, fout: int, tokens: int = 1) -> None:
        self.add(name, fin * fout + fout, 2.0 * fin * fout * tokens)

    def layernorm(self, name: str, dim: int, tokens: int) -> None:
        self.add(name, 2 * dim, 5.0 * dim * tokens)


def resnet50() -> ModelProfile:
    """ResNet-50 (v1.5: stride on the 3x3 convolution), 224x224 ImageNet, 1000 classes."""
    b = _Builder()
    b.conv("conv1", 3, 64, 7, 112, bias=False)
    b.bn("bn1", 64, 112)
    cin, hw = 64, 56
    for stage, (width, blocks) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3)), start=1):
        cout = 4 * width
        for block in range(blocks):
            stride = 2 if block == 0 and stage > 1 else 1
            out_hw = hw // stride
            p = f"layer{stage}.{block}"
            b.conv(f"{p}.conv1", cin, width, 1, hw, bias=False)
            b.bn(f"{p}.bn1", width, hw)
            b.conv(f"{p}.conv2", width, width, 3, out_hw, bias=False)
            b.bn(f"{p}.bn2", width, out_hw)
            b.conv(f"{p}.conv3", width, cout, 1, out_hw, bias=False)
            b.bn(f"{p}.bn3", cout, out_hw)
            if block == 0:
                b.conv(f"{p}.downsample.0", cin, cout, 1, out_hw, bias=False)
                b.bn(f"{p}.downsample.1", cout, out_hw)
            cin, hw = cout, out_hw
    b.linear("fc", 2048, 1000)
    return ModelProfile("resnet50", tuple(b.layers), batch=64, sample="224x224 image")


def vgg16() -> ModelProfile:
    """VGG-16 (configuration D, no batch norm), 224x224 ImageNet, 1000 classes."""
    b = _Builder()
    cfg = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")
    cin, hw, index = 3, 224, 0
    for item in cfg:
        if item == "M":
            hw //= 2
        else:
            assert isinstance(item, int)
            b.conv(f"features.{index}", cin, item, 3, hw, bias=True)
            cin = item
        index += 1 if item == "M" else 2  # conv + ReLU occupy two slots, as in torchvision
    b.linear("classifier.0", 512 * 7 * 7, 4096)
    b.linear("classifier.3", 4096, 4096)
    b.linear("classifier.6", 4096, 1000)
    return ModelProfile("vgg16", tuple(b.layers), batch=64, sample="224x224 image")


def _attention_scores_flops(seq: int, dim: int) -> float:
    """FLOPs of ``softmax(QK^T)V`` for one sequence (the two batched matrix products)."""
    return 2.0 * 2.0 * seq * seq * dim


def bert_base(seq_len: int = 128) -> ModelProfile:
    """BERT-base (uncased): 12 layers, hidden 768, 12 heads, FFN 3072, vocab 30522, with pooler."""
    d, ffn, vocab, layers = 768, 3072, 30522, 12
    b = _Builder()
    b.add("embeddings.word_embeddings", vocab * d, 0.0)
    b.add("embeddings.position_embeddings", 512 * d, 0.0)
    b.add("embeddings.token_type_embeddings", 2 * d, 0.0)
    b.layernorm("embeddings.LayerNorm", d, seq_len)
    for i in range(layers):
        p = f"encoder.layer.{i}"
        b.linear(f"{p}.attention.self.query", d, d, seq_len)
        b.linear(f"{p}.attention.self.key", d, d, seq_len)
        value_flops = 2.0 * d * d * seq_len + _attention_scores_flops(seq_len, d)
        b.add(f"{p}.attention.self.value", d * d + d, value_flops)
        b.linear(f"{p}.attention.output.dense", d, d, seq_len)
        b.layernorm(f"{p}.attention.output.LayerNorm", d, seq_len)
        b.linear(f"{p}.intermediate.dense", d, ffn, seq_len)
        b.linear(f"{p}.output.dense", ffn, d, seq_len)
        b.layernorm(f"{p}.output.LayerNorm", d, seq_len)
    b.linear("pooler.dense", d, d)
    return ModelProfile("bert-base", tuple(b.layers), batch=32, sample=f"{seq_len}-token sequence")


def transformer_base(seq_len: int = 32, vocab: int = 37000) -> ModelProfile:
    """Transformer (base) for translation: 6+6 layers, d=512, 8 heads, FFN 2048.

    One ``vocab x 512`` embedding is shared by encoder input, decoder input and the output
    projection, as in the original paper (shared 37k BPE vocabulary). Its gradient is the
    last to become ready. A sample is one sentence pair of ``seq_len`` tokens each side.
    """
    d, ffn, n_layers = 512, 2048, 6
    b = _Builder()
    b.add("embed_tokens", vocab * d, 2.0 * vocab * d * seq_len)  # output projection (tied)

    def attention(name: str, q_len: int, kv_len: int) -> None:
        flops = 2.0 * 4 * d * d * q_len + 2.0 * 2.0 * q_len * kv_len * d
        b.add(name, 4 * (d * d + d), flops)

    for i in range(n_layers):
        p = f"encoder.layers.{i}"
        attention(f"{p}.self_attn", seq_len, seq_len)
        b.layernorm(f"{p}.self_attn_layer_norm", d, seq_len)
        b.linear(f"{p}.fc1", d, ffn, seq_len)
        b.linear(f"{p}.fc2", ffn, d, seq_len)
        b.layernorm(f"{p}.final_layer_norm", d, seq_len)
    for i in range(n_layers):
        p = f"decoder.layers.{i}"
        attention(f"{p}.self_attn", seq_len, seq_len)
        b.layernorm(f"{p}.self_attn_layer_norm", d, seq_len)
        attention(f"{p}.encoder_attn", seq_len, seq_len)
        b.layernorm(f"{p}.encoder_attn_layer_norm", d, seq_len)
        b.linear(f"{p}.fc1", d, ffn, seq_len)
        b.linear(f"{p}.fc2", ffn, d, seq_len)
        b.layernorm(f"{p}.final_layer_norm", d, seq_len)
    return ModelProfile("transformer-base", tuple(b.layers), batch=128, sample="sentence pair")


PROFILES: dict[str, Callable[[], ModelProfile]] = {
    "resnet50": resnet50,
    "vgg16": vgg16,
    "bert-base": bert_base,
    "transformer-base": transformer_base,
}


def scaled_flops_per_s(scale: float) -> float:
    """The modelled accelerator for a profile shrunk ``scale`` times: as much slower, so its
    compute keeps its ratio to links slowed as much (:meth:`ModelProfile.scaled`)."""
    return DEFAULT_FLOPS_PER_S / scale


def get_profile(name: str, scale: float = 1.0) -> ModelProfile:
    """The named profile, shrunk ``scale`` times (``scale=1`` keeps the real sizes)."""
    try:
        build = PROFILES[name]
    except KeyError:
        raise ValueError(f"no model profile named {name!r}; known: {', '.join(PROFILES)}") from None
    profile = build()
    return profile if scale == 1.0 else profile.scaled(scale)
