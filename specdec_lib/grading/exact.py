"""The checks of exercises with one right answer per input.

Each compares the student's function with the library's on many inputs (edge cases,
then random ones that ``seed`` picks) and, when they differ, names the known mistake
whose answers the student's reproduce (:func:`~.harness.compare`). Numbers are
compared after rounding to nine decimals, the tolerance every such check states.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import torch

from specdec_lib.engine.drafters import DraftModelDrafter, NgramDrafter
from specdec_lib.engine.generate import SpeculationStats, speculative_generate
from specdec_lib.engine.model import ModelConfig, TinyGPT
from specdec_lib.engine.sampling import SamplingParams
from specdec_lib.engine.weights import load_model
from specdec_lib.text.language import workload_examples, workload_prompts
from specdec_lib.text.tokenizer import Tokenizer

from .harness import (
    Abort,
    as_int,
    as_tokens,
    as_verification,
    call_student,
    check_signature,
    compare,
    run_check,
)
from .mistakes import MISTAKES, REFERENCES
from .report import Diagnosis, Report

TOLERANCE = 9  # decimals


def _number(value: Any, what: str) -> float:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Abort(Diagnosis.WRONG_TYPE, f"{what} must be a number, got {value!r:.60}.")
    return round(float(value), TOLERANCE)


def _exact_check(
    check: str,
    fn: Any,
    signature: str,
    cases: Callable[[], list],
    answer: Callable[[Callable, Any], Any],
    describe: Callable[[Any], str],
    seed: int,
    timeout: float | None,
) -> Report:
    def body(name: str) -> Report:
        check_signature(fn, name, signature)
        inputs = cases()
        expected = [answer(REFERENCES[check], c) for c in inputs]
        return compare(check, name, fn, inputs, answer, expected, MISTAKES[check], describe)

    return run_check(check, fn, body, seed, timeout)


# --- the n-gram drafter (chapter 3) ----------------------------------------------------


def _ngram_cases(seed: int) -> list[tuple[tuple[int, ...], int, int, int]]:
    """(context, k, max_n, min_n): edge cases, random contexts over tiny alphabets, copy text."""
    edge = [
        ("abcdefgh", 4, 8, 3),
        ("ab", 3, 8, 3),
        ("xyzabcQRSTabc", 3, 8, 3),
        ("abcdabc", 8, 8, 3),
        ("1abcd2 9bcd3 zabcd", 4, 8, 3),
        ("abcX abcY abcZ abc", 2, 8, 3),
        ("abcX abcY abcZ abc", 1, 8, 3),
        ("abcX abcY abcZ abc", 0, 8, 3),
        ("abXYZab", 4, 8, 3),
        ("abcdef1xcdef2abcdef", 4, 4, 2),
        ("\x07" * 12, 4, 8, 3),
        ("abababab", 3, 8, 3),
        ("the cat sat. the cat sat. the c", 6, 8, 3),
        ("zqabcdefghijXabcdefghij", 5, 8, 3),
    ]
    cases = [(tuple(t.encode("ascii")), k, hi, lo) for t, k, hi, lo in edge]
    rng = random.Random(f"ngram/{seed}")
    for _ in range(60):
        context = tuple(rng.randrange(rng.choice([2, 3, 4])) for _ in range(rng.randint(4, 40)))
        hi, lo = rng.choice([(8, 3), (8, 3), (4, 2), (5, 5), (3, 1), (6, 2)])
        cases.append((context, rng.randint(1, 8), hi, lo))
    for ex in workload_examples("copy", 4, seed=100 + seed):
        for _ in range(6):
            text = (ex.prompt + ex.reference)[: len(ex.prompt) + rng.randint(0, len(ex.reference))]
            cases.append((tuple(text.encode("ascii")), rng.randint(1, 8), 8, 3))
    return cases


def _ascii(tokens: tuple[int, ...]) -> str:
    printable = all(32 <= t < 127 or t == 10 for t in tokens)
    return repr(bytes(tokens).decode("ascii")) if printable else str(list(tokens))


def check_ngram_drafter(propose: Callable, seed: int = 0, timeout: float | None = 60.0) -> Report:
    """Check ``propose(context, k, max_n=8, min_n=3) -> list[int]`` against prompt lookup.

    About 100 contexts over a vocabulary of 256 (a failing one prints as text): no
    match, fewer than k tokens to copy, longest-then-latest match, the min_n and max_n
    limits, k = 0, random contexts over tiny alphabets and copy-workload text.
    """
    return _exact_check(
        "check_ngram_drafter",
        propose,
        "propose(context, k, max_n=8, min_n=3)",
        lambda: _ngram_cases(seed),
        lambda fn, c: as_tokens(call_student(fn, "propose", list(c[0]), *c[1:]), "the proposal"),
        lambda c: f"context = {_ascii(c[0])}, k = {c[1]}, max_n = {c[2]}, min_n = {c[3]}",
        seed,
        timeout,
    )


# --- greedy verification (chapter 4) ---------------------------------------------------


def _greedy_cases(seed: int) -> list[tuple[torch.Tensor, tuple[int, ...]]]:
    """Vocabularies of 5 and 256, k = 0..6, every number of matching proposals, and
    proposals that match again after a mismatch (a correct rule must not keep those)."""
    gen = torch.Generator().manual_seed(seed)
    cases = []
    for vocab in (5, 256):
        for k in range(7):
            for n_match in range(k + 1):
                for _ in range(2):
                    logits = torch.randn(k + 1, vocab, generator=gen)  # (k+1, V)
                    best = logits.argmax(-1).tolist()
                    proposed = best[:n_match]
                    for i in range(n_match, k):
                        again = i > n_match and torch.rand((), generator=gen) < 0.5
                        shift = 0 if again else int(torch.randint(1, vocab, (), generator=gen))
                        proposed.append((best[i] + shift) % vocab)
                    cases.append((logits, tuple(proposed)))
    return cases


def check_accept_greedy(
    accept_greedy: Callable, seed: int = 0, timeout: float | None = 60.0
) -> Report:
    """Check ``accept_greedy(target_logits, proposed) -> (emitted, n_accepted)``.

    About 110 random cases (``seed`` picks them): k from 0 to 6, every number of
    matching proposals, proposals that match again after a mismatch.
    """
    return _exact_check(
        "check_accept_greedy",
        accept_greedy,
        "accept_greedy(target_logits, proposed)",
        lambda: _greedy_cases(seed),
        lambda fn, c: as_verification(
            call_student(fn, "accept_greedy", c[0].clone(), list(c[1])), "accept_greedy"
        ),
        lambda c: f"argmax per row = {c[0].argmax(-1).tolist()}, proposed = {list(c[1])}",
        seed,
        timeout,
    )


# --- bytes read per decode step (chapter 1) --------------------------------------------


def check_decode_step_bytes(
    decode_step_bytes: Callable, seed: int = 0, timeout: float | None = 60.0
) -> Report:
    """Check ``decode_step_bytes(model, context_len) -> int``, the bytes a decode step reads
    at batch one, against the library's ``weight_bytes`` and ``kv_cache_bytes_per_token``:
    the course's two models (untrained: the same shapes) and two other TinyGPT shapes, at
    context lengths 0, 1, 100 and 256 (exact: it is an integer)."""
    rng = random.Random(f"bytes/{seed}")

    def cases() -> list[tuple[TinyGPT, int]]:
        models = [load_model("target", trained=False), load_model("draft", trained=False)]
        for layers, width in ((2, 32), (3, 48)):
            config = ModelConfig(vocab_size=rng.randint(50, 300), n_layer=layers, n_embd=width)
            models.append(TinyGPT(config))
        return [(m, n) for m in models for n in (0, 1, 100, 256)]

    return _exact_check(
        "check_decode_step_bytes",
        decode_step_bytes,
        "decode_step_bytes(model, context_len)",
        cases,
        lambda fn, c: as_int(call_student(fn, "decode_step_bytes", *c), "the byte count"),
        lambda c: (
            f"a model with {c[0].num_parameters():,} parameters ({c[0].config.n_layer} "
            f"layers, n_embd = {c[0].config.n_embd}), context_len = {c[1]}"
        ),
        seed,
        timeout,
    )


# --- the break-even draft cost (chapter 5) ---------------------------------------------


def check_break_even_c(
    break_even_c: Callable, seed: int = 0, timeout: float | None = 60.0
) -> Report:
    """Check ``break_even_c(stats) -> float``: at the c it returns, the library's
    ``stats_cost_per_token`` must be exactly 1 (to nine decimals), on 40 random counts."""
    rng = random.Random(f"break-even/{seed}")

    def cases() -> list[SpeculationStats]:
        out = []
        for _ in range(40):
            passes = rng.randint(1, 60)
            out.append(
                SpeculationStats(
                    rounds=passes,
                    target_passes=passes,
                    draft_passes=rng.randint(1, 300),
                    emitted=passes + rng.randint(1, 200),
                )
            )
        return out

    return _exact_check(
        "check_break_even_c",
        break_even_c,
        "break_even_c(stats)",
        cases,
        lambda fn, s: _number(call_student(fn, "break_even_c", s), "break_even_c"),
        lambda s: (
            f"T = {s.target_passes} target passes, D = {s.draft_passes} draft passes, "
            f"E = {s.emitted} emitted tokens"
        ),
        seed,
        timeout,
    )


# --- cache lengths (chapter 8) ---------------------------------------------------------


def check_cache_lengths(
    expected_cache_lengths: Callable,
    target: torch.nn.Module | None = None,
    seed: int = 0,
    timeout: float | None = 60.0,
) -> Report:
    """Check ``expected_cache_lengths(n_prompt, log) -> list[int]`` against the cache lengths
    the engine recorded: eight cached runs of ``target`` (default the shipped model) on copy
    and novel prompts, with the n-gram drafter and the target as its own draft model,
    greedy and sampled, k = 1 to 6."""
    tok = Tokenizer()

    def cases() -> list[tuple[int, list]]:
        model = target if target is not None else load_model("target")
        out = []
        for i in range(8):
            prompt = tok.encode(workload_prompts(("copy", "novel")[i % 2], 1, seed=seed + i)[0])
            drafter = DraftModelDrafter(model) if i % 4 == 3 else NgramDrafter()
            params = SamplingParams(temperature=(0.0, 1.0)[i // 4], max_tokens=30)
            stats, gen = SpeculationStats(), torch.Generator().manual_seed(seed)
            speculative_generate(model, drafter, prompt, params, 1 + i % 6, gen, stats)
            out.append((len(prompt), stats.log))
        return out

    def answer(fn: Callable, case: tuple[int, list]) -> list[int]:
        if fn is REFERENCES["check_cache_lengths"]:
            return [r.cache_length for r in case[1]]  # the engine's own record
        return as_tokens(call_student(fn, "expected_cache_lengths", *case), "the lengths")

    return _exact_check(
        "check_cache_lengths",
        expected_cache_lengths,
        "expected_cache_lengths(n_prompt, log)",
        cases,
        answer,
        lambda c: (
            f"a prompt of {c[0]} tokens, rounds (proposed, accepted, emitted) = "
            + ", ".join(f"({len(r.proposed)}, {r.n_accepted}, {len(r.emitted)})" for r in c[1][:6])
        ),
        seed,
        timeout,
    )


# --- reading a batch sweep (chapter 10) ------------------------------------------------


def check_slower_from(slower_from: Callable, seed: int = 0, timeout: float | None = 60.0) -> Report:
    """Check ``slower_from(rows) -> int | None`` against the library's ``crossover``: 60
    random sweeps of batch sizes 1 to 32 (in random order), speed-ups with intervals that
    lie above 1, below it, or straddle it on either side of the point estimate."""
    rng = random.Random(f"slower/{seed}")

    def row(batch: int) -> dict:
        value = rng.uniform(0.6, 1.4)
        low, high = value - rng.uniform(0, 0.3), value + rng.uniform(0, 0.3)
        return {"batch": batch, "speedup": value, "speedup_low": low, "speedup_high": high}

    def cases() -> list[list[dict]]:
        sweeps = [[row(b) for b in (1, 2, 4, 8, 16, 32)[: rng.randint(1, 6)]] for _ in range(60)]
        for sweep in sweeps[::2]:
            rng.shuffle(sweep)
        return sweeps

    def answer(fn: Callable, rows: list[dict]) -> int | None:
        got = call_student(fn, "slower_from", [dict(r) for r in rows])
        return None if got is None else as_int(got, "the batch size")

    return _exact_check(
        "check_slower_from",
        slower_from,
        "slower_from(rows)",
        cases,
        answer,
        lambda rows: (
            "rows (batch, speedup [low, high]) = "
            + ", ".join(
                f"({r['batch']}, {r['speedup']:.2f} "
                f"[{r['speedup_low']:.2f}, {r['speedup_high']:.2f}])"
                for r in rows
            )
        ),
        seed,
        timeout,
    )
