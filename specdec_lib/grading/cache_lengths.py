"""Chapter 8's exercise on the two caches of a draft-model run, in one module: the answer in
the student's form, its slips, and the check.

``expected_cache_lengths(n_prompt, log) -> [(target, draft), ...]``, one pair per round.
``target`` is the target's cache length after the round (the context but its pending
token). ``draft`` is what the draft model keeps of its own cache once the round is over:
the longest prefix of what it cached that the new context shares, which its next call
crops to. A round that drafts m tokens feeds the first m - 1 of them into the draft's
cache (the last is never fed), so it keeps the context the round started from and
min(n, m - 1) of the drafts; a round that drafts nothing leaves the draft's cache alone.
Each slip changes one of these: the target counting the pending token, not rolled back,
or grown by the accepted drafts only; the draft keeping its last draft, not rolled back,
rewound by the rejected count, or moved by a round that drafted nothing.

The check compares the student's pairs with the engine's own record of both caches (the
draft's read from the crop it makes when it next drafts) in eight 31-token runs with a
draft model: copy, edit, answer and novel prompts, greedy and sampled, mostly k = 4; the
novel ones drafted by the target itself, so that every draft is accepted and the last
round drafts nothing. The log handed to the student holds no cache lengths.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from specdec_lib.engine.drafters import DraftModelDrafter
from specdec_lib.engine.generate import SpeculationStats, speculative_generate
from specdec_lib.engine.model import TinyGPT
from specdec_lib.engine.sampling import SamplingParams
from specdec_lib.engine.weights import load_model
from specdec_lib.text.language import workload_prompts
from specdec_lib.text.tokenizer import Tokenizer

from .answers import ExactCheck
from .mistakes import register
from .report import Diagnosis as D
from .sandbox import Abort, as_int, call_student

# --- the answer, and its slips ---------------------------------------------------------


def _cache_pairs(
    drafts_kept: Callable[[int, int], int],
    target_grows: Callable = lambda r: len(r.emitted),
    pending: int = -1,
    empty_rounds_move: bool = False,
) -> Callable:
    """The lengths if the draft keeps ``drafts_kept(m, n)`` drafts of a round that drafted
    m and had n accepted, and the target's context grows by ``target_grows(record)``."""

    def expected_cache_lengths(n_prompt, log):
        pairs, context, target, kept = [], n_prompt, n_prompt, 0
        for r in log:
            m, n = len(r.proposed), r.n_accepted
            if m or empty_rounds_move:
                kept = context + drafts_kept(m, n)
            context += len(r.emitted)
            target += target_grows(r)
            pairs.append((target + pending, kept))
        return pairs

    return expected_cache_lengths


#: Correct: the target holds the context but its pending token; the draft keeps the
#: round's starting context and the accepted drafts it had fed, at most m - 1.
_cache_reference = _cache_pairs(lambda m, n: min(n, m - 1))

#: The slips: ``(label, function, diagnosis)``, registered below.
_SLIPS = (
    (
        "target counts the pending token",
        _cache_pairs(lambda m, n: min(n, m - 1), pending=0),
        D.COUNTS_PENDING,
    ),
    (
        "target not rolled back",
        _cache_pairs(lambda m, n: min(n, m - 1), lambda r: len(r.proposed) + 1),
        D.NO_ROLLBACK,
    ),
    (
        "target grows by the accepted only",
        _cache_pairs(lambda m, n: min(n, m - 1), lambda r: r.n_accepted),
        D.ACCEPTED_ONLY,
    ),
    ("draft keeps its last draft", _cache_pairs(lambda m, n: n), D.DRAFT_LAST_DRAFT),
    ("draft not rolled back", _cache_pairs(lambda m, n: m - 1), D.DRAFT_NO_ROLLBACK),
    (
        "draft rewound by the rejected count",
        _cache_pairs(lambda m, n: n - 1 if n < m else m - 1),
        D.DRAFT_REWINDS_BY_COUNT,
    ),
    (
        "draft moved by a round that drafted nothing",
        _cache_pairs(lambda m, n: min(n, m - 1), empty_rounds_move=True),
        D.DRAFT_EMPTY_ROUND,
    ),
)

register("check_cache_lengths", _cache_reference, *_SLIPS)


# --- the check -------------------------------------------------------------------------


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
        raise Abort(D.WRONG_TYPE, what)
    return [(as_int(t, "each target length"), as_int(d, "each draft length")) for t, d in value]


def _lengths(fn: Callable, case: tuple[int, list, list]) -> list[tuple[int, int]]:
    if fn is _cache_reference:
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
