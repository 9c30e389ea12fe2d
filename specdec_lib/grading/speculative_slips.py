"""Chapter 0's exercise, greedy speculative decoding without a KV cache: the answer in the
student's form, and its slips, each the engine's loop with one thing changed.

``speculative_generate(target, drafter, prompt_token_ids, params, k) -> list[int]`` must
return exactly what plain greedy decoding returns, ``params.max_tokens`` new tokens, in
fewer target passes than tokens. The slips overshoot the budget, read the target's rows
one position early, drop the target's own token (a round that accepts nothing emits
nothing), or do not speculate at all.
"""

from __future__ import annotations

from dataclasses import replace
from itertools import accumulate
from unittest import mock

import torch

from specdec_lib.engine.generate import SpeculationStats, generate, speculative_generate
from specdec_lib.engine.verify import accept_greedy

from .report import Diagnosis as D


def speculative_reference(target, drafter, prompt_token_ids, params, k):
    """Correct (the textbook version without a KV cache): draft, verify in one pass, repeat."""
    return speculative_generate(target, drafter, prompt_token_ids, params, k, use_kv_cache=False)


def _speculative_overshoots(target, drafter, prompt_token_ids, params, k):
    """Drafts as if max_tokens were k larger and stops after the round that reaches it."""
    stats, longer = SpeculationStats(), replace(params, max_tokens=params.max_tokens + k)
    out = speculative_generate(target, drafter, prompt_token_ids, longer, k, None, stats, False)
    ends = accumulate(len(record.emitted) for record in stats.log)
    return out[: next(end for end in ends if end >= params.max_tokens)]


def _speculative_off_by_one_rows(target, drafter, prompt_token_ids, params, k):
    """The target's logits read one position too early: row t holds row t - 1."""

    def early(idx, cache=None, logits_to_keep=0, forward=target.forward):
        keep = logits_to_keep + 1 if 0 < logits_to_keep < idx.shape[1] else 0  # one row more
        out = forward(idx, cache, keep)
        return out[:, :-1] if keep else torch.cat([out[:, :1], out[:, :-1]], 1)

    with mock.patch.object(target, "forward", early):
        return speculative_reference(target, drafter, prompt_token_ids, params, k)


def _speculative_drops_correction(target, drafter, prompt_token_ids, params, k):
    """The engine's loop with its greedy rule swapped for one that drops the target's token."""
    rule = f"{speculative_generate.__module__}.greedy_rule"
    with mock.patch(rule, _without_target):
        return speculative_reference(target, drafter, prompt_token_ids, params, k)


def _without_target(logits: torch.Tensor, proposed: list[int]) -> tuple[list[int], int]:
    emitted, n = accept_greedy(logits, proposed)
    return emitted[:n], n


#: The slips, as ``(label, function, diagnosis)`` rows of :data:`~.mistakes.MISTAKES`.
SPECULATIVE_SLIPS = (
    ("overshoots max_tokens", _speculative_overshoots, D.WRONG_LENGTH),
    ("off-by-one rows", _speculative_off_by_one_rows, D.OUTPUT_MISMATCH),
    ("drops the correction token", _speculative_drops_correction, D.NO_PROGRESS),
    ("plain decoding", lambda t, d, ids, p, k: generate(t, ids, p), D.NOT_SPECULATING),
)
