"""Train Medusa heads on the shipped target's features, deterministically.

    python -m specdec_lib.engine.train_heads            # writes specdec_lib/weights/heads.*
    python -m specdec_lib.engine.train_heads --steps 20 --out /tmp/w   # a quick smoke run

The target is frozen: each step generates fresh training text (the target's own recipe,
``train.training_batch``, under a seed of its own), runs the target once to get its
final hidden states, and trains head i to predict the token i + 1 places ahead of each
position (Medusa-1: the heads alone learn; the target's output layer is shared and
stays as it is). Every ``probe_every`` steps it records each head's top-1 accuracy on
what the target writes for held-out prompts of every workload, so the curve shows what
each head learned where: ``heads.json`` keeps it beside the weights, with their checksum
and the target's, since the heads read one target's features and no other's.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from tqdm.auto import tqdm

from specdec_lib.checks import check_ints
from specdec_lib.engine.generate import generate
from specdec_lib.engine.heads import HEADS_FILE, HEADS_INFO, MedusaHeads
from specdec_lib.engine.model import TinyGPT
from specdec_lib.engine.sampling import SamplingParams
from specdec_lib.engine.train import TrainConfig, frozen, lr_at, training_batch
from specdec_lib.engine.weights import WEIGHTS_DIR, load_model, read_manifest, sha256
from specdec_lib.text.language import WORKLOADS, workload_prompts
from specdec_lib.text.tokenizer import Tokenizer

_PROBE_SEED = 1977  # a workload seed nothing else uses
_PROBE_PROMPTS = 8
_PROBE_TOKENS = 48


@dataclass(frozen=True)
class HeadsConfig(TrainConfig):
    """The target's text stream and learning-rate schedule (:class:`~.train.TrainConfig`),
    shorter and at a higher peak, for ``n_heads`` heads scoring every ``stride``-th position."""

    steps: int = 900
    batch_size: int = 8
    lr: float = 1e-2  # warm-up, plateau and decay as the target's (train.lr_at)
    weight_decay: float = 0.0
    seed: int = 1  # the text stream's seed: the target trained on seed 0's
    n_heads: int = 4
    stride: int = 2  # score every second position, alternating between steps

    def __post_init__(self) -> None:
        super().__post_init__()
        check_ints(self, ("n_heads", "stride"))


def head_losses(
    heads: MedusaHeads, hidden: torch.Tensor, ids: torch.Tensor, stride: int = 1, offset: int = 0
) -> torch.Tensor:
    """Cross-entropy of each head (n_heads,): hidden (B, W, C) from ids[:, :W] (W + 1 ids);
    head i (0-based) at position t guesses ids[t + 2 + i]. Only positions t = offset,
    offset + stride, ... are scored: the output layer over the vocabulary is most of a
    step's cost, and neighbouring positions teach much the same thing."""
    W = hidden.shape[1]
    t = torch.arange(offset, W, stride)
    logits = heads(hidden[:, t])  # (n, B, len(t), V)
    out = []
    for i in range(heads.n_heads):
        ok = t + 2 + i <= W  # positions with a token i + 2 ahead
        guess = logits[i, :, ok]
        truth = ids[:, t[ok] + 2 + i]
        out.append(F.cross_entropy(guess.reshape(-1, guess.shape[-1]), truth.reshape(-1)))
    return torch.stack(out)


def _probe_sequences(target: TinyGPT) -> dict[str, tuple[list[list[int]], int]]:
    """Per workload: held-out prompts followed by the target's greedy continuation."""
    tok, out = Tokenizer(), {}
    params = SamplingParams(max_tokens=_PROBE_TOKENS)
    for w in WORKLOADS:
        seqs = []
        for prompt in workload_prompts(w, _PROBE_PROMPTS, _PROBE_SEED):
            ids = tok.encode(prompt)
            seqs.append(ids + generate(target, ids, params))
        out[w] = (seqs, _PROBE_TOKENS)
    return out


@torch.no_grad()
def _probe_accuracy(target: TinyGPT, heads: MedusaHeads, probes: dict) -> dict[str, list[float]]:
    """Per workload, each head's top-1 accuracy over the target's own continuations."""
    out = {}
    for w, (seqs, n) in probes.items():
        hits, total = [0] * heads.n_heads, [0] * heads.n_heads
        for ids in seqs:
            _, hidden = target(torch.tensor([ids]), hidden=True)
            guess = heads(hidden[0]).argmax(-1)  # (n_heads, T)
            start = len(ids) - n - 1  # the position whose next token is the first written
            for i in range(heads.n_heads):
                for t in range(start, len(ids) - 2 - i):
                    hits[i] += int(guess[i, t]) == ids[t + 2 + i]
                    total[i] += 1
        out[w] = [round(h / t, 4) for h, t in zip(hits, total, strict=True)]
    return out


def train_heads(
    target: TinyGPT, cfg: HeadsConfig, progress: bool = True, probe: bool = True
) -> tuple[MedusaHeads, list[dict], float]:
    """Train fresh heads on the frozen ``target``: the heads, the probe curve, seconds.
    ``probe=False`` records the losses only (a quick check)."""
    with frozen(target):
        torch.manual_seed(cfg.seed)
        heads = MedusaHeads(target, cfg.n_heads)
        opt = torch.optim.AdamW(heads.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        tok, curve, losses = Tokenizer(), [], []
        probes = _probe_sequences(target) if probe else {}
        start = time.perf_counter()
        bar = tqdm(range(cfg.steps + 1), disable=not progress, desc="training heads")
        for step in bar:
            if step % cfg.probe_every == 0 or step == cfg.steps:
                recent = losses[-cfg.probe_every :]  # none before the first step
                point = {
                    "step": step,
                    "seconds": round(time.perf_counter() - start, 1),
                    "loss": [
                        round(sum(x[i] for x in recent) / len(recent), 4)
                        for i in range(cfg.n_heads)
                    ]
                    if recent
                    else None,
                    "accuracy": _probe_accuracy(target, heads, probes),
                }
                curve.append(point)
                bar.write(json.dumps(point))
            if step == cfg.steps:
                break
            ids = training_batch(cfg, step, tok)
            with torch.no_grad():
                _, hidden = target(ids[:, :-1], hidden=True)
            loss = head_losses(heads, hidden, ids, cfg.stride, step % cfg.stride)
            for group in opt.param_groups:
                group["lr"] = lr_at(step, cfg)
            opt.zero_grad(set_to_none=True)
            loss.sum().backward()
            opt.step()
            losses.append(loss.tolist())
        return heads.eval(), curve, time.perf_counter() - start


def _save_heads(heads: MedusaHeads, info: dict, directory: Path = WEIGHTS_DIR) -> Path:
    """Write the heads' weights and ``heads.json``: checksum, the target's, the recipe."""
    path = directory / HEADS_FILE
    save_file({k: v.contiguous() for k, v in heads.state_dict().items()}, str(path))
    record = {"file": path.name, "sha256": sha256(path), "n_heads": heads.n_heads, **info}
    (directory / HEADS_INFO).write_text(json.dumps(record, indent=1) + "\n")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=None, help="override the step count")
    parser.add_argument("--out", type=Path, default=WEIGHTS_DIR)
    args = parser.parse_args()
    torch.set_num_threads(1)  # one thread, deterministic: the same heads, bit for bit
    torch.use_deterministic_algorithms(True)
    cfg = HeadsConfig() if args.steps is None else HeadsConfig(steps=args.steps)
    target = load_model("target")
    heads, curve, seconds = train_heads(target, cfg)
    args.out.mkdir(parents=True, exist_ok=True)
    info = {
        "target_sha256": read_manifest()["target"]["sha256"],
        "train_config": asdict(cfg),
        "train_seconds": round(seconds, 1),
        "torch": torch.__version__,
        "threads": 1,
        "command": "python -m specdec_lib.engine.train_heads",
        "curve": curve,
    }
    path = _save_heads(heads, info, args.out)
    print(
        f"heads: {sum(p.numel() for p in heads.parameters()):,} parameters, "
        f"{seconds:.0f} s -> {path}; last probe {curve[-1]['accuracy']}"
    )


if __name__ == "__main__":
    main()
