"""What a drafter costs: forward-pass time, memory, and an estimated cost per token.

Tokens per target pass says how many target passes speculation saves; it says
nothing about what the drafter spent to save them. A draft model runs one
forward pass per proposed token, so the honest unit is the target forward pass:

    cost per emitted token = (target passes + c · draft passes + o · rounds) / emitted

where ``c`` is the draft model's forward-pass time as a fraction of the
target's, and ``o`` the time of one proposal call of a model-free drafter (an
n-gram lookup), also as a fraction of a target pass. Plain decoding scores
exactly 1. The model counts a verification pass over k+1 positions as one
target pass, which holds at batch one on a memory-bound pass (the serial-decode
chapter measures it); it is an estimate, not a wall-clock measurement.

``c`` is measured, not read off the parameter counts: at this size a forward
pass is dominated by per-layer overhead, not by arithmetic, so a model with
a fifth of the parameters is not five times faster.

:func:`fit_pass_cost` summarises how a pass's time grows with the positions it scores
(measured by :func:`~specdec_lib.analysis.timing.time_passes`) as a straight line, a
fixed cost per pass plus a cost per position, fitted robustly (Theil-Sen: the median of
the slopes between every pair of points), so one measurement spoiled by a burst of load
cannot bend it. :func:`weight_bytes` is the other half of chapter 1's argument: the
bytes of weights a batch-one decode step reads to produce its single token.

Timed by :mod:`specdec_lib.analysis.timing`; used by :mod:`specdec_lib.analysis.predictions`.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from specdec_lib.analysis.timing import Timing
from specdec_lib.engine.generate import SpeculationStats
from specdec_lib.engine.model import ModelConfig, TinyGPT


def weight_bytes(model: TinyGPT) -> int:
    """Bytes of the model's parameters as held in memory (a tied tensor counted once)."""
    return sum(p.numel() * p.element_size() for p in model.parameters())


def kv_cache_bytes_per_token(config: ModelConfig, bytes_per_value: int = 4) -> int:
    """Bytes of KV cache one token occupies: a key and a value per layer, ``n_embd`` wide."""
    return 2 * config.n_layer * config.n_embd * bytes_per_value


def cost_per_token(
    target_passes: int, draft_passes: int, emitted: int, c: float, rounds: int = 0, o: float = 0.0
) -> float:
    """Estimated cost of one emitted token, in target forward passes (plain decoding: 1).

    ``c``: draft forward pass / target forward pass; ``o``: one proposal call of
    a model-free drafter / target forward pass, charged once per round.
    """
    if emitted < 1:
        raise ValueError(f"emitted must be >= 1, got {emitted}")
    if c < 0 or o < 0:
        raise ValueError(f"c and o must be >= 0, got c={c}, o={o}")
    return (target_passes + c * draft_passes + o * rounds) / emitted


def stats_cost_per_token(stats: SpeculationStats, c: float, o: float = 0.0) -> float:
    """:func:`cost_per_token` for the counts pooled in ``stats``."""
    return cost_per_token(
        stats.target_passes, stats.draft_passes, stats.emitted, c, stats.rounds, o
    )


@dataclass(frozen=True)
class PassCostFit:
    """Time of a pass over T new positions modelled as ``fixed + per_position * T`` (seconds)."""

    fixed: float
    per_position: float

    def predict(self, positions: int) -> float:
        return self.fixed + self.per_position * positions

    def ratio(self, positions: int) -> float:
        """Predicted cost of a pass over ``positions`` relative to a pass over one."""
        return self.predict(positions) / self.predict(1)


def fit_pass_cost(timings: Mapping[int, Timing]) -> PassCostFit:
    """Theil-Sen line through the medians of :func:`time_passes`: robust to a few bad points."""
    points = sorted((t, tm.median) for t, tm in timings.items())
    if len(points) < 2:
        raise ValueError(f"timings must hold at least 2 values of T, got {len(points)}")
    slopes = [
        (y2 - y1) / (t2 - t1) for i, (t1, y1) in enumerate(points) for t2, y2 in points[i + 1 :]
    ]
    slope = statistics.median(slopes)
    fixed = statistics.median(y - slope * t for t, y in points)
    return PassCostFit(fixed=fixed, per_position=slope)


@dataclass(frozen=True)
class UnitCosts:
    """Measured seconds of each operation a request is made of: the cost model in seconds.

    ``pass_fit``: a KV-cached target pass over T new positions; ``draft_pass``: one
    draft-model pass; ``lookup``: one n-gram proposal call; ``prefill``: the first pass
    over a whole prompt, by its length. ``single_pass``, if given, is the measured time of a
    one-position pass, which the straight line through passes of 1 to 17 positions
    overstates on a CPU: a single row runs matrix-vector products, a faster path than the
    matrix-matrix products of a longer pass. The ``host_*`` terms are the time spent outside any
    forward pass (Python choosing tokens, building tensors, cropping caches) per plain
    decode step, per speculation round and per drafted token of a draft model; zero
    gives the pure pass-counting model. Given the counts a run produced, it predicts the
    run's time, so predicted and measured speed-ups can be set side by side.
    """

    pass_fit: PassCostFit
    draft_pass: float
    lookup: float
    prefill: Mapping[int, float]
    host_step: float = 0.0
    host_round: float = 0.0
    host_draft_step: float = 0.0
    single_pass: float | None = None

    def prefill_time(self, positions: int) -> float:
        """Measured prefill time at the nearest measured length, moved along the pass line."""
        if not self.prefill:
            raise ValueError("prefill must hold at least one measured length")
        nearest = min(self.prefill, key=lambda n: abs(n - positions))
        return self.prefill[nearest] + (positions - nearest) * self.pass_fit.per_position

    def pass_time(self, positions: int) -> float:
        """A KV-cached target pass over ``positions`` new positions."""
        if positions == 1 and self.single_pass is not None:
            return self.single_pass
        return self.pass_fit.predict(positions)

    def plain_request(self, prompt_len: int, tokens: int) -> float:
        """Plain decoding: the prefill pass gives the first token, one pass per later token."""
        return (
            self.prefill_time(prompt_len)
            + (tokens - 1) * self.pass_time(1)
            + tokens * self.host_step
        )

    def speculative_request(
        self, prompt_len: int, proposal_lengths: Sequence[int], draft_passes: int, lookups: int
    ) -> float:
        """Speculation: the first round's pass is the prefill (prompt plus proposal), each later
        round one pass over its proposal plus the pending token; drafting charged as incurred."""
        if not proposal_lengths:
            raise ValueError("proposal_lengths must hold one length per round, got none")
        first, *later = proposal_lengths
        return (
            self.prefill_time(prompt_len + first)
            + sum(self.pass_time(m + 1) for m in later)
            + draft_passes * (self.draft_pass + self.host_draft_step)
            + lookups * self.lookup
            + len(proposal_lengths) * self.host_round
        )

    @property
    def c_draft(self) -> float:
        """A draft-model pass as a fraction of a one-position target pass."""
        return self.draft_pass / self.pass_time(1)

    @property
    def c_lookup(self) -> float:
        """An n-gram proposal call as a fraction of a one-position target pass."""
        return self.lookup / self.pass_time(1)

    def verify_cost(self, k: int) -> float:
        """A verification pass over k + 1 positions, in one-position target passes."""
        return self.pass_fit.predict(k + 1) / self.pass_time(1)

    def to_result(self, max_k: int) -> dict[str, object]:
        """These costs as a results file records them (``wall_clock.py``'s ``unit_costs``;
        :func:`~specdec_lib.analysis.predictions.unit_costs_from_result` reads them back),
        with the ratios the textbook formula and the cost-aware policy use,
        ``verify_cost`` for k = 1..``max_k``."""
        return {
            "target_pass_fixed_s": self.pass_fit.fixed,
            "target_pass_per_position_s": self.pass_fit.per_position,
            "target_pass_s": self.pass_time(1),
            "draft_pass_s": self.draft_pass,
            "lookup_s": self.lookup,
            "prefill_s": {str(n): t for n, t in self.prefill.items()},
            "host_step_s": self.host_step,
            "host_round_s": self.host_round,
            "host_draft_step_s": self.host_draft_step,
            "c_draft": self.c_draft,
            "c_lookup": self.c_lookup,
            "verify_cost": {str(k): self.verify_cost(k) for k in range(1, max_k + 1)},
        }


@dataclass(frozen=True)
class BatchPassFit:
    """Time of a cached pass over T new positions for each of B sequences, modelled as
    ``fixed + per_sequence * B + per_position * B * T`` (seconds).

    ``per_sequence`` is work done once per sequence whatever T is; for a pass over a cache,
    attention reads each sequence's own cached keys and values (and the chapter that fits
    this shows that term shrinks with the cache). ``per_position`` is the work every new
    position costs (each layer's matrix products, one row each)."""

    fixed: float
    per_sequence: float
    per_position: float

    def predict(self, batch: int, positions: int) -> float:
        """Seconds of one pass over ``positions`` new positions for each of ``batch`` rows."""
        return self.fixed + self.per_sequence * batch + self.per_position * batch * positions


def fit_batch_pass_cost(timings: Mapping[tuple[int, int], Timing]) -> BatchPassFit:
    """Least-squares fit of :class:`BatchPassFit` to the medians of
    :func:`~specdec_lib.analysis.timing.time_batched_passes`, weighted by 1 / time (so a
    small pass counts as much, relatively, as a large one)."""
    import torch  # least squares; torch is already a dependency of the engine

    if len(timings) < 3:
        raise ValueError(f"timings must hold at least 3 (B, T) cells, got {len(timings)}")
    cells = sorted(timings)
    y = torch.tensor([timings[c].median for c in cells], dtype=torch.float64)
    x = torch.tensor([[1.0, b, b * t] for b, t in cells], dtype=torch.float64)
    w = (1 / y).unsqueeze(1)
    coef = torch.linalg.lstsq(x * w, (y * w.squeeze(1)).unsqueeze(1)).solution.squeeze(1)
    return BatchPassFit(*(float(c) for c in coef))
