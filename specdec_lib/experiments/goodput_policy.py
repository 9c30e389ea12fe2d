"""Chapter 10b's goodput policy: each round, the draft lengths that maximise expected tokens
per second.

SmartSpec (Liu et al. 2024, later TurboSpec) defines goodput as the tokens a server actually
generates per second, and picks the amount of speculation, down to none, that maximises
it, from the load and measured acceptance; vLLM V1's dynamic speculation picks one k per
batch size the same way, from profiled step times. :class:`GoodputK` does it each round
from each running request's own acceptance (:func:`_row_acceptance`) and a pass-cost model
(:class:`~specdec_lib.analysis.costs.StepCostFit`), for :func:`~specdec_lib.engine.server.serve`.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from specdec_lib.checks import check_int, check_real
from specdec_lib.engine.generate import Row


class PassCost(Protocol):
    """Seconds of a decoding round of ``batch`` rows asked for up to ``k`` drafted tokens
    each (:class:`~specdec_lib.analysis.costs.StepCostFit`)."""

    def predict(self, batch: int, k: int) -> float: ...


#: Rounds of a request's history that count: older ones weigh memory**10 or less (0.03 at
#: the default memory). A request that stops drafting sees its drafted rounds leave this
#: window a plain round at a time, so its estimate returns to the prior and it tries again.
_HISTORY = 10


def _row_evidence(row: Row, memory: float) -> tuple[float, float, float]:
    """This request's acceptance evidence as weighted ``(successes, failures, prior weight)``.

    Each accepted token is a success; a round that stopped short of the depth it asked for
    (a rejection, or a drafter with nothing more to propose) is one failure. A round ``j``
    rounds old weighs ``memory**j``, so the estimate follows a request whose text changes;
    the prior weighs as much as a round older than all of them. Read from the last
    ``_HISTORY`` rounds; :class:`GoodputK` keeps the same sums up to date a round at a time
    (:func:`_slide`), as a server cannot afford to reread every request's rounds.
    """
    successes = failures = 0.0
    weight = 1.0
    recent = zip(row.rounds[-_HISTORY:][::-1], row.asked[-_HISTORY:][::-1], strict=False)
    for (_, accepted), asked in recent:
        successes += weight * accepted
        failures += weight * (accepted < asked)
        weight *= memory
    return successes, failures, weight


def _slide(
    evidence: tuple[float, float, float], row: Row, memory: float
) -> tuple[float, float, float]:
    """``row``'s evidence (:func:`_row_evidence`) before its latest round, brought past it:
    the rounds in the window age by one, the latest counts in full, and the round that
    falls out of the window (``_HISTORY`` rounds before the latest) is taken away."""
    successes, failures, weight = evidence
    (_, accepted), asked = row.rounds[-1], row.asked[-1]
    successes = memory * successes + accepted
    failures = memory * failures + (accepted < asked)
    if len(row.rounds) > _HISTORY:
        (_, gone), gone_asked = row.rounds[-1 - _HISTORY], row.asked[-1 - _HISTORY]
        fade = memory**_HISTORY
        successes = max(0.0, successes - fade * gone)
        failures = max(0.0, failures - fade * (gone < gone_asked))
    else:
        weight *= memory
    return successes, failures, weight


def _acceptance(evidence: tuple[float, float, float], prior: float, prior_rounds: float) -> float:
    successes, failures, weight = evidence
    w = prior_rounds * weight
    return (successes + w * prior) / (successes + failures + w)


def _row_acceptance(row: Row, memory: float, prior: float, prior_rounds: float = 2.0) -> float:
    """The chance that this request's next drafted position is accepted: its own evidence
    (:func:`_row_evidence`) plus ``prior_rounds`` rounds' worth of a prior acceptance
    ``prior``, which fades as the request's own rounds accumulate."""
    return _acceptance(_row_evidence(row, memory), prior, prior_rounds)


def goodput_ks(
    alphas: Sequence[float],
    cost: PassCost,
    max_k: int,
    draft_seconds: float = 0.0,
    margin: float = 0.0,
) -> list[int]:
    """The draft length of each row that maximises the round's expected tokens per second.

    ``alphas`` are the rows' own acceptance estimates; a round whose widest ask is w costs
    ``cost.predict(len(alphas), w)`` plus ``draft_seconds`` per drafted token. For each w
    from 0 (no speculation) to ``max_k``, every row drafts w unless its own acceptance makes
    a drafted token worth less than its drafting time (the i-th drafted token is reached
    and accepted with chance alpha^i, worth that many tokens of the round's time per row);
    a row drafting k emits 1 + alpha + ... + alpha^k tokens on average
    (:func:`~specdec_lib.analysis.theory.expected_tokens_per_pass`). The w with the most
    expected tokens per second wins, the smallest on a tie; speculating at all must promise
    ``1 + margin`` times plain's rate (for what the model leaves out: :class:`GoodputK`).
    Plain Python, with the rows' sums computed once: a server runs this every round, and
    its time is the server's time.
    """
    if not margin >= 0:
        raise ValueError(f"margin must be a number >= 0, got {margin!r}")
    batch = len(alphas)
    if batch == 0:
        return []
    # cum[b][k]: row b's expected tokens when it drafts k (1 + alpha + ... + alpha^k).
    cum = [list(itertools.accumulate(a**i for i in range(max_k + 1))) for a in alphas]
    best, best_rate = [0] * batch, (1 + margin) * batch / cost.predict(batch, 0)
    for width in range(1, max_k + 1):
        pass_seconds = cost.predict(batch, width)
        if draft_seconds == 0:  # drafting is free: every row drafts the width
            ks = [width] * batch
        else:
            ks = [_worth(a, width, pass_seconds / batch, draft_seconds) for a in alphas]
        tokens = sum(c[k] for c, k in zip(cum, ks, strict=True))
        rate = tokens / (pass_seconds + draft_seconds * sum(ks))
        if rate > best_rate:
            best, best_rate = ks, rate
    return best


def _worth(alpha: float, width: int, token_seconds: float, draft_seconds: float) -> int:
    """How many of ``width`` positions a row should draft: while the next drafted token's
    chance of being reached and accepted, in tokens of ``token_seconds``, pays its drafting."""
    k = 0
    while k < width and alpha ** (k + 1) * token_seconds >= draft_seconds:
        k += 1
    return k


class _CostTable:
    """A :class:`PassCost` with its predictions kept: the fit is fixed and a server asks it
    for the same few (batch, k) every round (about 2 us a call saved, max_k + 1 calls a round)."""

    def __init__(self, cost: PassCost) -> None:
        self.cost, self.table = cost, {}

    def predict(self, batch: int, k: int) -> float:
        key = (batch, k)
        seconds = self.table.get(key)
        if seconds is None:
            seconds = self.table[key] = self.cost.predict(batch, k)
        return seconds


@dataclass(frozen=True)
class GoodputK:
    """Each round, the draft lengths that maximise expected tokens per second.

    Our pass pads every row to the widest, so a round's time is ``cost`` at the running
    batch and the widest ask (:func:`goodput_ks`), plus ``draft_seconds`` for each drafted
    token (a draft model's passes; about 0 for an n-gram lookup).
    A request's acceptance is its own (:func:`_row_acceptance`), never the batch's average;
    a request with few rounds of its own starts from the acceptance of the server's recent
    rounds (every request's, each round weighing ``traffic_memory`` times less per round),
    as a new user is assumed to be like the current traffic. That memory makes a policy
    belong to one server: give each server run its own.

    Speculation must promise ``1 + margin`` times plain's tokens per second before the
    policy asks for it. The model leaves out what deciding costs (at a batch of 50 this
    method takes about 0.12 ms a round, about 1% of a plain step on the course's CPU: each
    row's evidence slides a round at a time and the profile's predictions are kept, which
    halved it) and its own
    error (the simulator misses measured latency by a few per cent at the median); near
    saturation a round a few per cent slower than planned grows every queue, so a gain the
    model cannot resolve is not worth asking for.
    """

    cost: PassCost
    max_k: int = 8
    draft_seconds: float = 0.0
    memory: float = 0.7
    prior_rounds: float = 2.0
    traffic_memory: float = 0.9
    margin: float = 0.05
    name: str = "goodput"
    _traffic: list[float] = field(
        default_factory=lambda: [1.0, 1.0], init=False, repr=False, compare=False
    )
    #: id(row) -> (row, rounds counted, evidence): each request's sums, a round at a time
    _evidence: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    _costs: list = field(default_factory=list, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_int("max_k", self.max_k)
        check_real("draft_seconds", self.draft_seconds, "a number >= 0", lambda v: v >= 0)
        check_real("memory", self.memory, "a number in [0, 1]", lambda v: 0 <= v <= 1)
        check_real("prior_rounds", self.prior_rounds, "a number > 0", lambda v: v > 0)
        check_real("margin", self.margin, "a number >= 0", lambda v: v >= 0)
        check_real(
            "traffic_memory", self.traffic_memory, "a number in [0, 1)", lambda v: 0 <= v < 1
        )

    def choose(self, rows: Sequence[Row], waiting: int) -> list[int]:
        if not rows:
            return []
        traffic = self._traffic
        traffic[0] *= self.traffic_memory
        traffic[1] *= self.traffic_memory
        for row in rows:  # each row's latest round, once: a round happens between calls
            if row.asked and row.asked[-1] > 0:
                accepted = row.rounds[-1][1]
                traffic[0] += accepted
                traffic[1] += accepted < row.asked[-1]
        pooled = (1 + traffic[0]) / (2 + traffic[0] + traffic[1])
        alphas = [_acceptance(e, pooled, self.prior_rounds) for e in self._update(rows)]
        if not self._costs:
            self._costs.append(_CostTable(self.cost))
        return goodput_ks(alphas, self._costs[0], self.max_k, self.draft_seconds, self.margin)

    def _update(self, rows: Sequence[Row]) -> list[tuple[float, float, float]]:
        """Each row's evidence, equal to :func:`_row_evidence`'s but brought up to date by
        the rounds since the last call only; rows that left are forgotten."""
        kept, out = {}, []
        for row in rows:
            seen = self._evidence.get(id(row))
            n = len(row.rounds)
            if seen is not None and seen[0] is row and seen[1] in (n, n - 1):
                evidence = seen[2]
                if seen[1] == n - 1:
                    evidence = _slide(evidence, row, self.memory)
            else:  # a new row, or one this policy missed a round of
                evidence = _row_evidence(row, self.memory)
            kept[id(row)] = (row, n, evidence)
            out.append(evidence)
        self._evidence.clear()
        self._evidence.update(kept)
        return out
