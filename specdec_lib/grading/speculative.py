"""The check of the speculative-decoding exercise (greedy, chapter 0).

Greedy speculation has one right output, plain greedy decoding's, and must be cheaper:
the check compares tokens and counts the target's forward passes with a hook. The
drafter it hands the student is watched, so a loop that asks for one context forever
is stopped long before the time limit. Models load when the check runs, never at import.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from specdec_lib.engine.batched import speculative_generate_batch
from specdec_lib.engine.drafters import DraftModelDrafter, NgramDrafter, Proposal
from specdec_lib.engine.generate import generate, speculate
from specdec_lib.engine.generate import speculative_generate as library_loop
from specdec_lib.engine.sampling import SamplingParams
from specdec_lib.engine.tree_decode import tree_speculate, tree_speculative_generate
from specdec_lib.engine.weights import load_model
from specdec_lib.text.language import workload_prompts
from specdec_lib.text.tokenizer import Tokenizer

from .harness import Abort, as_tokens, call_student, forbidden, run_check
from .report import Diagnosis, Report

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
