"""Pooled runs: speculation over many prompts, and the copy accuracy of a model.

Chapters and benchmarks call these so that a notebook shows a measurement, not a loop,
and every figure quoted in the course carries its workload, k, drafter and sample size.
Timing lives in :mod:`specdec_lib.analysis.timing`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from specdec_lib.analysis.theory import CostAwareK
from specdec_lib.engine.drafters import Drafter
from specdec_lib.engine.generate import (
    AdaptiveK,
    SpeculationStats,
    generate,
    speculative_generate,
)
from specdec_lib.engine.model import TinyGPT
from specdec_lib.engine.sampling import SamplingParams
from specdec_lib.text.language import Example
from specdec_lib.text.tokenizer import Tokenizer


def copy_accuracy(model: TinyGPT, examples: Sequence[Example], n_tokens: int = 128) -> float:
    """Fraction of the first ``n_tokens`` quoted tokens that greedy decoding reproduces.

    Position by position against the reference continuation, over all examples.
    """
    tok = Tokenizer()
    hits = total = 0
    for ex in examples:
        ref = tok.encode(ex.reference)[:n_tokens]
        out = generate(model, tok.encode(ex.prompt), SamplingParams(max_tokens=len(ref)))
        hits += sum(a == b for a, b in zip(out, ref, strict=True))
        total += len(ref)
    return hits / total


def per_prompt_speculation(
    target: TinyGPT,
    make_drafter: Callable[[], Drafter],
    prompts: Sequence[Sequence[int]],
    params: SamplingParams,
    k: int,
    adaptive_k: AdaptiveK | CostAwareK | None = None,
    greedy: Sequence[Sequence[int]] | None = None,
    seed: int | None = None,
    check_greedy: bool = False,
) -> list[SpeculationStats]:
    """Speculate on every prompt with a fresh drafter, from draft length ``k`` (steered by
    ``adaptive_k`` if given, as in ``speculative_generate``); one stats object per prompt,
    so an interval can resample prompts (:mod:`specdec_lib.analysis.intervals`).

    Each output is compared with plain greedy decoding's, and a mismatch raises, so a
    benchmark can never report a speed-up for wrong output, whenever ``greedy`` holds those
    outputs (one per prompt: pass them when many runs share the same prompts) or
    ``check_greedy`` asks for them to be decoded here. With ``seed``, prompt i samples
    from a generator seeded ``seed + i``.
    """
    if greedy is not None and len(greedy) != len(prompts):
        raise ValueError(
            f"greedy must hold one output per prompt ({len(prompts)}), got {len(greedy)}"
        )
    out = []
    for i, ids in enumerate(prompts):
        gen = torch.Generator().manual_seed(seed + i) if seed is not None else None
        stats = SpeculationStats()
        got = speculative_generate(
            target,
            make_drafter(),
            list(ids),
            params,
            k=k,
            generator=gen,
            stats=stats,
            adaptive_k=adaptive_k,
        )
        if greedy is not None or check_greedy:
            plain = list(greedy[i]) if greedy is not None else generate(target, ids, params)
            if got != plain:
                raise AssertionError(
                    f"speculative output differs from greedy on prompt {i} at k={k}"
                )
        out.append(stats)
    return out


def pooled_speculation(*args: Any, **kwargs: Any) -> SpeculationStats:
    """:func:`per_prompt_speculation`'s counts pooled in one stats object; it takes that
    function's arguments."""
    return pooled(per_prompt_speculation(*args, **kwargs))


def pooled(per_prompt: Sequence[SpeculationStats]) -> SpeculationStats:
    """One stats object holding the sum of every count in ``per_prompt``, logs in order."""
    out = SpeculationStats()
    for s in per_prompt:
        for name in ("rounds", "target_passes", "draft_passes", "proposed", "accepted", "emitted"):
            setattr(out, name, getattr(out, name) + getattr(s, name))
        for mine, theirs in (
            (out.position_proposed, s.position_proposed),
            (out.position_accepted, s.position_accepted),
        ):
            mine += [0] * (len(theirs) - len(mine))
            for i, c in enumerate(theirs):
                mine[i] += c
        out.log += s.log
    return out


def batch_round_profile(alone: Sequence[SpeculationStats]) -> dict[str, list[int] | int]:
    """What batched speculation of some requests does pass by pass, replayed from each
    request's counts decoded alone (``alone``, one stats object per request); counted, not
    timed.

    Valid for greedy decoding with a drafter that reads only its own request's context
    (the n-gram drafter, a draft model): a request's rounds are then the same alone as in
    a batch. A batch runs one pass per round until its slowest request finishes; a
    finished request rides along as padding, and every row is padded to the longest
    proposal of the pass. Returns each request's ``rounds``, the batch's ``passes``, and
    per pass the ``active`` requests, the positions ``carried`` (B x the pass's width) and
    those ``used`` (each active request's pending token plus its proposal). The first pass
    also reads every prompt (prefill and the first round share it); its prompt positions
    are left out here, so the first pass is counted as a round like the others.
    """
    if not alone or any(s.rounds == 0 for s in alone):
        raise ValueError("alone must hold one non-empty SpeculationStats per request")
    lengths = [[len(r.proposed) for r in s.log] for s in alone]
    rounds = [len(m) for m in lengths]
    passes = max(rounds)
    active = [[i for i, m in enumerate(lengths) if j < len(m)] for j in range(passes)]
    width = [1 + max(lengths[i][j] for i in act) for j, act in enumerate(active)]
    return {
        "rounds": rounds,
        "passes": passes,
        "active": [len(a) for a in active],
        "carried": [len(alone) * w for w in width],
        "used": [sum(1 + lengths[i][j] for i in act) for j, act in enumerate(active)],
    }


def prompt_stats(row: Mapping[str, Any]) -> list[SpeculationStats]:
    """A benchmark row's ``per_prompt`` counts as one stats object per prompt, for the
    intervals that resample prompts (:mod:`specdec_lib.analysis.intervals`)."""
    if not row.get("per_prompt"):
        raise ValueError("row must hold per_prompt counts (tokens_per_pass.py records them)")
    return [SpeculationStats(**dict(counts)) for counts in row["per_prompt"]]
