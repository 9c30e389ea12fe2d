"""Train the EAGLE head on SmolLM2's features, offline and deterministically.

    python -m specdec_lib.engine.train_eagle --data-minutes 40 --minutes 75
    python -m specdec_lib.engine.train_eagle --data-minutes 2 --minutes 2 \\
        --data /tmp/eagle_data --out /tmp/eagle --results /tmp/eagle.json

The first command makes the self-distilled dataset if the folder ``--data`` does not
exist yet (:mod:`.eagle_data`, ``--data-minutes`` of generation; ``--data-batches N``
instead makes batches until N exist, resuming a folder a stopped run left, and
``--data-only`` stops there), then trains for ``--steps`` steps
or ``--minutes``, whichever ends first, and writes the head to ``--out`` (its SHA-256 and
the GGUF's beside it) and the curve to ``--results``. The second is a smoke run.

The recipe follows EAGLE-1's training script (Li et al. 2024; ``SafeAILab/EAGLE``,
``eagle/train/main.py``) and takes the draft vocabulary from EAGLE-3's
(``eagle/traineagle3/cnets.py``), in this course's words and code:

* **Loss** (EAGLE-1's ``compute_loss``): a smooth-L1 between the head's guess of the next
  feature and the target's (weight 1, its ``v_w``), plus the cross-entropy of the head's
  draft distribution against the target's (weight 0.1, its ``p_w``). EAGLE-3 drops the
  feature loss because it trains on its own guesses, seven steps deep ("training-time
  test"): this head does not, and at inference it feeds its guessed feature back as the
  next position's input, so the guess must stay close to a real feature. As in EAGLE-3,
  the target's distribution is restricted to the draft vocabulary, and the
  cross-entropy leaves out positions whose target argmax lies outside it (no draft token
  could agree there: EAGLE-3's ``t2d[target_max_token]`` mask).
* **Draft vocabulary** (EAGLE-3's ``scandata``, which counts the answers' tokens): the
  ``draft_vocab`` tokens the target most often ranks first on the training answers.
* **Noise** (EAGLE-1's ``AddUniformNoise``, width 0.2; EAGLE-1 also scales it by 512
  over the sequence length, which this does not): uniform noise on the input features,
  so the head meets features a little off the target's, as its own guesses will be.
* **Optimiser**: AdamW with EAGLE-1's betas (0.9, 0.95) and its gradient clipping (each
  gradient value to 0.5); warm-up then cosine decay over ``steps`` (the schedule does
  not depend on the clock, so a run is deterministic; ``--minutes`` only stops it
  early). EAGLE-1 trains a 7B model's head at 3e-5; this head is small and fresh, so 1e-3.

The curve records, at every ``eval_every`` steps on held-out sequences (every 20th):
the losses, top-1 agreement with the target's own argmax over its full vocabulary on the
answers' positions (teacher-forced: each guess from true features), the share of those
positions whose argmax the draft vocabulary holds (agreement's ceiling), and rounds
drafted exactly as at inference on greedy held-out answers: a chain of 4 (acceptance by
draft position) and EAGLE-2's tree (tokens accepted a round).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from specdec_lib.checks import check_int, check_ints, check_real
from specdec_lib.engine.eagle import (
    EagleDrafter,
    EagleHead,
    EagleOrLookupDrafter,
    draft_vocabulary,
    load_eagle,
    save_eagle,
)
from specdec_lib.engine.eagle_data import DataConfig, build_dataset, load_dataset
from specdec_lib.engine.eagle_tree import EagleTreeDrafter
from specdec_lib.engine.model import TinyGPT
from specdec_lib.engine.sampling import SamplingParams
from specdec_lib.engine.smollm2 import SmolLM2Tokenizer, gguf_path, load_smollm2
from specdec_lib.engine.train import frozen
from specdec_lib.engine.weights import WEIGHTS_DIR, sha256

_RESULTS = Path(__file__).resolve().parent.parent / "results" / "eagle_training.json"
_CACHE = Path(os.environ.get("SPECDEC_CACHE", Path.home() / ".cache" / "specdec_course"))
_HELD_OUT_EVERY = 20  # sequence i is held out if i % 20 == 0


@dataclass(frozen=True)
class EagleTrainConfig:
    draft_vocab: int = 8192
    steps: int = 2000  # the schedule's length; --minutes may stop sooner
    batch: int = 8  # sequences a step
    window: int = 384  # positions a sequence contributes at most (a random window)
    lr: float = 1e-3
    warmup: int = 200
    feature_weight: float = 1.0  # EAGLE-1's v_w
    token_weight: float = 0.1  # EAGLE-1's p_w
    noise: float = 0.2  # width of the uniform noise on input features
    grad_clip: float = 0.5
    eval_every: int = 200
    eval_chains: int = 64  # chains drafted at each evaluation
    seed: int = 0

    def __post_init__(self) -> None:
        check_ints(self, ("draft_vocab", "steps", "batch", "window", "eval_every", "eval_chains"))
        check_int("warmup", self.warmup, 0)
        check_real("lr", self.lr, "a number > 0", lambda v: v > 0)


class _Sequences:
    """The dataset cut back into sequences: tokens (L,), features (L - 1, C) float32, the
    target's argmax (L - 1,), prompt length, and whether the answer was greedy."""

    def __init__(self, tensors: dict[str, torch.Tensor]) -> None:
        ends = tensors["lengths"].cumsum(0).tolist()
        starts = [0, *ends[:-1]]
        self.items = []
        for i, (s, e) in enumerate(zip(starts, ends, strict=True)):
            f0, f1 = s - i, e - i - 1  # a sequence of L tokens has L - 1 features
            self.items.append(
                (
                    tensors["tokens"][s:e].long(),
                    tensors["feats"][f0:f1],
                    tensors["tops"][f0:f1].long(),
                    int(tensors["n_prompt"][i]),
                    bool(tensors["greedy"][i]),
                )
            )


def split(items: list) -> tuple[list, list]:
    """Training and held-out sequences: every 20th is held out."""
    train = [x for i, x in enumerate(items) if i % _HELD_OUT_EVERY]
    return train, [x for i, x in enumerate(items) if i % _HELD_OUT_EVERY == 0]


def _token_counts(items: list, vocab_size: int) -> torch.Tensor:
    """How often each target token is the target's argmax at a position that predicts an
    answer's token: the draft vocabulary should hold what the target most often writes."""
    answers = [tops[max(0, n_prompt - 1) :] for _, _, tops, n_prompt, _ in items]
    return torch.bincount(torch.cat(answers), minlength=vocab_size)


def make_batch(
    items: list, idx: list[int], window: int, g: torch.Generator
) -> tuple[torch.Tensor, ...]:
    """Windows of up to ``window`` training pairs from sequences ``idx``, right-padded:
    input features f_i, tokens t_{i+1}, target features f_{i+1}, the target's argmax at
    i + 1, and a mask of real pairs (B, T)."""
    rows = []
    for i in idx:
        tokens, feats, tops, _, _ = items[i]
        n = len(feats) - 1  # pairs: f_i and t_{i+1} -> f_{i+1}, i = 0..n-1
        start = int(torch.randint(max(1, n - window + 1), (1,), generator=g))
        end = min(n, start + window)
        rows.append(
            (
                feats[start:end],
                tokens[start + 1 : end + 1],
                feats[start + 1 : end + 1],
                tops[start + 1 : end + 1],
            )
        )
    T = max(len(r[0]) for r in rows)
    C = rows[0][0].shape[-1]
    f_in = torch.zeros(len(rows), T, C)
    nxt = torch.zeros(len(rows), T, dtype=torch.long)
    f_out = torch.zeros(len(rows), T, C)
    top = torch.zeros(len(rows), T, dtype=torch.long)
    mask = torch.zeros(len(rows), T, dtype=torch.bool)
    for b, (a, t, o, p) in enumerate(rows):
        n = len(a)
        f_in[b, :n], nxt[b, :n], f_out[b, :n], top[b, :n], mask[b, :n] = (
            a.float(),
            t,
            o.float(),
            p,
            True,
        )
    return f_in, nxt, f_out, top, mask


def eagle_losses(
    head: EagleHead,
    f_in: torch.Tensor,
    nxt: torch.Tensor,
    f_out: torch.Tensor,
    top: torch.Tensor,
    mask: torch.Tensor,
    in_vocab: torch.Tensor,
) -> dict[str, torch.Tensor]:
    """The feature loss, the token loss, and top-1 agreement counts of one batch."""
    logits, guess = head(f_in, nxt)  # (B, T, V_d), (B, T, C)
    feature = F.smooth_l1_loss(guess[mask], f_out[mask])
    with torch.no_grad():
        target_p = F.softmax(F.linear(f_out, head.decoder.lm_head.weight), -1)  # (B, T, V_d)
    covered = mask & in_vocab[top]  # positions whose target argmax the draft vocab holds
    ce = -(target_p[covered] * F.log_softmax(logits[covered], -1)).sum(-1)
    token = ce.mean() if len(ce) else logits.sum() * 0
    agree = (head.d2t[logits.argmax(-1)] == top) & mask
    return dict(
        feature=feature, token=token, agree=agree.sum(), covered=covered.sum(), n=mask.sum()
    )


def lr_at(step: int, cfg: EagleTrainConfig) -> float:
    """Linear warm-up, then cosine decay to a tenth of ``lr`` at ``steps``."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    progress = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


@torch.no_grad()
def _drafting(head: EagleHead, held: list, n: int, k: int = 4, seed: int = 0) -> dict:
    """``n`` rounds drafted exactly as at inference, at seeded positions of greedy held-out
    answers, against what the target wrote next (its greedy choice): a chain of ``k``
    (:class:`EagleDrafter`: acceptance by draft position, as ``SpeculationStats`` counts
    it, and tokens accepted a round), EAGLE-2's tree, width 4, 12 nodes, ``k`` deep
    (:class:`EagleTreeDrafter`: tokens accepted a round, its longest path matching), and
    the chain or prompt lookup, whichever :class:`EagleOrLookupDrafter` picks."""
    g = torch.Generator().manual_seed(seed)
    greedy = [x for x in held if x[4] and len(x[0]) - x[3] > k + 1]
    accepted, tree_accepted, combined_accepted = [0] * k, 0, 0
    params = SamplingParams()
    rounds = n if greedy else 0
    for j in range(rounds):
        tokens, feats, _, n_prompt, _ = greedy[j % len(greedy)]
        p = n_prompt + int(torch.randint(len(tokens) - n_prompt - k, (1,), generator=g))
        context, truth = tokens[:p].tolist(), tokens[p : p + k].tolist()
        chain, tree = EagleDrafter(head), EagleTreeDrafter(head, width=4, budget=12)
        combined = EagleOrLookupDrafter(head)
        for drafter in (chain, tree, combined):
            drafter.observe(feats[: p - 1].float(), p)
        guess = chain.draft(context, k, params, None).tokens
        for i in range(k):
            accepted[i] += guess[: i + 1] == truth[: i + 1]
        either = combined.draft(context, k, params, None).tokens
        n_either = len(either)  # a copied proposal may be shorter than k
        combined_accepted += next((i for i in range(n_either) if either[i] != truth[i]), n_either)
        drafted, node, depth = tree.draft_tree(context, k, params, None), -1, 0
        while depth < k and (
            match := [c for c in drafted.children(node) if drafted.tokens[c] == truth[depth]]
        ):
            node, depth = match[0], depth + 1
        tree_accepted += depth
    return dict(
        rounds=rounds,
        chain_by_position=[round(a / max(1, rounds), 4) for a in accepted],
        chain_accepted_per_round=round(sum(accepted) / max(1, rounds), 4),
        tree_accepted_per_round=round(tree_accepted / max(1, rounds), 4),
        lookup_or_chain_accepted_per_round=round(combined_accepted / max(1, rounds), 4),
    )


@torch.no_grad()
def _evaluate(head: EagleHead, held: list, cfg: EagleTrainConfig, in_vocab: torch.Tensor) -> dict:
    """Held-out losses and agreement on the answers' positions, and drafting as at inference."""
    totals = dict(feature=0.0, token=0.0, agree=0, covered=0, n=0)
    head.eval()
    for tokens, feats, tops, n_prompt, _ in held:
        f_in, nxt = feats[:-1].float()[None], tokens[1:-1][None]  # pairs i = 0..L-3
        f_out, top = feats[1:].float()[None], tops[1:][None]
        mask = (torch.arange(nxt.shape[1]) >= n_prompt - 2)[None]  # pairs drafting the answer
        logits, guess = head(f_in, nxt)
        error = F.smooth_l1_loss(guess, f_out, reduction="none").mean(-1)
        totals["feature"] += float(error[mask].sum())
        target_p = F.softmax(F.linear(f_out, head.decoder.lm_head.weight), -1)
        covered = mask & in_vocab[top]
        totals["token"] += float(-(target_p[covered] * F.log_softmax(logits[covered], -1)).sum())
        totals["agree"] += int(((head.d2t[logits.argmax(-1)] == top) & mask).sum())
        totals["covered"] += int(covered.sum())
        totals["n"] += int(mask.sum())
    head.train()
    n = max(1, totals["n"])
    return dict(
        feature_loss=round(totals["feature"] / n, 5),
        token_loss=round(totals["token"] / max(1, totals["covered"]), 4),
        top1_agreement=round(totals["agree"] / n, 4),
        draft_vocab_coverage=round(totals["covered"] / n, 4),
        positions=totals["n"],
        drafting=_drafting(head, held, cfg.eval_chains, seed=cfg.seed),
    )


def train_eagle(
    target: TinyGPT,
    items: list,
    cfg: EagleTrainConfig,
    seconds: float,
    log=print,  # noqa: ANN001
) -> tuple[EagleHead, list[dict], dict]:
    """Train a fresh head on ``items`` (``_Sequences(...).items``) for ``cfg.steps`` steps
    or ``seconds``, whichever ends first: the head, the curve, a summary. The target is
    frozen meanwhile (the head shares its final norm) and left as it was found."""
    with frozen(target):
        torch.manual_seed(cfg.seed)
        g = torch.Generator().manual_seed(cfg.seed)
        train, held = split(items)
        d2t = draft_vocabulary(_token_counts(train, target.config.vocab_size), cfg.draft_vocab)
        head = EagleHead(target, d2t).train()
        in_vocab = torch.zeros(target.config.vocab_size, dtype=torch.bool)
        in_vocab[d2t] = True
        params = [p for p in head.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=cfg.lr, betas=(0.9, 0.95), weight_decay=0.0)
        curve, start, seen, step = [], time.perf_counter(), 0, 0
        recent: list[tuple[float, float, float]] = []
        for step in range(cfg.steps):
            if time.perf_counter() - start > seconds:
                break
            for group in opt.param_groups:
                group["lr"] = lr_at(step, cfg)
            idx = torch.randint(len(train), (cfg.batch,), generator=g).tolist()
            f_in, nxt, f_out, top, mask = make_batch(train, idx, cfg.window, g)
            f_in = f_in + (torch.rand(f_in.shape, generator=g) - 0.5) * cfg.noise * mask[..., None]
            out = eagle_losses(head, f_in, nxt, f_out, top, mask, in_vocab)
            loss = cfg.feature_weight * out["feature"] + cfg.token_weight * out["token"]
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_value_(params, cfg.grad_clip)
            opt.step()
            seen += int(out["n"])
            recent.append(
                (out["feature"].item(), out["token"].item(), (out["agree"] / out["n"]).item())
            )
            if (step + 1) % cfg.eval_every == 0 or step == 0:
                curve.append(_point(head, held, cfg, in_vocab, step + 1, seen, start, recent))
                recent = []
                log(json.dumps(curve[-1]))
        else:
            step = cfg.steps
        if not curve or curve[-1]["step"] != step:
            curve.append(_point(head, held, cfg, in_vocab, step, seen, start, recent))
            log(json.dumps(curve[-1]))
        summary = dict(
            steps=step,
            positions_seen=seen,
            seconds=round(time.perf_counter() - start, 1),
            positions_per_second=round(seen / (time.perf_counter() - start), 1),
            train_sequences=len(train),
            held_out_sequences=len(held),
            trainable_parameters=sum(p.numel() for p in params),
        )
        return head.eval(), curve, summary


def _point(head, held, cfg, in_vocab, step, seen, start, recent) -> dict:  # noqa: ANN001
    """One point of the curve: training losses averaged since the last, held-out metrics."""
    mean = [round(sum(r[i] for r in recent) / len(recent), 5) if recent else None for i in range(3)]
    return dict(
        step=step,
        seconds=round(time.perf_counter() - start, 1),
        positions_seen=seen,
        train_feature_loss=mean[0],
        train_token_loss=mean[1],
        train_top1=mean[2],
        held_out=_evaluate(head, held, cfg, in_vocab),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=75.0, help="training budget")
    parser.add_argument("--data-minutes", type=float, default=40.0, help="if --data is missing")
    parser.add_argument(
        "--data-batches", type=int, default=None, help="make this many batches, not minutes"
    )
    parser.add_argument("--data-only", action="store_true", help="make the data, do not train")
    parser.add_argument("--steps", type=int, default=EagleTrainConfig.steps)
    parser.add_argument("--eval-every", type=int, default=EagleTrainConfig.eval_every)
    parser.add_argument("--data", type=Path, default=_CACHE / "eagle_data", help="a folder")
    parser.add_argument("--out", type=Path, default=WEIGHTS_DIR)
    parser.add_argument("--results", type=Path, default=_RESULTS)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    cfg = EagleTrainConfig(steps=args.steps, eval_every=args.eval_every)
    data_cfg = DataConfig()
    target = load_smollm2(data_cfg.max_prompt + data_cfg.max_new, onednn=data_cfg.onednn)
    gguf = sha256(gguf_path())
    if args.data_batches is not None or not args.data.exists():  # resumes a partial folder
        build_dataset(
            target,
            SmolLM2Tokenizer(),
            data_cfg,
            args.data_minutes * 60,
            args.data,
            log=lambda m: print(m, flush=True),
            stamp=dict(gguf_sha256=gguf),
            max_batches=args.data_batches,
        )
    tensors, meta = load_dataset(args.data)
    if args.data_only:
        print(f"{args.data}: {meta['batches']} batches, {meta['positions']} positions")
        return 0
    made = (meta["config"], meta.get("gguf_sha256"))
    if made != (json.loads(json.dumps(asdict(data_cfg))), gguf):
        raise SystemExit(
            f"{args.data} was made by another recipe or from another GGUF: delete it to "
            "make it afresh, or pass another --data"
        )
    items = _Sequences(tensors).items
    head, curve, summary = train_eagle(
        target, items, cfg, args.minutes * 60, log=lambda m: print(m, flush=True)
    )
    command = "OMP_NUM_THREADS=1 python -m specdec_lib.engine.train_eagle " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    record = dict(gguf_sha256=gguf, command=command, recipe=asdict(cfg), data=meta, **summary)
    path = save_eagle(head, record, args.out)
    load_eagle(target, gguf, args.out)  # the checkpoint reads back, checksums verified
    result = dict(
        description="EAGLE-style head for SmolLM2-135M: training curve on held-out "
        "self-distilled sequences (every 20th)",
        weights=str(path.name),
        weights_sha256=sha256(path),
        **record,
        curve=curve,
    )
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {path} and {args.results}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
