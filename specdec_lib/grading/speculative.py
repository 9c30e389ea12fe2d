"""The check of the speculative-decoding exercise (greedy).

Greedy speculative decoding has one right output, plain greedy decoding's, so
the check compares tokens; and it must be cheaper, so the check counts the
target's forward passes with a hook and compares them with the library's. The
drafter it hands the student is watched: a loop that asks for the same context
over and over has stopped making progress and is stopped, with that diagnosis,
long before the time limit.

The models are loaded when the check runs, never at import, so importing the
graders needs no weights.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch

from specdec_lib.engine.drafters import DraftModelDrafter, NgramDrafter, Proposal
from specdec_lib.engine.generate import generate
from specdec_lib.engine.generate import speculative_generate as library_speculative_generate
from specdec_lib.engine.sampling import SamplingParams
from specdec_lib.engine.weights import load_model
from specdec_lib.text.language import workload_prompts
from specdec_lib.text.tokenizer import Tokenizer

from .harness import (
    Abort,
    NoProgress,
    as_tokens,
    call_student,
    check_signature,
    run_check,
    show_tokens,
)
from .report import Diagnosis, Report

# The n-gram drafter's sizes here are the check's own, not the library's defaults.
MAX_N, MIN_N = 8, 3


class _WatchedDrafter:
    """Forwards to a drafter, counts calls, stops a loop that asks for one context forever."""

    MAX_REPEATS = 25

    def __init__(self, drafter: Any) -> None:
        self.drafter = drafter
        self.name = drafter.name
        self.calls = 0
        self._last: int | None = None
        self._repeats = 0

    def propose(
        self, context: Sequence[int], k: int, params: Any = None, generator: Any = None
    ) -> Proposal:
        self.calls += 1
        if len(context) == self._last:
            self._repeats += 1
            if self._repeats >= self.MAX_REPEATS:
                raise NoProgress(
                    f"Your loop stopped making progress: the drafter was asked {self._repeats + 1} "
                    f"times in a row to extend the same {len(context)}-token context. Every round "
                    "must emit at least one token: the accepted proposals plus the target's own "
                    "token (the correction at the first rejection, or the bonus)."
                )
        else:
            self._last, self._repeats = len(context), 0
        return self.drafter.propose(context, k, params, generator)


@contextmanager
def _count_passes(model: torch.nn.Module) -> Iterator[list[int]]:
    counter = [0]
    handle = model.register_forward_pre_hook(
        lambda module, args: counter.__setitem__(0, counter[0] + 1)
    )
    try:
        yield counter
    finally:
        handle.remove()


def _cases(
    target: torch.nn.Module, draft: torch.nn.Module, tok: Tokenizer, seed: int
) -> list[tuple[str, list[int], Callable[[], Any], int, int, bool]]:
    """(label, prompt, make_drafter, k, max_tokens, counts towards speed) per case."""
    copy = [tok.encode(p) for p in workload_prompts("copy", 3, seed=100 + seed)]
    novel = tok.encode(workload_prompts("novel", 1, seed=100 + seed)[0])
    vocab = target.config.vocab_size

    def ngram() -> NgramDrafter:
        return NgramDrafter(MAX_N, MIN_N, vocab)

    def draft_model() -> DraftModelDrafter:
        return DraftModelDrafter(draft)

    return [
        ("copy prompt 1, n-gram drafter, k = 4", copy[0], ngram, 4, 40, True),
        ("copy prompt 2, n-gram drafter, k = 4", copy[1], ngram, 4, 37, True),
        ("novel prompt, n-gram drafter, k = 4", novel, ngram, 4, 23, False),
        ("copy prompt 3, draft model, k = 3", copy[2], draft_model, 3, 17, False),
        ("copy prompt 1, n-gram drafter, k = 1", copy[0], ngram, 1, 9, False),
    ]


def check_speculative_generate(
    speculative_generate: Callable,
    target: torch.nn.Module | None = None,
    draft: torch.nn.Module | None = None,
    seed: int = 0,
    timeout: float | None = 120.0,
) -> Report:
    """Check greedy speculative decoding: same tokens as :func:`generate`, fewer target passes.

    The exercise implements::

        def speculative_generate(target, drafter, prompt_token_ids, params, k) -> list[int]:
            '''Repeat: drafter.propose(tokens, up to k, params) -> Proposal; score
            context + proposal in ONE target forward pass; keep what verification
            accepts plus one token from the target. Return exactly params.max_tokens
            new tokens.'''

    Five greedy cases on the target (``target``/``draft`` default to the shipped
    models): copy prompts with an n-gram drafter at k = 4 and k = 1, a novel
    prompt, and a draft-model drafter at k = 3, with lengths that do not divide
    evenly into rounds. Each output must equal plain greedy decoding token for
    token and have exactly ``max_tokens`` tokens; target forward passes are counted
    (with a hook) and compared with the library's on the copy prompts, where
    speculation must save passes. The sampled path is what
    :func:`check_accept_sampled` tests.
    """
    tok = Tokenizer()

    def text(tokens: list[int]) -> str | None:
        return tok.decode(tokens) if all(0 <= t < tok.vocab_size for t in tokens) else None

    def body(name: str) -> Report:
        check_signature(
            speculative_generate, name, 5, f"{name}(target, drafter, prompt_token_ids, params, k)"
        )
        model = target if target is not None else load_model("target")
        cases = _cases(model, draft if draft is not None else load_model("draft"), tok, seed)
        student_passes = library_passes = speed_tokens = drafter_calls = 0
        for label, prompt, make_drafter, k, max_tokens, for_speed in cases:
            params = SamplingParams(temperature=0.0, max_tokens=max_tokens)
            watched = _WatchedDrafter(make_drafter())
            with _count_passes(model) as counted, torch.no_grad():
                args = (model, watched, list(prompt), params, k)
                result = call_student(speculative_generate, name, args, during=f"on the {label}")
            got = as_tokens(result, f"the value `{name}` returns")
            expected = generate(model, prompt, params)
            with _count_passes(model) as reference:
                library_speculative_generate(model, make_drafter(), prompt, params, k)
            drafter_calls += watched.calls
            if len(got) != max_tokens:
                hint = (
                    "The last round must not overrun: draft at most max_tokens - emitted - 1 "
                    "tokens (a round can emit one more than it drafts), or cut the output."
                    if len(got) > max_tokens
                    else "Keep going until exactly max_tokens new tokens were emitted, and "
                    "return only the new tokens (not the prompt)."
                )
                raise Abort(
                    Diagnosis.WRONG_LENGTH,
                    f"On the {label} with max_tokens = {max_tokens} you returned "
                    f"{len(got)} tokens. {hint}",
                    case=label,
                    max_tokens=max_tokens,
                    returned=len(got),
                )
            if got != expected:
                at = next(i for i in range(max_tokens) if got[i] != expected[i])
                raise Abort(
                    Diagnosis.OUTPUT_MISMATCH,
                    "Greedy speculative decoding must return exactly what plain greedy decoding "
                    f"returns. On the {label} the outputs first differ at new token {at}: "
                    f"expected {expected[at]} ({show_tokens(expected[at : at + 1], text)}), got "
                    f"{got[at]} ({show_tokens(got[at : at + 1], text)}), after "
                    f"{show_tokens(expected[:at], text, 30)}. Common causes: verifying with the "
                    "wrong rows of logits (you need the last m + 1 rows for m proposals), "
                    "appending the rejected proposal, or a KV cache that still holds rejected "
                    "tokens.",
                    case=label,
                    first_difference_at=at,
                )
            if for_speed:
                student_passes += counted[0]
                library_passes += reference[0]
                speed_tokens += max_tokens
        evidence: dict[str, Any] = {
            "cases": len(cases),
            "copy prompts: tokens per target pass (yours)": speed_tokens / max(student_passes, 1),
            "copy prompts: tokens per target pass (library)": speed_tokens / library_passes,
            "drafter calls": drafter_calls,
        }
        if student_passes >= speed_tokens:
            why = "are proposals accepted?" if drafter_calls else "the drafter was never called"
            raise Abort(
                Diagnosis.NOT_SPECULATING,
                f"The tokens are right, but you ran {student_passes} target forward passes for "
                f"{speed_tokens} tokens on copy prompts, at least one per token: that is plain "
                f"decoding ({why}). Score all proposals in one target pass and keep every "
                "accepted token.",
                **evidence,
            )
        if student_passes > 1.5 * library_passes + 2:
            raise Abort(
                Diagnosis.TOO_MANY_PASSES,
                f"The tokens are right, but you ran {student_passes} target forward passes where "
                f"the library needs {library_passes} for the same copy prompts. Each round should "
                "cost exactly one target pass over the context plus the proposals.",
                **evidence,
            )
        return Report(
            "check_speculative_generate",
            name,
            True,
            f"Correct: identical to plain greedy decoding on all {len(cases)} cases (n-gram and "
            f"draft-model drafters, k = 1, 3 and 4, lengths that do not divide into rounds), with "
            f"{speed_tokens / student_passes:.2f} tokens per target pass on the copy prompts "
            f"(library: {speed_tokens / library_passes:.2f}).",
            None,
            evidence,
        )

    return run_check("check_speculative_generate", speculative_generate, body, seed, timeout)
