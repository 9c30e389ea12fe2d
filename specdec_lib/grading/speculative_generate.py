"""Chapter 0's exercise, greedy speculative decoding without a KV cache, in one module: the
answer in the student's form, its slips (each the engine's loop with one thing changed),
and the check.

``speculative_generate(target, drafter, prompt_token_ids, params, k) -> list[int]`` must
return exactly what plain greedy decoding returns, ``params.max_tokens`` new tokens, in
fewer target passes than tokens. Greedy speculation has one right output, plain greedy
decoding's, and must be cheaper: the check compares tokens and counts the target's forward
passes with a hook. The slips are what those two measurements must catch in a first loop:
it overshoots the budget, reads the target's rows one position early, drops the target's
own token (a round that accepts nothing emits nothing), or does not speculate at all.

The drafter the check hands the student is watched, so a loop that asks for one context
forever is stopped long before the time limit. Models load when the check runs, never at
import.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from itertools import accumulate
from typing import Any
from unittest import mock

import torch

from specdec_lib.engine.batched import speculative_generate_batch
from specdec_lib.engine.drafters import DraftModelDrafter, NgramDrafter, Proposal
from specdec_lib.engine.generate import SpeculationStats, generate, speculate
from specdec_lib.engine.generate import speculative_generate as library_loop
from specdec_lib.engine.sampling import SamplingParams
from specdec_lib.engine.tree_decode import tree_speculate, tree_speculative_generate
from specdec_lib.engine.verify import accept_greedy
from specdec_lib.engine.weights import load_model
from specdec_lib.text.language import workload_prompts
from specdec_lib.text.tokenizer import Tokenizer

from .mistakes import register
from .report import Diagnosis, Report
from .sandbox import Abort, as_tokens, call_student, forbidden, run_check

# --- the answer, and its slips ---------------------------------------------------------


def _speculative_reference(target, drafter, prompt_token_ids, params, k):
    """Correct (the textbook version without a KV cache): draft, verify in one pass, repeat."""
    return library_loop(target, drafter, prompt_token_ids, params, k, use_kv_cache=False)


def _speculative_overshoots(target, drafter, prompt_token_ids, params, k):
    """Drafts as if max_tokens were k larger and stops after the round that reaches it."""
    stats, longer = SpeculationStats(), replace(params, max_tokens=params.max_tokens + k)
    out = library_loop(target, drafter, prompt_token_ids, longer, k, None, stats, False)
    ends = accumulate(len(record.emitted) for record in stats.log)
    return out[: next(end for end in ends if end >= params.max_tokens)]


def _speculative_off_by_one_rows(target, drafter, prompt_token_ids, params, k):
    """The target's logits read one position too early: row t holds row t - 1."""

    def early(idx, cache=None, logits_to_keep=0, forward=target.forward):
        keep = logits_to_keep + 1 if 0 < logits_to_keep < idx.shape[1] else 0  # one row more
        out = forward(idx, cache, keep)
        return out[:, :-1] if keep else torch.cat([out[:, :1], out[:, :-1]], 1)

    with mock.patch.object(target, "forward", early):
        return _speculative_reference(target, drafter, prompt_token_ids, params, k)


def _speculative_drops_correction(target, drafter, prompt_token_ids, params, k):
    """The engine's loop with its greedy rule swapped for one that drops the target's token."""
    rule = f"{library_loop.__module__}.greedy_rule"
    with mock.patch(rule, _without_target):
        return _speculative_reference(target, drafter, prompt_token_ids, params, k)


def _without_target(logits: torch.Tensor, proposed: list[int]) -> tuple[list[int], int]:
    emitted, n = accept_greedy(logits, proposed)
    return emitted[:n], n


#: The slips: ``(label, function, diagnosis)``, registered below.
_SLIPS = (
    ("overshoots max_tokens", _speculative_overshoots, Diagnosis.WRONG_LENGTH),
    ("off-by-one rows", _speculative_off_by_one_rows, Diagnosis.OUTPUT_MISMATCH),
    ("drops the correction token", _speculative_drops_correction, Diagnosis.NO_PROGRESS),
    ("plain decoding", lambda t, d, ids, p, k: generate(t, ids, p), Diagnosis.NOT_SPECULATING),
)

register("check_speculative_generate", _speculative_reference, *_SLIPS)


# --- the check -------------------------------------------------------------------------

_MAX_REPEATS = 25  # asked this often in a row for one context: the loop is stuck

#: The library's speculative loops: one request, a batch, a tree.
_LOOPS = forbidden(
    speculate, library_loop, speculative_generate_batch, tree_speculate, tree_speculative_generate
)


class _WatchedDrafter:
    """Forwards to a drafter, counts calls, stops a loop that asks for one context forever."""

    def __init__(self, drafter: Any) -> None:
        self.drafter, self.name, self.calls, self.last, self.repeats = drafter, "watched", 0, -1, 0

    def propose(self, context: list[int], k: int, params: Any = None, gen: Any = None) -> Proposal:
        self.calls += 1
        self.repeats = self.repeats + 1 if len(context) == self.last else 0
        self.last = len(context)
        if self.repeats >= _MAX_REPEATS:
            details = f"The drafter was asked {self.repeats + 1} times for one context."
            raise Abort(Diagnosis.NO_PROGRESS, details)
        return self.drafter.propose(context, k, params, gen)


def _passes(model: torch.nn.Module, fn: Callable, *args: Any, **kwargs: Any) -> tuple[Any, int]:
    """``fn(*args, **kwargs)`` and the number of forward passes of ``model`` it made."""
    counter = [0]
    handle = model.register_forward_pre_hook(lambda *_: counter.__setitem__(0, counter[0] + 1))
    try:
        with torch.no_grad():
            return fn(*args, **kwargs), counter[0]
    finally:
        handle.remove()


def check_speculative_generate(
    speculative_generate: Callable,
    target: torch.nn.Module | None = None,
    draft: torch.nn.Module | None = None,
    seed: int = 0,
    timeout: float | None = 120.0,
) -> Report:
    """Check ``speculative_generate(target, drafter, prompt_token_ids, params, k) -> list[int]``
    on five greedy cases (``target``/``draft`` default to the shipped models): each output
    must equal plain greedy decoding, with exactly ``max_tokens`` tokens, and on the copy
    prompts use fewer target passes than tokens, and not far more than the library."""
    tok = Tokenizer()

    def body(name: str) -> Report:
        model = target if target is not None else load_model("target")
        small = draft if draft is not None else load_model("draft")
        copy = [tok.encode(p) for p in workload_prompts("copy", 3, seed=100 + seed)]
        novel = tok.encode(workload_prompts("novel", 1, seed=100 + seed)[0])
        ngram, by_model, vocab = "n-gram drafter", "draft model", model.config.vocab_size
        cases = [  # label, prompt, drafter, k, max_tokens, counts towards speed
            ("copy prompt 1", copy[0], ngram, 4, 40, True),
            ("copy prompt 2", copy[1], ngram, 4, 37, True),
            ("novel prompt", novel, ngram, 4, 23, False),
            ("copy prompt 3", copy[2], by_model, 3, 17, False),
            ("copy prompt 1", copy[0], ngram, 1, 9, False),
        ]
        theirs = ours = tokens = calls = 0
        for prompt_label, prompt, kind, k, max_tokens, for_speed in cases:
            label = f"{prompt_label}, {kind}, k = {k}"
            params = SamplingParams(temperature=0.0, max_tokens=max_tokens)
            make = (
                partial(DraftModelDrafter, small)
                if kind == by_model
                else partial(NgramDrafter, 8, 3, vocab)
            )
            args = (speculative_generate, name, model, _WatchedDrafter(make()), list(prompt))
            result, passes = _passes(
                model, call_student, *args, params, k, during=f"on the {label}"
            )
            got = as_tokens(result, f"the value `{name}` returns")
            expected = generate(model, prompt, params)
            _, reference = _passes(model, library_loop, model, make(), prompt, params, k)
            calls += args[3].calls
            if len(got) != max_tokens:
                details = f"On the {label} with max_tokens = {max_tokens} you returned {len(got)}."
                raise Abort(Diagnosis.WRONG_LENGTH, details, case=label, returned=len(got))
            if got != expected:
                at = next(i for i in range(max_tokens) if got[i] != expected[i])
                mine, right = tok.decode(got[at : at + 1]), tok.decode(expected[at : at + 1])
                details = (
                    f"On the {label} new token {at} is {got[at]} ({mine!r}); greedy decoding "
                    f"gives {expected[at]} ({right!r})."
                )
                raise Abort(Diagnosis.OUTPUT_MISMATCH, details, case=label, first_difference_at=at)
            if for_speed:
                theirs, ours, tokens = theirs + passes, ours + reference, tokens + max_tokens
        evidence: dict[str, Any] = {
            "cases": len(cases),
            "copy prompts: tokens per target pass (yours)": tokens / max(theirs, 1),
            "copy prompts: tokens per target pass (library)": tokens / ours,
            "drafter calls": calls,
        }
        if theirs >= tokens:
            details = f"{theirs} target passes for {tokens} tokens on copy prompts."
            raise Abort(Diagnosis.NOT_SPECULATING, details, **evidence)
        if theirs > 1.5 * ours + 2:
            details = f"{theirs} target passes where the library needs {ours}."
            raise Abort(Diagnosis.TOO_MANY_PASSES, details, **evidence)
        message = f"Correct: identical to plain greedy decoding on all {len(cases)} cases, with "
        message += f"{tokens / theirs:.2f} tokens per target pass on the copy prompts (library: "
        message += f"{tokens / ours:.2f})."
        return Report("check_speculative_generate", name, True, message, None, evidence)

    return run_check(
        "check_speculative_generate", speculative_generate, body, seed, timeout, _LOOPS
    )
