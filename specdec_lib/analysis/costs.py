"""What a drafter costs: forward-pass time, memory, and an estimated cost per token.

Tokens per target pass says how many target passes speculation saves; it says
nothing about what the drafter spent to save them. A draft model runs one
forward pass per proposed token, so the honest unit is the target forward pass:

    cost per emitted token = (target passes + c · draft passes + o · rounds) / emitted

where ``c`` is the draft model's forward-pass time as a fraction of the
target's, and ``o`` the time of one proposal call of a model-free drafter (an
n-gram lookup), also as a fraction of a target pass. Plain decoding scores
exactly 1. :func:`cost_per_token` counts a verification pass over k+1 positions as
one target pass; it is not one (the serial-decode chapter measures 1.1 to 1.4 at
k = 4 on a CPU), so :func:`verified_cost_per_token` charges each pass what a pass
over its positions measured (:func:`pass_costs`), in one-position passes. Either is
an estimate, not a wall-clock measurement.

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

import bisect
import functools
import itertools
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass

from specdec_lib.analysis.timing import Timing, decode_step, time_passes, time_ratio
from specdec_lib.engine.generate import SpeculationStats
from specdec_lib.engine.model import ModelConfig, TinyGPT
from specdec_lib.engine.server import Step


def weight_bytes(model: TinyGPT) -> int:
    """Bytes of the model's parameters as held in memory (a tied tensor counted once)."""
    return sum(p.numel() * p.element_size() for p in model.parameters())


def kv_cache_bytes_per_token(config: ModelConfig, bytes_per_value: int = 4) -> int:
    """Bytes of KV cache one token occupies: a key and a value per layer, each one head wide
    (``n_embd / n_head``) for each key/value head (``config.kv_heads``).

    Without grouped-query attention there are ``n_head`` key/value heads and a key is
    ``n_embd`` wide; with it (``n_kv_head`` < ``n_head``, as in SmolLM2 and Llama 3) the cache
    holds only the shared heads, ``n_head / n_kv_head`` times fewer bytes.
    """
    if isinstance(bytes_per_value, bool) or not isinstance(bytes_per_value, int):
        raise ValueError(f"bytes_per_value must be a positive integer, got {bytes_per_value!r}")
    if bytes_per_value < 1:
        raise ValueError(f"bytes_per_value must be >= 1, got {bytes_per_value}")
    head_dim = config.n_embd // config.n_head
    return 2 * config.n_layer * config.kv_heads * head_dim * bytes_per_value


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


def pass_costs(runs: Sequence[Mapping[int, Timing]], max_positions: int) -> dict[int, float]:
    """A KV-cached target pass over T = 1..``max_positions`` new positions, in one-position
    passes, from one or more runs of :func:`~specdec_lib.analysis.timing.time_passes`.

    In each run T = 1 is the unit (its measured median) and T >= 2 is read off the robust
    line through all the run's medians (:func:`fit_pass_cost`): one spoiled median cannot
    bend it, and the line is not asked for T = 1, which a CPU runs on a faster path
    (matrix-vector products) than it predicts. With several runs, each T takes the median
    over runs, so one run on a loaded machine cannot move it either.
    """
    if max_positions < 1:
        raise ValueError(f"max_positions must be >= 1, got {max_positions}")
    if not runs or any(1 not in run or len(run) < 2 for run in runs):
        raise ValueError("runs must hold at least one run timing T = 1 and another T")
    tables = []
    for run in runs:
        fit, one = fit_pass_cost(run), run[1].median
        tables.append(
            {t: 1.0 if t == 1 else fit.predict(t) / one for t in range(1, max_positions + 1)}
        )
    return {t: statistics.median(table[t] for table in tables) for t in tables[0]}


@dataclass(frozen=True)
class Prices:
    """One run's prices, in one-position target passes: a draft-model pass ``c``, an n-gram
    lookup ``o``, and a target pass by the positions it scores (``pass_cost``, as
    :func:`pass_costs`); with the seconds behind ``c`` and ``o`` (each side's fast runs)."""

    c: float
    o: float
    pass_cost: dict[int, float]
    target_pass: float
    draft_pass: float
    lookup: float

    def verify_cost(self, k: int) -> float:
        """A verification pass of k drafted tokens (k + 1 positions)."""
        if k + 1 not in self.pass_cost:
            raise ValueError(f"k must lie in [0, {max(self.pass_cost) - 1}], got {k}")
        return self.pass_cost[k + 1]


def measure_prices(
    target: TinyGPT,
    draft: TinyGPT,
    lookup: Callable[[], object],
    context_len: int = 400,
    max_positions: int = 17,
    runs: int = 3,
    pairs: int = 100,
) -> list[Prices]:
    """``runs`` independent measurements of :class:`Prices`, so a chapter can show how far
    one run lies from the next.

    Each run times a draft and a target decode step side by side (:func:`time_ratio`,
    ``pairs`` pairs, fast runs), the ``lookup`` call against the target step likewise, and
    target passes over 1..``max_positions`` new positions (:func:`time_passes`, read by
    :func:`pass_costs`), all after ``context_len`` tokens of context.
    """
    for name, value, least in (
        ("runs", runs, 1),
        ("pairs", pairs, 10),
        ("max_positions", max_positions, 2),
    ):
        if value < least:
            raise ValueError(f"{name} must be >= {least}, got {value}")
    out = []
    for run in range(runs):
        step = decode_step(target, context_len, seed=run)
        drafted = time_ratio(decode_step(draft, context_len, seed=run), step, repeats=pairs)
        looked = time_ratio(lookup, step, repeats=pairs)
        passes = time_passes(target, range(1, max_positions + 1), context_len=context_len, seed=run)
        out.append(
            Prices(
                c=drafted.ratio,
                o=looked.ratio,
                pass_cost=pass_costs([passes], max_positions),
                target_pass=drafted.denominator,
                draft_pass=drafted.numerator,
                lookup=looked.numerator,
            )
        )
    return out


def median_prices(runs: Sequence[Prices]) -> Prices:
    """Every price the median over ``runs`` (each pass length on its own)."""
    if not runs:
        raise ValueError("runs must hold at least one Prices")

    def mid(name: str) -> float:
        return statistics.median(getattr(r, name) for r in runs)

    lengths = set.intersection(*(set(r.pass_cost) for r in runs))
    return Prices(
        c=mid("c"),
        o=mid("o"),
        pass_cost={t: statistics.median(r.pass_cost[t] for r in runs) for t in sorted(lengths)},
        target_pass=mid("target_pass"),
        draft_pass=mid("draft_pass"),
        lookup=mid("lookup"),
    )


def passes_by_positions(target_passes: int, position_proposed: Sequence[int]) -> dict[int, int]:
    """Batch-one verification passes by the positions each scored, T = proposals + 1.

    ``position_proposed[i]`` counts the rounds that drafted a token at position i, so
    ``position_proposed[i - 1] - position_proposed[i]`` rounds drafted exactly i tokens,
    and ``target_passes - position_proposed[0]`` drafted none (one round per pass).
    """
    counts = [int(target_passes), *(int(p) for p in position_proposed), 0]
    if any(a < b for a, b in itertools.pairwise(counts)):
        raise ValueError(
            "position_proposed must be non-negative, non-increasing and at most target_passes, "
            f"got {list(position_proposed)} with target_passes={target_passes}"
        )
    return {
        t + 1: counts[t] - counts[t + 1]
        for t in range(len(counts) - 1)
        if counts[t] > counts[t + 1]
    }


def verification_cost(
    target_passes: int, position_proposed: Sequence[int], pass_cost: Mapping[int, float]
) -> float:
    """The target passes of a run, each charged ``pass_cost[T]`` for the T positions it
    scored (:func:`passes_by_positions`, :func:`pass_costs`), in one-position passes."""
    passes = passes_by_positions(target_passes, position_proposed)
    missing = sorted(set(passes) - set(pass_cost))
    if missing:
        raise ValueError(f"pass_cost must price every pass, missing T = {missing}")
    return sum(n * pass_cost[t] for t, n in passes.items())


def verified_cost_per_token(
    target_passes: int,
    position_proposed: Sequence[int],
    draft_passes: int,
    emitted: int,
    c: float,
    pass_cost: Mapping[int, float],
    lookups: int = 0,
    o: float = 0.0,
) -> float:
    """:func:`cost_per_token` with each verification pass charged its measured cost
    (:func:`verification_cost`) instead of one: (V + c · draft passes + o · lookups) / emitted.
    Plain decoding still scores 1, since its passes score one position each."""
    if emitted < 1:
        raise ValueError(f"emitted must be >= 1, got {emitted}")
    if c < 0 or o < 0:
        raise ValueError(f"c and o must be >= 0, got c={c}, o={o}")
    verify = verification_cost(target_passes, position_proposed, pass_cost)
    return (verify + c * draft_passes + o * lookups) / emitted


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


@dataclass(frozen=True)
class StepCostFit:
    """Seconds of a server step, from the steps of measured runs (chapter 10b).

    A decoding round of B rows that asked each row for up to k drafted tokens costs the
    median measured step at that k and batch, interpolated between batches and between k;
    a prefill costs ``prefill_fixed + prefill_per_token * B * W`` (W the longest prompt). A
    round is charged by what it asked, not by what the drafter happened to propose: asking
    costs a lookup and a verification per row even when nothing is proposed, and the padded
    pass is as wide as the longest proposal. Like vLLM's dynamic speculation, it reads
    profiled step times rather than a model of the hardware (``fit_step_costs`` in
    ``benchmarks/measures.py`` makes one from a server's measured steps). It is the
    pass-cost model the goodput policy plans with (:meth:`predict`) and the clock of the
    simulator (:meth:`seconds`).

    ``points[i]`` are ``(batch, seconds)`` pairs for rounds that asked up to ``ks[i]``
    drafted tokens: the median step of each batch bin at the bin's median batch."""

    ks: tuple[int, ...]
    points: tuple[tuple[tuple[float, float], ...], ...]
    prefill_fixed: float
    prefill_per_token: float

    def predict(self, batch: int, k: int) -> float:
        """A decoding round of ``batch`` rows asked for up to ``k`` drafted tokens each:
        interpolated in the batch between profiled points (extended past the ends along the
        nearest two), never less than a smaller k costs at that batch (asking for more
        never costs less), and interpolated between the profiled k. Remembered: a server's
        policy asks this every round, and its time is the server's time."""
        return _round_seconds(self, batch, k)

    def seconds(self, step: Step) -> float:
        """What ``step`` costs by this model (the simulator's clock)."""
        if step.kind == "prefill":
            return self.prefill_fixed + self.prefill_per_token * step.batch * step.width
        return self.predict(step.batch, step.asked)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, stored: dict) -> StepCostFit:
        """The fit a results file stored with :meth:`to_dict` (JSON turned tuples to lists)."""
        points = tuple(tuple(tuple(p) for p in row) for row in stored["points"])
        return cls(
            tuple(stored["ks"]), points, stored["prefill_fixed"], stored["prefill_per_token"]
        )


@functools.cache
def _round_seconds(fit: StepCostFit, batch: int, k: int) -> float:
    at = list(itertools.accumulate((_along(p, batch) for p in fit.points), max))
    i = min(max(bisect.bisect_left(fit.ks, k) - 1, 0), len(at) - 2)
    k0, k1 = fit.ks[i], fit.ks[i + 1]
    return at[i] + (at[i + 1] - at[i]) * (k - k0) / (k1 - k0)


def _along(points: Sequence[tuple[float, float]], batch: float) -> float:
    """Piecewise-linear through ``points`` (sorted by batch), extended past either end along
    its nearest two points (a single point is flat)."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    if len(xs) == 1:
        return ys[0]
    i = min(max(bisect.bisect_left(xs, batch) - 1, 0), len(xs) - 2)
    return ys[i] + (ys[i + 1] - ys[i]) * (batch - xs[i]) / (xs[i + 1] - xs[i])


@dataclass(frozen=True)
class RooflineStepCost:
    """A step's time on an accelerator by the roofline: the larger of the bytes it reads
    over memory bandwidth and the arithmetic it does over peak throughput. A model, not a
    measurement: it stands in for a GPU the course cannot run.

    A decoding round of B rows asked for k drafted tokens reads the weights once and each
    row's ``context`` cached tokens, and does about 2 x ``params`` operations for each of
    its B (1 + k) positions; a prefill of B prompts W tokens wide does 2 x ``params`` per
    token. The defaults are Llama 3 8B (32 layers, 8 key/value heads of 128: 128 KiB of
    cache a token; Meta's model card) in 16-bit numbers on an A100 80 GB (2.0 TB/s, 312
    TFLOP/s at 16 bits; NVIDIA's datasheet), at peak: real kernels reach less of both, which moves
    the crossing but not the shape.
    """

    params: float = 8.0e9
    weight_bytes: float = 16.0e9
    kv_bytes_per_token: float = 2 * 32 * 8 * 128 * 2
    bandwidth: float = 2.0e12
    flops: float = 312e12
    context: int = 512
    memory: float = 80e9

    def max_batch(self) -> int:
        """The most requests whose caches fit beside the weights in ``memory``."""
        return int((self.memory - self.weight_bytes) // (self.context * self.kv_bytes_per_token))

    def predict(self, batch: int, k: int) -> float:
        memory = self.weight_bytes + batch * self.context * self.kv_bytes_per_token
        compute = 2 * self.params * batch * (1 + k)
        return max(memory / self.bandwidth, compute / self.flops)

    def seconds(self, step: Step) -> float:
        if step.kind == "prefill":
            compute = 2 * self.params * step.batch * step.width
            return max(self.weight_bytes / self.bandwidth, compute / self.flops)
        return self.predict(step.batch, step.asked)
