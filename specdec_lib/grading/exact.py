"""The checks of exercises with one right answer per input (chapters 1, 3, 4, 5, 8, 10):
the student's answers against the reference's on many inputs, and, when they differ, the
known mistake whose answers the student's reproduce. Numbers are rounded to 9 decimals.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from typing import Any

import torch

from specdec_lib.analysis.replication import crossover
from specdec_lib.engine.drafters import DraftModelDrafter
from specdec_lib.engine.generate import SpeculationStats, speculative_generate
from specdec_lib.engine.model import TinyGPT
from specdec_lib.engine.sampling import SamplingParams
from specdec_lib.engine.weights import load_model
from specdec_lib.text.language import workload_prompts
from specdec_lib.text.tokenizer import Tokenizer

from .answers import ExactCheck
from .mistakes import REFERENCES
from .report import Diagnosis
from .sandbox import (
    Abort,
    as_int,
    as_tokens,
    call_student,
    forbidden,
)


class _DraftCacheRecorder(DraftModelDrafter):
    """The library's draft-model drafter, recording what it keeps of its cache each time it
    starts drafting (the first crop of a call): the engine's own record of the draft cache.
    ``kept[0]`` is the empty cache before the first round."""

    def __init__(self, model: TinyGPT) -> None:
        super().__init__(model)
        self.kept: list[int] = []
        self._starting = False

    def draft(self, context, k, params, generator):  # noqa: ANN001, ANN201
        self._starting = k > 0
        return super().draft(context, k, params, generator)

    def logits_after(self, context: list[int]) -> torch.Tensor:
        if not self._starting:
            return super().logits_after(context)
        self._starting, crop = False, self.cache.crop
        self.cache.crop = lambda n: (self.kept.append(int(n)), crop(n))[1]
        try:
            return super().logits_after(context)
        finally:
            del self.cache.crop  # the class's own crop again


def _draft_runs(
    seed: int, target: torch.nn.Module | None = None, draft: torch.nn.Module | None = None
) -> list[tuple[int, list, list[tuple[int, int]]]]:
    """Eight cached runs with a draft model, 31 tokens each: copy, edit, answer and novel
    prompts, greedy and sampled, mostly k = 4; the novel ones drafted by the target itself
    (every draft accepted, and a last round that drafts nothing). Each with the engine's
    record: the target's cache length after each round, and what the draft keeps."""
    target = target if target is not None else load_model("target")
    draft = draft if draft is not None else load_model("draft")
    tok, out = Tokenizer(), []
    for i in range(8):
        workload = ("copy", "edit", "answer", "novel")[i % 4]
        prompt = tok.encode(workload_prompts(workload, 1, seed=seed + i)[0])
        drafter = _DraftCacheRecorder(target if workload == "novel" else draft)
        params = SamplingParams(temperature=(0.0, 1.0)[i // 4], max_tokens=31)
        k = (4, 4, 3, 4, 4, 5, 4, 2)[i]
        stats, gen = SpeculationStats(), torch.Generator().manual_seed(seed)
        output = speculative_generate(target, drafter, prompt, params, k, gen, stats)
        drafter._starting = True  # what it would keep of its cache after the last round
        drafter.logits_after(prompt + output)
        # the value after round r is recorded when it next drafts (or at the end)
        later = [j for j, r in enumerate(stats.log) if r.proposed][1:]
        kept = [drafter.kept[1 + sum(j <= r for j in later)] for r in range(len(stats.log))]
        record = [(r.cache_length, d) for r, d in zip(stats.log, kept, strict=True)]
        out.append((len(prompt), stats.log, record))
    return out


def _pairs(value: Any) -> list[tuple[int, int]]:
    if not isinstance(value, list | tuple) or not all(
        isinstance(v, list | tuple) and len(v) == 2 for v in value
    ):
        hint = " (is a `return` missing?)" if value is None else ""
        what = f"the lengths must be a list of (target, draft) pairs{hint}: {value!r:.60}"
        raise Abort(Diagnosis.WRONG_TYPE, what)
    return [(as_int(t, "each target length"), as_int(d, "each draft length")) for t, d in value]


def _lengths(fn: Callable, case: tuple[int, list, list]) -> list[tuple[int, int]]:
    if fn is REFERENCES["check_cache_lengths"]:
        return case[2]  # the engine's own record
    # The log without the engine's record of the answer ("without looking at the records").
    log = [dataclasses.replace(r, cache_length=None) for r in case[1]]
    return _pairs(call_student(fn, "expected_cache_lengths", case[0], log))


check_cache_lengths = ExactCheck(
    "check_cache_lengths",
    _draft_runs,
    _lengths,
    lambda c: (
        f"a prompt of {c[0]} tokens, (proposed, accepted) per round = "
        f"{[(len(r.proposed), r.n_accepted) for r in c[1][:8]]}" + (" ..." if len(c[1]) > 8 else "")
    ),
    """Check ``expected_cache_lengths(n_prompt, log) -> [(target, draft), ...]``: after each
    round, the target's cache length and what the draft model keeps of its cache, against
    the engine's record in eight cached draft-model runs of ``target`` and ``draft``
    (keywords; default the shipped models).""",
)


def _sweeps(seed: int) -> list[list[dict]]:
    """60 sweeps of batch sizes 1 to 32 (every other one shuffled), speed-ups with
    intervals above 1, below it, or straddling it on either side of the point estimate."""
    rng, sweeps = random.Random(f"slower/{seed}"), []
    for i in range(60):
        rows = []
        for batch in (1, 2, 4, 8, 16, 32)[: rng.randint(1, 6)]:
            value = rng.uniform(0.6, 1.4)
            low, high = value - rng.uniform(0, 0.3), value + rng.uniform(0, 0.3)
            rows.append(dict(batch=batch, speedup=value, speedup_low=low, speedup_high=high))
        if i % 2:
            rng.shuffle(rows)
        sweeps.append(rows)
    return sweeps


def _batch(fn: Callable, rows: list[dict]) -> int | None:
    got = call_student(fn, "slower_from", [dict(r) for r in rows])
    return None if got is None else as_int(got, "the batch size")


check_slower_from = ExactCheck(
    "check_slower_from",
    _sweeps,
    _batch,
    lambda rows: (
        f"(batch, speedup, low, high) = {[tuple(round(v, 2) for v in r.values()) for r in rows]}"
    ),
    """Check ``slower_from(rows) -> int | None`` against the library's ``crossover`` on 60
    random sweeps of batch sizes, in any order.""",
    forbidden(crossover),
)


def _rollback_cases(seed: int) -> list[tuple]:
    """(rows, lengths, proposed, accepted, block_size): edge cases (one row, nothing
    proposed, everything accepted, crops onto a block boundary), then random batches
    whose accepted counts come keyed by request id, mostly not in row order."""
    rng, cases = random.Random(f"rollback/{seed}"), []
    edge = [
        ([30], [4], [1], 8),  # keeps 32 = 4 whole blocks: frees the fifth
        ([31], [4], [0], 8),  # keeps 32 of 36: crops onto a boundary
        ([10, 50], [3, 3], [3, 0], 4),
        ([7, 7, 7], [0, 5, 2], [0, 5, 0], 16),
        ([0, 12], [6, 6], [2, 6], 1),
        ([15, 40, 3], [4, 1, 8], [0, 1, 5], 8),
    ]
    for lengths, proposed, accepted, size in edge:
        rows = [f"req-{rng.randrange(1000)}-{b}" for b in range(len(lengths))]
        order = rows[::-1]
        cases.append((rows, lengths, proposed, dict(zip(order, accepted[::-1], strict=True)), size))
    for i in range(60):
        B = rng.randint(2, 6)
        rows = [f"req-{rng.randrange(1000)}-{b}" for b in range(B)]
        lengths = [rng.randrange(0, 200) for _ in rows]
        proposed = [rng.randint(0, 8) for _ in rows]
        counts = [rng.randint(0, m) for m in proposed]
        keyed = list(zip(rows, counts, strict=True))
        if i % 5:
            rng.shuffle(keyed)  # the sampler's order, not the batch's
        cases.append((rows, lengths, proposed, dict(keyed), rng.choice([4, 8, 16])))
    return cases


def _rollback_answer(fn: Callable, case: tuple) -> tuple[tuple[int, ...], tuple[int, ...]]:
    rows, lengths, proposed, accepted, size = case
    got = call_student(
        fn, "rollback_batch", list(rows), list(lengths), list(proposed), dict(accepted), size
    )
    shape = f"(new_lengths, freed): two lists of {len(rows)} ints, one per row"
    if not isinstance(got, tuple | list) or len(got) != 2:
        raise Abort(Diagnosis.WRONG_TYPE, f"Return {shape}; got {got!r:.80}.")
    new, freed = (as_tokens(part, "each list") for part in got)
    if len(new) != len(rows) or len(freed) != len(rows):
        raise Abort(Diagnosis.WRONG_TYPE, f"Return {shape}; got {got!r:.80}.")
    return tuple(new), tuple(freed)


check_batch_rollback = ExactCheck(
    "check_batch_rollback",
    _rollback_cases,
    _rollback_answer,
    lambda c: (
        f"rows = {c[0]}, lengths = {c[1]}, proposed = {c[2]}, accepted = {c[3]}, "
        f"block_size = {c[4]}"
    ),
    """Check ``rollback_batch(rows, lengths, proposed, accepted, block_size) -> (new_lengths,
    freed)`` on about 70 batches: edge cases, then random batches whose accepted counts come
    keyed by request id in another order than the rows.""",
)
