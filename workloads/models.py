"""The model factory of the workload harness: plain torch, synthetic data, no torchvision.

Each model comes with a batch maker and a loss, so the harness can train or infer any of them
the same way. Default sizes run in seconds on 2 CPU cores; flags restore the real sizes
(``--image-size 224`` for ResNet-50, ``--hidden 768 --layers 12`` for BERT-base).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F


@dataclass
class Spec:
    """A model, how to make one synthetic batch for it, and its loss."""

    model: nn.Module
    batch: Callable[[int], tuple[Any, Any]]  # batch size -> (inputs, targets)
    loss: Callable[[Any, Any], torch.Tensor]


# -- ResNet-50 (He et al.), the bottleneck variant torchvision ships ---------------------------

class Bottleneck(nn.Module):
    """1x1 -> 3x3 -> 1x1 convolutions with a residual connection."""

    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        out = planes * self.expansion
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.down: nn.Module = nn.Identity()
        if stride != 1 or inplanes != out:
            self.down = nn.Sequential(nn.Conv2d(inplanes, out, 1, stride, bias=False),
                                      nn.BatchNorm2d(out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return the block's output."""
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        return F.relu(self.bn3(self.conv3(y)) + self.down(x))


class ResNet50(nn.Module):
    """ResNet-50: stages of 3, 4, 6 and 3 bottleneck blocks."""

    def __init__(self, classes: int = 1000) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
                                  nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1))
        layers: list[nn.Module] = []
        inplanes = 64
        for planes, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            for i in range(blocks):
                layers.append(Bottleneck(inplanes, planes, stride if i == 0 else 1))
                inplanes = planes * Bottleneck.expansion
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(inplanes, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return class logits."""
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


# -- a BERT-style encoder ------------------------------------------------------------------

class BertEncoder(nn.Module):
    """Token, position and segment embeddings, then pre-LN-free post-norm encoder layers."""

    def __init__(self, vocab: int, hidden: int, layers: int, heads: int, seq: int) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab, hidden)
        self.positions = nn.Embedding(seq, hidden)
        self.segments = nn.Embedding(2, hidden)
        self.norm = nn.LayerNorm(hidden)
        layer = nn.TransformerEncoderLayer(hidden, heads, 4 * hidden, dropout=0.1,
                                           activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.mlm = nn.Linear(hidden, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Return masked-language-model logits for every position."""
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.norm(self.tokens(ids) + self.positions(pos) + self.segments(torch.zeros_like(ids)))
        return self.mlm(self.encoder(x))


# -- a deepwave-style 3-D acoustic wave step -----------------------------------------------

class WaveStep3d(nn.Module):
    """Propagates a 3-D scalar wave through a learnable velocity model (as in deepwave's FWI).

    Each time step pads the wavefield with ReplicationPad3d (reflection-free edges), takes the
    7-point Laplacian, and advances with the second-order leapfrog scheme. The loss compares the
    recorded surface traces with synthetic observations, so backward yields the velocity
    gradient, as full-waveform inversion does.
    """

    def __init__(self, size: int, steps: int) -> None:
        super().__init__()
        self.velocity = nn.Parameter(torch.full((1, 1, size, size, size), 1.5))
        self.pad = nn.ReplicationPad3d(1)
        self.steps = steps
        self.dt2 = 0.1

    def forward(self, source: torch.Tensor) -> torch.Tensor:
        """Return the wavefield at the top face after ``steps`` steps, per time step."""
        prev = torch.zeros_like(source)
        cur = source
        traces = []
        for _ in range(self.steps):
            p = self.pad(cur)
            lap = (p[:, :, 2:, 1:-1, 1:-1] + p[:, :, :-2, 1:-1, 1:-1] + p[:, :, 1:-1, 2:, 1:-1]
                   + p[:, :, 1:-1, :-2, 1:-1] + p[:, :, 1:-1, 1:-1, 2:] + p[:, :, 1:-1, 1:-1, :-2]
                   - 6 * cur)
            prev, cur = cur, 2 * cur - prev + self.dt2 * self.velocity ** 2 * lap
            traces.append(cur[:, :, 0])
        return torch.stack(traces, 1)


# -- a CIFAR-100-style CNN -----------------------------------------------------------------

def cifar_cnn(classes: int = 100) -> nn.Module:
    """A small VGG-like CNN for 32x32 images."""
    def block(cin: int, cout: int) -> nn.Sequential:
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                             nn.ReLU(inplace=True), nn.MaxPool2d(2))
    return nn.Sequential(block(3, 32), block(32, 64), block(64, 128), nn.Flatten(),
                         nn.Linear(128 * 4 * 4, 256), nn.ReLU(inplace=True),
                         nn.Linear(256, classes))


def build(name: str, args: Any, device: torch.device, dtype: torch.dtype) -> Spec:
    """Return the Spec of the named model, on ``device`` in ``dtype``."""
    layout = (torch.channels_last if getattr(args, "channels_last", False)
              else torch.contiguous_format)

    def images(size: int, classes: int) -> Callable[[int], tuple[Any, Any]]:
        return lambda n: (torch.randn(n, 3, size, size, device=device, dtype=dtype).to(
            memory_format=layout), torch.randint(0, classes, (n,), device=device))

    if name == "resnet50":
        model: nn.Module = ResNet50()
        return Spec(model.to(device, dtype, memory_format=layout), images(args.image_size, 1000),
                    F.cross_entropy)
    if name == "cifar100":
        return Spec(cifar_cnn().to(device, dtype), images(32, 100), F.cross_entropy)
    if name == "mlp":
        mlp = nn.Sequential(nn.Linear(256, args.hidden), nn.ReLU(), nn.Linear(args.hidden,
                            args.hidden), nn.ReLU(), nn.Linear(args.hidden, 10)).to(device, dtype)
        return Spec(mlp, lambda n: (torch.randn(n, 256, device=device, dtype=dtype),
                                    torch.randint(0, 10, (n,), device=device)), F.cross_entropy)
    if name == "bert":
        vocab, seq = args.vocab, args.seq_len
        bert = BertEncoder(vocab, args.hidden, args.layers, args.heads, seq).to(device, dtype)

        def tokens(n: int) -> tuple[Any, Any]:
            ids = torch.randint(0, vocab, (n, seq), device=device)
            return ids, ids

        return Spec(bert, tokens, lambda logits, ids: F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), ids.reshape(-1)))
    if name == "deepwave":
        wave = WaveStep3d(args.grid, args.time_steps).to(device, dtype)
        size = args.grid

        def shot(n: int) -> tuple[Any, Any]:
            src = torch.zeros(n, 1, size, size, size, device=device, dtype=dtype)
            src[:, :, size // 2, size // 2, size // 2] = 1.0
            return src, torch.zeros(n, args.time_steps, 1, size, size, device=device, dtype=dtype)

        return Spec(wave, shot, F.mse_loss)
    raise ValueError(f"unknown model {name!r}")


MODELS = ("resnet50", "bert", "deepwave", "cifar100", "mlp")
