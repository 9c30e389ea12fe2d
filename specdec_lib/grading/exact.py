"""The checks of exercises with one right answer per input (chapters 1, 3, 4, 5, 8, 10):
the student's answers against the reference's on many inputs, and, when they differ, the
known mistake whose answers the student's reproduce. Numbers are rounded to 9 decimals.
"""

from __future__ import annotations

import dataclasses
import inspect
import random
from collections.abc import Callable
from types import CodeType
from typing import Any

import torch

from specdec_lib.analysis import theory
from specdec_lib.analysis.costs import (
    cost_per_token,
    kv_cache_bytes_per_token,
    stats_cost_per_token,
    weight_bytes,
)
from specdec_lib.analysis.replication import crossover
from specdec_lib.engine.drafters import DraftModelDrafter, NgramDrafter
from specdec_lib.engine.generate import SpeculationStats, speculative_generate
from specdec_lib.engine.model import ModelConfig, TinyGPT
from specdec_lib.engine.sampling import SamplingParams
from specdec_lib.engine.tree import walk_greedy
from specdec_lib.engine.tree_decode import NgramTreeDrafter
from specdec_lib.engine.verify import accept_greedy, greedy_rule
from specdec_lib.engine.weights import load_model
from specdec_lib.text.language import workload_examples, workload_prompts
from specdec_lib.text.tokenizer import Tokenizer

from .harness import (
    Abort,
    as_int,
    as_tokens,
    as_verification,
    call_student,
    forbidden,
    run_check,
)
from .mistakes import MISTAKES, REFERENCES
from .report import Diagnosis, Report


class ExactCheck:
    """A check with one right answer per input: ``check(fn, seed=0, timeout=60.0, **inputs)``;
    ``cases(seed, **inputs)`` makes the inputs, ``answer(fn, case)`` is ``fn``'s answer as
    plain data, ``describe(case)`` a case in words, ``show(answer)`` an answer in words;
    ``forbid`` is the library's own implementations of the exercise (:func:`forbidden`)."""

    def __init__(
        self,
        name: str,
        cases,
        answer,
        describe,
        doc: str,
        forbid: dict[CodeType, str] | None = None,
        show: Callable[[Any], str] = repr,
    ) -> None:
        self.__name__, self.__doc__ = name, doc
        self.cases, self.answer, self.describe = cases, answer, describe
        self.forbid, self.show = forbid or {}, show

    def __call__(self, fn: Callable, seed: int = 0, timeout: float | None = 60.0, **inputs: Any):
        def body(name: str) -> Report:
            cases = self.cases(seed, **inputs)
            expected = [self.answer(REFERENCES[self.__name__], c) for c in cases]
            got = [self.answer(fn, c) for c in cases]
            wrong = [i for i in range(len(cases)) if got[i] != expected[i]]
            evidence: dict[str, Any] = {"cases": len(cases), "wrong": len(wrong)}
            if not wrong:
                return Report(
                    self.__name__, name, True, f"Correct on all {len(cases)} cases.", None, evidence
                )
            # The known mistake the student agrees with on at least 90% of the cases where it
            # is wrong, and which explains at least 60% of the student's wrong answers.
            best, diagnosis = (0.6, 0.9), Diagnosis.WRONG_ANSWER
            for mistake in MISTAKES[self.__name__].values():
                theirs = [self.answer(mistake.function, c) for c in cases]
                differs = [i for i in range(len(cases)) if theirs[i] != expected[i]]
                agree = sum(got[i] == theirs[i] for i in differs) / max(len(differs), 1)
                score = (sum(got[i] == theirs[i] for i in wrong) / len(wrong), agree)
                if differs and score[0] >= 0.6 and agree >= 0.9 and score >= best:
                    best, diagnosis = score, mistake.diagnosis
                    evidence["agrees with this mistake on"] = f"{agree:.0%} of its wrong answers"
            i, first = wrong[0], self.describe(cases[wrong[0]])
            details = (
                f"Wrong on {len(wrong)} of {len(cases)} cases; the first: {first}: "
                f"expected {self.show(expected[i]):.200}, got {self.show(got[i]):.200}."
            )
            raise Abort(diagnosis, details, **evidence)

        return run_check(self.__name__, fn, body, seed, timeout, self.forbid)


def _ngram_cases(seed: int) -> list[tuple[tuple[int, ...], int, int, int]]:
    """(context, k, max_n, min_n): edge cases, random contexts over tiny alphabets, copy text."""
    edge = "abcdefgh 4 8 3|ab 3 8 3|xyzabcQRSTabc 3 8 3|abcdabc 8 8 3|1abcd2_9bcd3_zabcd 4 8 3|"
    edge += "abcX_abcY_abcZ_abc 2 8 3|abcX_abcY_abcZ_abc 1 8 3|abcX_abcY_abcZ_abc 0 8 3|"
    edge += "abXYZab 4 8 3|abcdef1xcdef2abcdef 4 4 2|aaaaaaaaaaaa 4 8 3|abababab 3 8 3|"
    edge += "the_cat_sat._the_cat_sat._the_c 6 8 3|zqabcdefghijXabcdefghij 5 8 3"
    cases = []
    for row in edge.split("|"):
        text, *numbers = row.split()
        cases.append((tuple(text.replace("_", " ").encode("ascii")), *map(int, numbers)))
    rng = random.Random(f"ngram/{seed}")
    for _ in range(60):
        context = tuple(rng.randrange(rng.choice([2, 3, 4])) for _ in range(rng.randint(4, 40)))
        cases.append((context, rng.randint(1, 8), *rng.choice([(8, 3), (4, 2), (5, 5), (3, 1)])))
    for ex in workload_examples("copy", 4, seed=100 + seed):
        for _ in range(6):
            text = (ex.prompt + ex.reference)[: len(ex.prompt) + rng.randint(0, len(ex.reference))]
            cases.append((tuple(text.encode("ascii")), rng.randint(1, 8), 8, 3))
    return cases


def _printable(tokens) -> bool:
    return bool(tokens) and all(32 <= t < 127 or t == 10 for t in tokens)


def _context(tokens: tuple[int, ...]) -> str:
    """A context as its ids, or, when every id is a printable ASCII code, as that text."""
    if not _printable(tokens):
        return str(list(tokens))
    return f"{bytes(tokens).decode('ascii')!r} (the ASCII codes of its {len(tokens)} characters)"


def _proposal(tokens: Any) -> str:
    """A proposal as its ids, and as text when they are printable ASCII codes."""
    text = f" = {bytes(tokens).decode('ascii')!r}" if _printable(tokens) else ""
    return f"{list(tokens)!r}{text}"


check_ngram_drafter = ExactCheck(
    "check_ngram_drafter",
    lambda seed: _ngram_cases(seed),
    lambda fn, c: as_tokens(call_student(fn, "propose", list(c[0]), *c[1:]), "the proposal"),
    lambda c: f"context = {_context(c[0])}, k = {c[1]}, max_n = {c[2]}, min_n = {c[3]}",
    """Check ``propose(context, k, max_n=8, min_n=3) -> list[int]`` against prompt lookup on
    about 100 contexts: edge cases, random contexts over tiny alphabets, copy-workload text
    (the last two kinds as lists of ASCII codes, so that a failing case reads as text).""",
    forbidden(
        NgramDrafter.find_match,
        NgramDrafter.draft,
        NgramTreeDrafter.continuations,
        NgramTreeDrafter.draft_tree,
    ),
    _proposal,
)


def _greedy_cases(seed: int) -> list[tuple[torch.Tensor, tuple[int, ...]]]:
    """Vocabularies of 5 and 256, k = 0..6, every number of matching proposals, and
    proposals that match again after a mismatch (a correct rule must not keep those)."""
    gen = torch.Generator().manual_seed(seed)
    cases = []
    for vocab, k, _ in [(v, k, r) for v in (5, 256) for k in range(7) for r in range(2)]:
        for n_match in range(k + 1):
            logits = torch.randn(k + 1, vocab, generator=gen)  # (k+1, V)
            best = logits.argmax(-1).tolist()
            proposed = best[:n_match]
            for i in range(n_match, k):
                again = i > n_match and torch.rand((), generator=gen) < 0.5
                shift = 0 if again else int(torch.randint(1, vocab, (), generator=gen))
                proposed.append((best[i] + shift) % vocab)
            cases.append((logits, tuple(proposed)))
    return cases


check_accept_greedy = ExactCheck(
    "check_accept_greedy",
    lambda seed: _greedy_cases(seed),
    lambda fn, c: as_verification(call_student(fn, "accept_greedy", c[0].clone(), list(c[1])), ""),
    lambda c: f"argmax per row = {c[0].argmax(-1).tolist()}, proposed = {list(c[1])}",
    """Check ``accept_greedy(target_logits, proposed) -> (emitted, n_accepted)`` on about
    110 random cases: k from 0 to 6, every number of matching proposals.""",
    forbidden(accept_greedy, greedy_rule, walk_greedy),
)


def _models(seed: int) -> list[tuple[TinyGPT, int]]:
    """The course's two models (untrained: the same shapes), two other shapes, one of them with
    grouped-query attention (6 query heads sharing 2 key/value heads, as SmolLM2 shares 3
    among 9), four contexts."""
    rng = random.Random(f"bytes/{seed}")
    models = [load_model("target", trained=False), load_model("draft", trained=False)]
    for layers, width, heads, kv_heads in ((2, 32, 4, None), (3, 48, 6, 2)):
        config = ModelConfig(
            vocab_size=rng.randint(50, 300),
            n_layer=layers,
            n_embd=width,
            n_head=heads,
            n_kv_head=kv_heads,
        )
        models.append(TinyGPT(config))
    return [(m, n) for m in models for n in (0, 1, 100, 256)]


check_decode_step_bytes = ExactCheck(
    "check_decode_step_bytes",
    _models,
    lambda fn, c: as_int(call_student(fn, "decode_step_bytes", *c), "the byte count"),
    lambda c: (
        f"{c[0].config.n_layer} layers, n_embd = {c[0].config.n_embd}, "
        f"{c[0].config.n_head} heads ({c[0].config.kv_heads} key/value), context_len = {c[1]}"
    ),
    """Check ``decode_step_bytes(model, context_len) -> int`` against ``weight_bytes`` plus
    ``kv_cache_bytes_per_token`` times the context: four model shapes (one with grouped-query
    attention), four contexts.""",
    forbidden(weight_bytes, kv_cache_bytes_per_token),
)


def _counts(seed: int) -> list[SpeculationStats]:
    rng, out = random.Random(f"break-even/{seed}"), []
    for _ in range(40):
        passes, drafts, extra = (rng.randint(1, 60), rng.randint(1, 300), rng.randint(1, 200))
        out.append(SpeculationStats(passes, passes, drafts, emitted=passes + extra))
    return out


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Abort(Diagnosis.WRONG_TYPE, f"{what} must be a number, got {value!r:.60}.")
    return round(float(value), 9)


check_break_even_c = ExactCheck(
    "check_break_even_c",
    _counts,
    lambda fn, s: _number(call_student(fn, "break_even_c", s), "break_even_c"),
    lambda s: f"T = {s.target_passes}, D = {s.draft_passes}, E = {s.emitted}",
    """Check ``break_even_c(stats) -> float``: at the c it returns, ``stats_cost_per_token``
    must be 1 (to nine decimals), on 40 random counts T, D and E.""",
    forbidden(stats_cost_per_token, cost_per_token),
)


def _rate_cases(seed: int) -> list[tuple[tuple[float, ...], int]]:
    """40 random acceptance rates per position (zeros and ones among them), k = 1 to 10,
    sometimes with more rates than k."""
    rng = random.Random(f"rates/{seed}")
    cases = [((1.0,) * 6, 6), ((0.0, 1.0, 1.0), 3), ((0.5,), 1)]
    for _ in range(37):
        k = rng.randint(1, 10)
        rates = tuple(rng.choice([0.0, 1.0, round(rng.random(), 3)]) for _ in range(k))
        cases.append((rates + tuple(round(rng.random(), 3) for _ in range(rng.randint(0, 2))), k))
    return cases


check_tokens_per_pass = ExactCheck(
    "check_tokens_per_pass",
    _rate_cases,
    lambda fn, c: _number(call_student(fn, "tokens_per_pass", list(c[0]), c[1]), "tokens_per_pass"),
    lambda c: f"rates = {list(c[0])}, k = {c[1]}",
    """Check ``tokens_per_pass(rates, k) -> float``: expected tokens per target pass when
    draft position i is accepted at ``rates[i]`` given the drafts before it, against the
    library's theory on 40 random cases (to nine decimals).""",
    forbidden(  # the exercise says: no theory function of the library's
        *(
            f
            for name, f in vars(theory).items()
            if inspect.isfunction(f) and f.__module__ == theory.__name__ and name[0] != "_"
        )
    ),
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
