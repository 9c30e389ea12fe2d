"""Train the shipped target and draft TinyGPTs from scratch, deterministically.

    python -m specdec_lib.train            # both models, writes specdec_lib/weights/
    python -m specdec_lib.train --steps 50 --out /tmp/w   # a quick smoke run

Every batch is freshly generated text (``data.training_text``) from a generator
seeded by the step number, so there is no fixed corpus to memorise and the run
is reproducible on the same machine and PyTorch version.
"""

from __future__ import annotations

import argparse
import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from .data import training_text
from .model import ModelConfig, TinyGPT
from .weights import CONFIGS, WEIGHTS_DIR, save_model


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 1200
    batch_size: int = 12
    lr: float = 2e-3
    warmup: int = 100
    weight_decay: float = 0.1
    seed: int = 0

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise ValueError(f"steps must be >= 1, got {self.steps}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")


TRAIN_CONFIGS = {
    "target": TrainConfig(steps=1200, batch_size=12, lr=2e-3),
    "draft": TrainConfig(steps=1200, batch_size=12, lr=3e-3),
}


def training_batch(seed: int, step: int, batch_size: int, block_size: int) -> torch.Tensor:
    """(batch_size, block_size + 1) byte ids: random windows of fresh training text."""
    rng = random.Random(f"train/{seed}/{step}")
    rows = []
    for _ in range(batch_size):
        text = training_text(rng, 2 * block_size).encode("utf-8")
        start = rng.randrange(len(text) - block_size - 1)
        rows.append(list(text[start : start + block_size + 1]))
    return torch.tensor(rows, dtype=torch.long)


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warm-up, then cosine decay to a tenth of the peak."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    progress = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


@dataclass
class TrainResult:
    model: TinyGPT
    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0


def train(model_config: ModelConfig, cfg: TrainConfig, progress: bool = True) -> TrainResult:
    """Train a fresh TinyGPT; return it with the loss of every step."""
    torch.manual_seed(cfg.seed)
    model = TinyGPT(model_config)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": cfg.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=cfg.lr,
        betas=(0.9, 0.95),
    )
    result = TrainResult(model)
    start = time.perf_counter()
    model.train()
    bar = tqdm(range(cfg.steps), disable=not progress, desc="training")
    for step in bar:
        batch = training_batch(cfg.seed, step, cfg.batch_size, model_config.block_size)
        x, y = batch[:, :-1], batch[:, 1:]
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
        for group in opt.param_groups:
            group["lr"] = lr_at(step, cfg)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        result.losses.append(loss.item())
        if step % 50 == 0:
            bar.set_postfix(loss=f"{loss.item():.3f}")
    model.eval()
    result.seconds = time.perf_counter() - start
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--models", nargs="+", default=["target", "draft"], choices=["target", "draft"]
    )
    parser.add_argument("--steps", type=int, default=None, help="override the step count")
    parser.add_argument("--out", type=Path, default=WEIGHTS_DIR)
    args = parser.parse_args()
    torch.use_deterministic_algorithms(True)
    for name in args.models:
        cfg = TRAIN_CONFIGS[name]
        if args.steps is not None:
            cfg = TrainConfig(**{**cfg.__dict__, "steps": args.steps})
        result = train(CONFIGS[name], cfg)
        info = {
            "train_config": cfg.__dict__,
            "final_loss": sum(result.losses[-50:]) / len(result.losses[-50:]),
            "train_seconds": round(result.seconds, 1),
            "torch": torch.__version__,
            "command": "python -m specdec_lib.train",
        }
        path = save_model(result.model, name, info, args.out)
        print(
            f"{name}: {result.model.num_parameters():,} parameters, "
            f"final loss {info['final_loss']:.3f}, {result.seconds:.0f} s -> {path}"
        )


if __name__ == "__main__":
    main()
