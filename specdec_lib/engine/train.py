"""Train the shipped target and draft TinyGPTs from scratch, deterministically.

    python -m specdec_lib.engine.train            # both models, writes specdec_lib/weights/
    python -m specdec_lib.engine.train --steps 50 --out /tmp/w   # a quick smoke run

Every batch is freshly generated text (``data.training_text``) from a generator seeded
by the step number, so there is no fixed corpus to memorise and the run is
reproducible on the same machine and PyTorch version.

Every ``probe_every`` steps the run measures what appendix A plots: teacher-forced
next-token accuracy over the first tokens of the *quoted* passage of held-out "copy"
prompts (the copy span, where copying can predict every token) and over the same
stretch of the *source* passage (where nothing can be copied, so only the language's
grammar helps). While the model only knows grammar the two are equal; when an
induction head forms, the copy span pulls away. The curve is written beside the
weights as ``training_log_<name>.json`` (read it with ``weights.training_log``).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from tqdm.auto import tqdm

from specdec_lib.checks import check_ints, check_real
from specdec_lib.engine.generate import generate
from specdec_lib.engine.model import ModelConfig, TinyGPT
from specdec_lib.engine.sampling import SamplingParams
from specdec_lib.engine.weights import CONFIGS, WEIGHTS_DIR, save_model
from specdec_lib.text.language import DOC, NOTE_SHARE, Example, training_text, workload_examples
from specdec_lib.text.tokenizer import Tokenizer

# Held-out probe prompts: a workload seed that no chapter, test or benchmark uses.
_PROBE_SEED = 977
_PROBE_PROMPTS = 16
_PROBE_TOKENS = 64


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 3000
    batch_size: int = 16
    window: int = 256  # training sequence length, in tokens
    lr: float = 3e-3
    warmup: int = 100
    decay: float = 0.2  # the last fifth of the steps decays the learning rate to a tenth
    weight_decay: float = 0.1
    note_share: float = NOTE_SHARE  # share of documents that are notes
    passage_chars: tuple[int, int] = (20, 400)
    seed: int = 0
    probe_every: int = 100

    def __post_init__(self) -> None:
        check_ints(self, ("steps", "batch_size", "window", "probe_every"))
        check_real("lr", self.lr, "a number > 0", lambda v: v > 0)
        check_real("note_share", self.note_share, "a number in [0, 1]", lambda v: 0 <= v <= 1)
        check_real("decay", self.decay, "a number in (0, 1]", lambda v: 0 < v <= 1)


_TRAIN_CONFIGS = {
    "target": TrainConfig(),
    "draft": TrainConfig(steps=1500, lr=4e-3),
}


def training_batch(cfg: TrainConfig, step: int, tok: Tokenizer) -> torch.Tensor:
    """(batch_size, window + 1) token ids: fresh documents, each row from a document start.

    Rows start where a document starts (with ``<|doc|>``), as every workload prompt
    does, instead of at a random offset: position 0 of a row is then the same token
    as position 0 of a prompt, and a note's first tokens are seen with their header.
    """
    rng = random.Random(f"train/{cfg.seed}/{step}")
    rows = []
    for _ in range(cfg.batch_size):
        ids: list[int] = []
        while len(ids) < cfg.window + 1:
            ids += tok.encode(training_text(rng, 5 * cfg.window, cfg.note_share, cfg.passage_chars))
        rows.append(ids[: cfg.window + 1])
    return torch.tensor(rows, dtype=torch.long)


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warm-up, a constant plateau, then cosine decay to a tenth over the last part."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    decay_start = cfg.steps * (1 - cfg.decay)
    if step < decay_start:
        return cfg.lr
    progress = (step - decay_start) / max(1.0, cfg.steps - decay_start)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


@contextmanager
def frozen(model: nn.Module) -> Iterator[None]:
    """``model`` in eval mode and without gradients while the block runs (a drafter trains on
    its outputs), then left as it was found."""
    flags, training = [p.requires_grad for p in model.parameters()], model.training
    model.eval().requires_grad_(False)
    try:
        yield
    finally:
        for p, flag in zip(model.parameters(), flags, strict=True):
            p.requires_grad_(flag)
        model.train(training)


def _probe_examples() -> list[Example]:
    return workload_examples("copy", _PROBE_PROMPTS, _PROBE_SEED)


@torch.no_grad()
def _novel_probe(
    model: TinyGPT, n_prompts: int = 8, n_tokens: int = _PROBE_TOKENS
) -> dict[str, float]:
    """Greedy continuations of held-out novel prompts: do they stay in the note, do they loop?

    ``stays``: share of continuations with no line break or document token (the note
    goes on); ``distinct_4grams``: share of distinct token 4-grams, pooled over prompts
    (1.0 when nothing repeats, about 0.2 for the old model's 7-token loop).
    """
    tok = Tokenizer()
    was_training = model.training
    model.eval()
    stays, distinct, total = 0, 0, 0
    ends = {tok.encode("\n")[0], tok.encode(DOC)[0]}
    for ex in workload_examples("novel", n_prompts, _PROBE_SEED):
        out = generate(model, tok.encode(ex.prompt), SamplingParams(max_tokens=n_tokens))
        stays += not ends & set(out)
        grams = [tuple(out[i : i + 4]) for i in range(len(out) - 3)]
        distinct += len(set(grams))
        total += len(grams)
    model.train(was_training)
    return {"stays": stays / n_prompts, "distinct_4grams": distinct / total}


@torch.no_grad()
def _span_accuracy(
    model: TinyGPT, examples: list[Example], n_tokens: int = _PROBE_TOKENS
) -> dict[str, float]:
    """Teacher-forced accuracy over the quoted passage (copy) and the source passage.

    A copy prompt is ``"Text: <passage>\\nQuote:"``: the source passage starts right
    after ``"Text:"`` and the quote after ``"Quote:"``. Both spans are scored over their
    first ``n_tokens`` tokens, predicted from everything before them.
    """
    tok = Tokenizer()
    hits = {"copy": 0, "source": 0}
    total = 0
    was_training = model.training
    model.eval()
    for ex in examples:
        head = tok.encode(DOC + "Text:")
        prompt = tok.encode(ex.prompt)
        quote = source = tok.encode(ex.reference)[:n_tokens]
        ids = prompt + quote
        logits = model(torch.tensor([ids]))[0]
        guess = logits.argmax(-1).tolist()
        s0, q0 = len(head), len(prompt)
        hits["source"] += sum(guess[s0 + i - 1] == t for i, t in enumerate(source))
        hits["copy"] += sum(guess[q0 + i - 1] == t for i, t in enumerate(quote))
        total += len(quote)
    model.train(was_training)
    return {name: h / total for name, h in hits.items()}


@dataclass
class TrainResult:
    model: TinyGPT
    losses: list[float] = field(default_factory=list)
    curve: list[dict] = field(default_factory=list)
    seconds: float = 0.0


def train(
    model_config: ModelConfig,
    cfg: TrainConfig,
    progress: bool = True,
    log_path: Path | None = None,
) -> TrainResult:
    """Train a fresh TinyGPT; return it with the loss of every step and the probe curve."""
    torch.manual_seed(cfg.seed)
    tok = Tokenizer()
    if model_config.vocab_size != tok.vocab_size:
        raise ValueError(
            f"model_config.vocab_size must equal the tokenizer's {tok.vocab_size}, "
            f"got {model_config.vocab_size}"
        )
    model = TinyGPT(model_config)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": cfg.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=cfg.lr,
        betas=(0.9, 0.95),
    )
    examples = _probe_examples()
    result = TrainResult(model)
    start = time.perf_counter()
    model.train()
    bar = tqdm(range(cfg.steps + 1), disable=not progress, desc="training")
    for step in bar:
        if step % cfg.probe_every == 0 or step == cfg.steps:
            point = {
                "step": step,
                "seconds": round(time.perf_counter() - start, 1),
                "loss": round(sum(result.losses[-50:]) / max(1, len(result.losses[-50:])), 4),
                **{k: round(v, 4) for k, v in _span_accuracy(model, examples).items()},
                **{k: round(v, 4) for k, v in _novel_probe(model).items()},
            }
            result.curve.append(point)
            bar.write(json.dumps(point))
            if log_path is not None:
                log_path.write_text(json.dumps(result.curve, indent=1) + "\n")
                if step % 500 == 0:  # a checkpoint to measure a run while it goes on
                    torch.save(model.state_dict(), log_path.with_suffix(".pt"))
        if step == cfg.steps:
            break
        batch = training_batch(cfg, step, tok)
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
        if step % 20 == 0:
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
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads (the shipped weights used 1)"
    )
    parser.add_argument(
        "--smear", choices=["on", "off"], default=None, help="override the key smear"
    )
    args = parser.parse_args()
    # Same code, same thread count, same PyTorch build: the same weights, bit for bit.
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.models:
        cfg = _TRAIN_CONFIGS[name]
        if args.steps is not None:
            cfg = TrainConfig(**{**asdict(cfg), "steps": args.steps})
        log_path = args.out / f"training_log_{name}.json"
        model_config = CONFIGS[name]
        if args.smear is not None:
            model_config = replace(model_config, smear_keys=args.smear == "on")
        result = train(model_config, cfg, log_path=log_path)
        info = {
            "train_config": asdict(cfg),
            "final_loss": sum(result.losses[-50:]) / len(result.losses[-50:]),
            "train_seconds": round(result.seconds, 1),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "command": "python -m specdec_lib.engine.train",
        }
        path = save_model(result.model, name, info, args.out)
        log_path.with_suffix(".pt").unlink(missing_ok=True)
        print(
            f"{name}: {result.model.num_parameters():,} parameters, "
            f"final loss {info['final_loss']:.3f}, {result.seconds:.0f} s -> {path}"
        )


if __name__ == "__main__":
    main()
