"""The check of the prompt-lookup (n-gram) drafter exercise.

Prompt lookup has one right answer per context, so the check compares the
student's proposals with the engine's on about a hundred contexts and, when they
differ, names the known mistake whose proposals the student's reproduce
(:data:`~specdec_lib.grading.mistakes.NGRAM_MISTAKES`). Contexts are byte
strings over a vocabulary of 256, so a failing context prints as readable text;
the exercise's ``max_n`` and ``min_n`` are passed explicitly, never taken from
the library's defaults.
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from specdec_lib.engine.sampling import SamplingParams
from specdec_lib.text.language import workload_examples

from .harness import (
    as_tokens,
    call_student,
    check_signature,
    failure,
    fingerprint,
    run_check,
    show_tokens,
)
from .mistakes import NGRAM_MISTAKES, ngram_reference
from .report import Diagnosis, Report


@dataclass(frozen=True)
class _Case:
    context: tuple[int, ...]
    k: int
    max_n: int
    min_n: int
    label: str


def _b(text: str) -> tuple[int, ...]:
    return tuple(text.encode("ascii"))


def _ascii(tokens: Sequence[int]) -> str | None:
    printable = all(32 <= t < 127 or t == 10 for t in tokens)
    return bytes(tokens).decode("ascii") if printable else None


def _cases(seed: int) -> list[_Case]:
    cases = [
        _Case(_b("abcdefgh"), 4, 8, 3, "no earlier occurrence of any suffix"),
        _Case(_b("ab"), 3, 8, 3, "context shorter than min_n + 1"),
        _Case(_b("xyzabcQRSTabc"), 3, 8, 3, "one earlier match"),
        _Case(_b("abcdabc"), 8, 8, 3, "fewer than k tokens follow the match"),
        _Case(
            _b("1abcd2 9bcd3 zabcd"),
            4,
            8,
            3,
            "a long match early and a shorter one later: the longest wins",
        ),
        _Case(_b("abcX abcY abcZ abc"), 2, 8, 3, "several equal-length matches: the latest wins"),
        _Case(_b("abcX abcY abcZ abc"), 1, 8, 3, "k = 1"),
        _Case(_b("abcX abcY abcZ abc"), 0, 8, 3, "k = 0"),
        _Case(_b("abXYZab"), 4, 8, 3, "only a match shorter than min_n"),
        _Case(_b("abcdef1xcdef2abcdef"), 4, 4, 2, "a match longer than max_n: use max_n"),
        _Case((7,) * 12, 4, 8, 3, "one token repeated"),
        _Case(_b("abababab"), 3, 8, 3, "the match overlaps the suffix"),
        _Case(_b("the cat sat. the cat sat. the c"), 6, 8, 3, "a repeated sentence"),
        _Case(_b("zqabcdefghijXabcdefghij"), 5, 8, 3, "suffix longer than max_n"),
    ]
    rng = random.Random(f"ngram/{seed}")
    settings = [(8, 3), (8, 3), (4, 2), (5, 5), (3, 1), (6, 2)]
    for i in range(60):
        alphabet = rng.choice([2, 3, 4])
        context = tuple(rng.randrange(alphabet) for _ in range(rng.randint(4, 40)))
        max_n, min_n = rng.choice(settings)
        cases.append(_Case(context, rng.randint(1, 8), max_n, min_n, f"random context #{i}"))
    for i, ex in enumerate(workload_examples("copy", 4, seed=100 + seed)):
        for j in range(6):
            text = (ex.prompt + ex.reference)[: len(ex.prompt) + rng.randint(0, len(ex.reference))]
            cases.append(_Case(_b(text), rng.randint(1, 8), 8, 3, f"copy prompt #{i}.{j}"))
    return cases


def _caller(obj: Any, name: str) -> tuple[Callable[[_Case], Any], tuple[int, int] | None]:
    """A uniform ``case -> proposal`` for a function, a class or an instance.

    The second value is the ``(max_n, min_n)`` an instance is fixed at, else ``None``.
    """
    params = SamplingParams()
    if inspect.isclass(obj):
        instances: dict[tuple[int, int], Any] = {}

        def from_class(case: _Case) -> Any:
            key = (case.max_n, case.min_n)
            if key not in instances:
                instances[key] = call_student(
                    obj,
                    name,
                    (),
                    {"max_n": case.max_n, "min_n": case.min_n},
                    f"when created as `{name}(max_n={key[0]}, min_n={key[1]})`",
                )
            propose = instances[key].propose
            return call_student(propose, f"{name}.propose", (list(case.context), case.k, params))

        return from_class, None
    bound_to = getattr(obj, "__self__", None)
    if not inspect.isroutine(obj) and callable(getattr(obj, "propose", None)):
        instance = obj
    elif bound_to is not None and callable(getattr(bound_to, "propose", None)):
        instance = bound_to
    else:
        check_signature(obj, name, 2, f"{name}(context, k, max_n=8, min_n=3)")

        def from_function(case: _Case) -> Any:
            kwargs = {"max_n": case.max_n, "min_n": case.min_n}
            return call_student(obj, name, (list(case.context), case.k), kwargs)

        return from_function, None

    def from_instance(case: _Case) -> Any:
        return call_student(
            instance.propose, f"{name}.propose", (list(case.context), case.k, params)
        )

    return from_instance, (getattr(instance, "max_n", 8), getattr(instance, "min_n", 3))


_ADVICE = {
    Diagnosis.EARLIEST_MATCH: "When the suffix occurred several times, copy what followed its "
    "latest occurrence (the most recent context predicts best); you used the earliest.",
    Diagnosis.SHORTEST_FIRST: "Try the longest suffix first, n = max_n down to min_n, and stop "
    "at the first n that occurred before; you tried short suffixes first, so an ambiguous "
    "short match beat a longer one.",
    Diagnosis.NEVER_PROPOSES: "You proposed nothing on contexts that do contain an earlier "
    "occurrence of their suffix. A common cause: the search also finds the suffix itself (the "
    "last n tokens), which has nothing after it; only search windows that end before the last "
    "token.",
    Diagnosis.COPIES_THE_MATCH: "Propose what follows the match: context[start + n : start + n "
    "+ k]. You started one token early and copied the match's own last token.",
    Diagnosis.IGNORES_K: "Propose at most k tokens.",
    Diagnosis.IGNORES_MIN_N: "Never match a suffix shorter than min_n: short n-grams occur "
    "almost everywhere and what followed them predicts nothing. With no match of length >= "
    "min_n, propose nothing.",
    Diagnosis.IGNORES_MAX_N: "Start from n = max_n (or the longest suffix that fits, if "
    "shorter), not from the whole context.",
}


def _diagnose(cases: list[_Case], expected: list, got: list) -> tuple[Diagnosis, str] | None:
    """The mistake behind the wrong proposals, with how far the evidence goes."""
    too_long = [i for i in range(len(cases)) if len(got[i]) > cases[i].k]
    if too_long:
        i = too_long[0]
        return Diagnosis.IGNORES_K, (
            f"{len(too_long)} contexts (first: k = {cases[i].k}, returned {len(got[i])} tokens)"
        )
    found = fingerprint(
        NGRAM_MISTAKES.values(),
        cases,
        expected,
        got,
        lambda fn, c: fn(list(c.context), c.k, c.max_n, c.min_n),
    )
    wrong = [i for i in range(len(cases)) if got[i] != expected[i]]
    if found is None and all(not got[i] for i in wrong):
        return Diagnosis.NEVER_PROPOSES, f"{len(wrong)} contexts"
    return found


def check_ngram_drafter(
    propose: Any, max_n: int = 8, min_n: int = 3, seed: int = 0, timeout: float | None = 60.0
) -> Report:
    """Check a prompt-lookup (n-gram) drafter against :class:`~specdec_lib.NgramDrafter`.

    The exercise implements::

        def propose(context: list[int], k: int, max_n: int = 8, min_n: int = 3) -> list[int]:
            '''Up to k tokens that followed the latest earlier occurrence of the longest
            suffix of ``context`` of length n, for n = max_n down to min_n; [] if none.'''

    A class with ``__init__(max_n, min_n)`` and ``propose(context, k, params)`` returning a
    list or a :class:`~specdec_lib.Proposal` (like the library's) is accepted too, and
    so is an instance of one (checked at its own ``max_n``/``min_n``). ``max_n`` and
    ``min_n`` here are the defaults of the function form; the check also tries others.
    About 100 contexts: edge cases (no match, fewer than k tokens to copy, longest
    then latest match, min_n and max_n limits, k = 0), random contexts over tiny
    alphabets (``seed`` picks them) and copy-workload text.
    """

    def body(name: str) -> Report:
        call, fixed = _caller(propose, name)
        cases = _cases(seed)
        if fixed is not None:
            cases = [_Case(c.context, c.k, *fixed, c.label) for c in cases]
        expected = [ngram_reference(list(c.context), c.k, c.max_n, c.min_n) for c in cases]
        results = [call(c) for c in cases]
        got = [as_tokens(getattr(r, "tokens", r), "the proposal") for r in results]
        wrong = [i for i in range(len(cases)) if got[i] != expected[i]]
        evidence: dict[str, Any] = {"contexts": len(cases), "wrong": len(wrong)}
        if not wrong:
            return Report(
                "check_ngram_drafter",
                name,
                True,
                f"Correct on all {len(cases)} contexts: no match, fewer than k tokens to copy, "
                "longest-then-latest match, the min_n and max_n limits, k = 0 and k = 1, random "
                "contexts and copy-workload text.",
                None,
                evidence,
            )
        first = cases[wrong[0]]
        example = (
            f"First failing context ({first.label}): context = "
            f"{show_tokens(first.context, _ascii)}, k = {first.k}, max_n = {first.max_n}, "
            f"min_n = {first.min_n}: expected {expected[wrong[0]]} = "
            f"{show_tokens(expected[wrong[0]], _ascii)}, got {got[wrong[0]]}."
        )
        differs = (
            Diagnosis.NGRAM_MISMATCH,
            f"Your proposals differ from prompt lookup on {len(wrong)} of {len(cases)} contexts.",
        )
        raise failure(_diagnose(cases, expected, got), _ADVICE, differs, example, evidence)

    return run_check("check_ngram_drafter", propose, body, seed, timeout)
