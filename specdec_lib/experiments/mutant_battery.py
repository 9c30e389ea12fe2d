"""Chapter 7b's battery: the course's own tests, run on every mutant at fixed sizes.

The mutants are :mod:`specdec_lib.experiments.mutants`; the tests, each returning True
(or one True per case) where it catches the mutant:

* :func:`greedy_identity`: speculative greedy output equals plain greedy output;
* :func:`first_token_test`: chapter 7's chi-square on the first emitted token;
* :func:`all_position_test`: the same test at every position of a two-token round
  (chapter 7's "rest of the round"), Bonferroni over the three positions;
* :func:`end_to_end_test`: the first two tokens of whole ``speculative_generate`` runs
  against the target's joint distribution;

and two that the battery showed were missing: :func:`across_seeds_test` (one round per
seed, so uniforms that ignore the seed are seen) and :func:`tie_test` (decoding and
verification must break a tie of the target's logits the same way).

Beside them, the exact law each sampled test sees (:func:`first_token_distribution`,
:func:`round_law`), from which :func:`rounds_for_power` finds the rounds a test needs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
import torch

from specdec_lib.analysis.enumeration import enumerate_outcomes
from specdec_lib.analysis.exact_distributions import exact_output_distribution, exact_round_outcomes
from specdec_lib.analysis.hypothesis import ALPHA, distribution_test, first_tokens
from specdec_lib.checks import check_int
from specdec_lib.engine import verify
from specdec_lib.engine.drafters import Drafter, DraftModelDrafter, NgramDrafter, one_hot_probs
from specdec_lib.engine.generate import generate, next_token, speculative_generate
from specdec_lib.engine.sampling import SamplingParams, process_logits
from specdec_lib.engine.weights import load_model
from specdec_lib.experiments.mutants import CORRECT, Mutant
from specdec_lib.text.language import workload_prompts
from specdec_lib.text.tokenizer import Tokenizer

# --- the set-up the sampled tests run in --------------------------------------------------

#: Chapter 7's context, untrained target and temperature; top-k 50 so that filtering bugs
#: have something to filter.
CONTEXT = "A drafter proposes, the target decides. Which token comes next? "
PARAMS = SamplingParams(temperature=0.3, top_k=50)


class Setup:
    """Untrained target and draft model after :data:`CONTEXT`, at :data:`PARAMS`.

    Broad distributions, so that a bias can show (chapter 7). The first-token and
    end-to-end tests draft with the draft model; the all-position test drafts the
    target's favourite at each of two positions, one-hot, as chapter 7 does."""

    params = PARAMS

    def __init__(self) -> None:
        torch.set_num_threads(1)
        self.target = load_model("target", trained=False)
        self.draft = load_model("draft", trained=False)
        self.context = Tokenizer().encode(CONTEXT)
        with torch.inference_mode():
            self.logits = self.target(torch.tensor([self.context]))[0, -1]  # (V,)
        self.p = process_logits(self.logits, self.params)
        d1 = int(self.p.argmax())
        with torch.inference_mode():
            after = self.target(torch.tensor([self.context + [d1]]))[0, -1]
            d2 = int(process_logits(after, self.params).argmax())
            # (3, V): the scores of the two drafted tokens and of the bonus token
            self.round_logits = self.target(torch.tensor([self.context + [d1, d2]]))[0, -3:]
        self.drafted = [d1, d2]
        self.round_p = process_logits(self.round_logits, self.params)  # (3, V)

    @property
    def vocab_size(self) -> int:
        return self.logits.shape[-1]

    def drafter(self, m: Mutant) -> Drafter:
        """A fresh draft-model drafter (its own cache), changed as ``m`` changes drafters."""
        return m.drafter(DraftModelDrafter(self.draft))

    @cached_property
    def _pair_p(self) -> torch.Tensor:
        """Joint distribution of the first two generated tokens (y1, y2), flattened as
        :meth:`_pair_index` numbers them; y1 outside p's support has its own cell, of
        probability 0 (an impossible pair fails the test outright)."""
        support = torch.nonzero(self.p).flatten().tolist()
        joint = torch.zeros(len(support) * self.vocab_size + 1, dtype=torch.float64)
        with torch.inference_mode():
            for r, y1 in enumerate(support):
                after = self.target(torch.tensor([self.context + [y1]]))[0, -1]
                row = self.p[y1] * process_logits(after, self.params)
                joint[r * self.vocab_size : (r + 1) * self.vocab_size] = row
        return joint

    @cached_property
    def _support_rank(self) -> dict[int, int]:
        return {y: r for r, y in enumerate(torch.nonzero(self.p).flatten().tolist())}

    def _pair_index(self, y1: int, y2: int) -> int:
        r = self._support_rank.get(y1)
        return len(self._pair_p) - 1 if r is None else r * self.vocab_size + y2

    def position_caps(self, n: int) -> list[int]:
        """How many of ``n`` two-token rounds each position is tested on: 90% of the
        number the target's own law expects to reach it (fixed in advance, so the
        reference distribution of every test is the same in every run)."""
        a = [float(self.round_p[i, d]) for i, d in enumerate(self.drafted)]
        return [n, int(0.9 * n * a[0]), int(0.9 * n * a[0] * a[1])]


def _drafter_case(
    drafter: Drafter, context: list[int], params: SamplingParams
) -> tuple[torch.Tensor, torch.Tensor]:
    """(drawn_from, reported): the distribution the drafter's first token really comes
    from, found by enumerating its draw, and the q it reports for it."""
    reported: list[torch.Tensor] = []

    def call(g: object) -> tuple[list[int], int]:
        proposal = drafter.propose(context, 1, params, g)
        reported.append(proposal.probs[0])
        return proposal.tokens, 0

    outcomes = enumerate_outcomes(call)
    v = reported[0].shape[-1]
    drawn = sum(o.probability * o.token_distribution(0, v) for o in outcomes)
    return drawn, reported[0]


# --- the exact distributions each test sees -----------------------------------------------


def first_token_distribution(m: Mutant, setup: Setup) -> torch.Tensor:
    """Exact first emitted token (V,) of one round of the mutated engine, k = 1."""
    if m.law == "correct":
        m = CORRECT
    with m.active():
        drawn, reported = _drafter_case(setup.drafter(m), setup.context, setup.params)
        return exact_output_distribution(
            verify.accept_sampled, setup.logits, reported, setup.params, drawn
        )


@dataclass(frozen=True)
class RoundLaw:
    """A two-token round with one-hot drafts: P(n accepted = j) and the distribution
    D_j (V,) of the token emitted after j acceptances, j = 0, 1, 2."""

    accepted: tuple[float, float, float]
    final: tuple[torch.Tensor, torch.Tensor, torch.Tensor]

    def position(self, i: int, drafted: list[int]) -> tuple[float, torch.Tensor]:
        """(P(position i is reached), its token's distribution given that it is)."""
        reach = sum(self.accepted[i:])
        if reach <= 0:
            return 0.0, self.final[i]
        out = self.accepted[i] * self.final[i]
        if i < len(drafted):
            out = out + sum(self.accepted[i + 1 :]) * one_hot_probs([drafted[i]], len(out))[0]
        return reach, out / reach


def round_law(m: Mutant, setup: Setup) -> RoundLaw:
    """Exact law of the mutated two-token round; analytic for the reused uniform, whose
    one uniform is compared with two thresholds (the enumeration assumes one)."""
    q = one_hot_probs(setup.drafted, setup.vocab_size)
    if m.law == "reused":
        return _reused_uniform_round(setup.round_p, setup.drafted)
    if m.law == "correct":
        m = CORRECT
    with m.active():
        outcomes = exact_round_outcomes(
            verify.accept_sampled, setup.round_logits, q, setup.drafted, setup.params
        )
    acc = [0.0, 0.0, 0.0]
    final = [torch.zeros(setup.vocab_size, dtype=torch.float64) for _ in range(3)]
    for o in outcomes:
        acc[o.n_accepted] += o.probability
        final[o.n_accepted] += o.probability * o.token_distribution(o.n_accepted, setup.vocab_size)
    final = [f / a if a > 0 else f for f, a in zip(final, acc, strict=True)]
    return RoundLaw(tuple(acc), tuple(final))


def _reused_uniform_round(p: torch.Tensor, drafted: list[int]) -> RoundLaw:
    """Theory of the reused uniform for one-hot drafts: with a_i = p_i(d_i), position 1
    accepts iff u < a_1 and position 2 iff u < a_2 with the same u, so P(both) =
    min(a_1, a_2) instead of a_1 a_2; the tokens drawn after a stop are unchanged."""
    a1, a2 = float(p[0, drafted[0]]), float(p[1, drafted[1]])
    q = one_hot_probs(drafted, p.shape[-1])
    both = min(a1, a2)
    return RoundLaw(
        (1 - a1, a1 - both, both),
        (
            verify.residual_distribution(p[0], q[0]),
            verify.residual_distribution(p[1], q[1]),
            p[2],
        ),
    )


def total_variation(a: torch.Tensor, b: torch.Tensor) -> float:
    """Half the L1 distance of two distributions (V,): the most probability they disagree
    on for any set of tokens, the size of a mutant's bias."""
    return 0.5 * float((a.to(torch.float64) - b.to(torch.float64)).abs().sum())


# --- the tests ------------------------------------------------------------------------------


def _counts(tokens: np.ndarray, vocab: int) -> torch.Tensor:
    return torch.from_numpy(np.bincount(tokens, minlength=vocab))


def first_token_test(m: Mutant, setup: Setup, n: int, seed: int) -> bool:
    """Chapter 7's test on the real mutated rule: ``n`` seeded rounds, the first emitted
    token's chi-square against p at :data:`ALPHA`. True if the test fails (catches)."""
    check_int("n", n)
    with m.active():
        drawn, reported = _drafter_case(setup.drafter(m), setup.context, setup.params)
        tokens = first_tokens(
            verify.accept_sampled, setup.logits, reported, setup.params, n, seed, drawn
        )
    return not distribution_test(_counts(tokens, setup.vocab_size), setup.p).passed


def position_counts(
    outs: list[list[int]], drafted: list[int], vocab: int, caps: list[int]
) -> list[torch.Tensor]:
    """Counts (V,) of the token at each position of the round, over the first ``caps[i]``
    rounds that reach position i (all of them, if fewer do)."""
    counts = []
    for i in range(len(drafted) + 1):
        reached = [o[i] for o in outs if len(o) > i and o[:i] == drafted[:i]][: caps[i]]
        counts.append(_counts(np.asarray(reached, dtype=np.int64), vocab))
    return counts


def positions_fail(counts: list[torch.Tensor], p_rows: torch.Tensor) -> bool:
    """The all-position verdict: any position's chi-square below ALPHA / (k + 1)."""
    level = ALPHA / len(counts)
    for c, p in zip(counts, p_rows, strict=True):
        if int(c.sum()) == 0:
            continue
        try:
            if not distribution_test(c, p, level).passed:
                return True
        except ValueError:  # too few rounds reached it for a single degree of freedom
            continue
    return False


def all_position_test(m: Mutant, setup: Setup, n: int, seed: int) -> bool:
    """``n`` seeded two-token rounds of the real mutated rule; chi-square at each position."""
    check_int("n", n)
    q = one_hot_probs(setup.drafted, setup.vocab_size)
    g = torch.Generator().manual_seed(seed)
    with m.active():
        outs = [
            verify.accept_sampled(setup.round_logits, q, setup.drafted, setup.params, g)[0]
            for _ in range(n)
        ]
    counts = position_counts(outs, setup.drafted, setup.vocab_size, setup.position_caps(n))
    return positions_fail(counts, setup.round_p)


#: Draft length of the end-to-end runs: the draft model drafts two tokens, then the bonus.
E2E_K = 2


def end_to_end_test(m: Mutant, setup: Setup, n: int, seed: int) -> bool:
    """``n`` whole ``speculative_generate`` runs of 3 tokens (request i seeded seed * n + i,
    the draft model drafting k = 2); chi-square of their first two tokens against the
    target's joint distribution."""
    check_int("n", n)
    params = replace(setup.params, max_tokens=3)
    pairs = np.empty(n, dtype=np.int64)
    with m.active():
        drafter = setup.drafter(m)
        for i in range(n):
            g = torch.Generator().manual_seed(seed * n + i)
            out = speculative_generate(setup.target, drafter, setup.context, params, E2E_K, g)
            pairs[i] = setup._pair_index(out[0], out[1])
    counts = torch.from_numpy(np.bincount(pairs, minlength=len(setup._pair_p)))
    return not distribution_test(counts, setup._pair_p).passed


def across_seeds_test(m: Mutant, setup: Setup, n: int, seed: int) -> bool:
    """Chapter 7's first-token test with one round per request: request i has its own
    generator, seeded seed * n + i, and drafts the target's favourite (one-hot, so its
    acceptance probability p(d) is moderate). A bug that gives every request the same
    uniforms is invisible inside one stream and plain across them."""
    check_int("n", n)
    q = one_hot_probs(setup.drafted[:1], setup.vocab_size)[0]
    with m.active():
        tokens = np.concatenate(
            [
                first_tokens(verify.accept_sampled, setup.logits, q, setup.params, 1, seed * n + i)
                for i in range(n)
            ]
        )
    return not distribution_test(_counts(tokens, setup.vocab_size), setup.p).passed


#: Greedy identity runs on the trained models: copy and novel prompts, both drafters.
GREEDY_PROMPTS = 2
GREEDY_TOKENS = 24
GREEDY_K = 4


def greedy_identity(m: Mutant, seed: int) -> list[bool]:
    """For each prompt of ``seed`` (copy and novel, :data:`GREEDY_PROMPTS` of each) and
    each drafter: does speculative greedy output differ from plain greedy (caught)?"""
    target = load_model("target")
    tok = Tokenizer()
    params = SamplingParams(temperature=0.0, max_tokens=GREEDY_TOKENS)
    prompts = [
        tok.encode(p) for w in ("copy", "novel") for p in workload_prompts(w, GREEDY_PROMPTS, seed)
    ]
    caught = []
    with m.active():
        for base in (NgramDrafter(), DraftModelDrafter(load_model("draft"))):
            drafter = m.drafter(base)
            for ids in prompts:
                ids = ids[-(target.config.block_size - GREEDY_TOKENS - 1) :]
                fast = speculative_generate(target, drafter, ids, params, GREEDY_K)
                caught.append(fast != generate(target, ids, params))
    return caught


def tie_test(m: Mutant, vocab_size: int = 16) -> list[bool]:
    """For each pair of neighbouring tokens in turn, a row of logits whose maximum they
    share: do greedy decoding and greedy verification (nothing proposed) pick different
    tokens (caught)? Deterministic; one entry per tied row."""
    check_int("vocab_size", vocab_size, 2)
    greedy = SamplingParams(temperature=0.0)
    caught = []
    with m.active():
        for a in range(vocab_size - 1):
            row = torch.zeros(vocab_size)
            row[a] = row[a + 1] = 1.0
            caught.append(
                verify.accept_greedy(row[None], [])[0][0] != next_token(row, greedy, None)
            )
    return caught


# --- power ------------------------------------------------------------------------------


def rounds_for_power(
    power_at: Callable[[int], float], power: float = 0.99, low: int = 10, high: int = 200_000
) -> int | None:
    """The smallest n in [low, high] (to within 2%) at which ``power_at(n)`` reaches
    ``power``, assuming power grows with n; None if even ``high`` falls short."""
    if not 0 < power < 1:
        raise ValueError(f"power must lie in (0, 1), got {power!r}")
    check_int("low", low)
    check_int("high", high, low)
    if power_at(high) < power:
        return None
    if power_at(low) >= power:
        return low
    while high > low * 1.02 + 1:
        mid = min(high - 1, max(low + 1, int(math.sqrt(low * high))))
        low, high = (low, mid) if power_at(mid) >= power else (mid, high)
    return high
