"""Cost models, all in one place: what a forward pass, a round and a request cost, and
speculation's counts priced by them.

Tokens per target pass says how many target passes speculation saves; it says nothing of
what the drafter spent to save them, nor of what a pass over several positions costs.
Every model that prices speculation lives here, one section per question a chapter asks,
each fitted from measurements (the one timing loop is :mod:`specdec_lib.analysis.timing`)
and each interval from the course's one bootstrap (:mod:`specdec_lib.analysis.intervals`).
The module is long because it holds one idea, cost models: a reader looking for a price
finds every one here, and the figures that draw them (``specdec_lib.course.cost_view``)
only call them.

* **Memory** (chapter 1): :func:`weight_bytes`, the bytes of weights a batch-one decode
  step reads to produce its one token; :func:`kv_cache_bytes_per_token`.
* **Cost per token, in target passes** (chapter 5)::

      cost per emitted token = (target passes + c · draft passes + o · lookups) / emitted

  ``c`` is a draft-model pass and ``o`` one n-gram lookup, each as a fraction of a
  one-position target pass; plain decoding scores exactly 1 (:func:`cost_per_token`,
  :func:`stats_cost_per_token`). A verification pass over k + 1 positions is not one pass
  (chapter 1 measures 1.1 to 1.4 at k = 4 on a CPU), so :func:`verified_cost_per_token`
  charges each pass what a pass over its positions measured (:func:`pass_costs`,
  :func:`passes_by_positions`, :func:`verification_cost`). ``c`` is measured, not read off
  the parameter counts: at this size a pass is dominated by per-layer overhead, so a model
  with a fifth of the parameters is not five times faster. :class:`Prices` holds one
  run's measured prices (:func:`measure_prices`, :func:`median_prices`). A benchmark's
  rows priced: :func:`counts_cost`, :func:`row_cost`, :func:`cost_estimate` (with its
  interval over prompts), :func:`best_k` (the cheapest k of a drafter), and
  :func:`crossover_c`, :func:`crossover_estimate`: the price of a draft pass below which
  the draft model, at its best k, is the cheaper drafter.
* **Seconds** (chapters 1 and 9, appendix B): :class:`PassCostFit`, a pass over T new
  positions as ``fixed + per_position · T``, fitted robustly by :func:`fit_pass_cost`
  (Theil-Sen: one measurement spoiled by a burst of load cannot bend it);
  :class:`UnitCosts`, every operation a request is made of (read back from a results file
  by :func:`unit_costs_from_result`), and the requests it prices: :func:`request_log`,
  :func:`request_logs`, :func:`predicted_speedup`, and :func:`predict_other_run`, out of
  sample.
* **Batches** (chapter 10): :class:`BatchPassFit` (:func:`fit_batch_pass_cost`), a pass
  over T positions for each of B rows; :class:`SweepCostFit` (:func:`sweep_counts`,
  :func:`fit_sweep_costs`, :func:`predict_sweep`), the seconds speculation adds to a
  batched call, and the batch size where it would stop paying. (Where a measured sweep
  crossed is :mod:`specdec_lib.analysis.crossover`'s.)
* **Server steps** (chapter 10b): :class:`StepCostFit`, a step's seconds from profiled
  steps, and :class:`RooflineStepCost`, the roofline's, for an accelerator the course
  cannot run.

Each is an estimate, not a wall-clock measurement; the chapters set it beside what was
measured. The textbook's closed form, in which the prices are inputs rather than
measurements, is :mod:`specdec_lib.analysis.theory`.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch

from specdec_lib.analysis.intervals import (
    Estimate,
    percentile_estimate,
    prompt_draws,
    ratio_estimate,
)
from specdec_lib.analysis.runs import per_prompt_speculation
from specdec_lib.analysis.theory import expected_speedup
from specdec_lib.analysis.timing import Timing, decode_step, time_passes, time_ratio
from specdec_lib.engine.generate import RoundRecord, SpeculationStats
from specdec_lib.engine.model import ModelConfig, TinyGPT
from specdec_lib.engine.server import Step

# --- memory (chapter 1) ----------------------------------------------------------------


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


# --- cost per token, in target passes (chapter 5) --------------------------------------


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


#: A row of a benchmark's results (``tokens_per_pass.py``'s: ``workload``, ``drafter``,
#: ``k``, the pooled counts and each prompt's, ``per_prompt``).
BenchmarkRow = Mapping[str, Any]
#: Cost of a verification pass by the positions it scores, in one-position passes
#: (:func:`pass_costs`); without one, every pass costs one.
PassCostTable = Mapping[int, float]
_DRAFTERS = ("draft", "ngram")


def index_rows(rows: Sequence[BenchmarkRow]) -> dict[tuple[str, str, int], BenchmarkRow]:
    """The rows keyed by ``(workload, drafter, k)``."""
    return {(r["workload"], r["drafter"], r["k"]): r for r in rows}


def counts_cost(
    counts: BenchmarkRow, drafter: str, c: float, o: float, pass_cost: PassCostTable | None = None
) -> float:
    """Estimated target passes per emitted token for one run's ``counts`` (a benchmark
    row, or one prompt's counts in its ``per_prompt``) of ``drafter``.

    A draft model pays ``c`` per draft pass; the n-gram drafter pays ``o`` per
    lookup, one per round, and at batch one there is one round per target pass. With
    ``pass_cost`` (:func:`pass_costs`) each verification pass
    is charged what a pass over its positions costs; without it, one.
    """
    if drafter not in _DRAFTERS:
        raise ValueError(f"drafter must be one of {sorted(_DRAFTERS)}, got {drafter!r}")
    lookups = counts["target_passes"] if drafter == "ngram" else 0
    if pass_cost is None:
        return cost_per_token(
            counts["target_passes"], counts["draft_passes"], counts["emitted"], c, lookups, o
        )
    return verified_cost_per_token(
        counts["target_passes"],
        counts["position_proposed"],
        counts["draft_passes"],
        counts["emitted"],
        c,
        pass_cost,
        lookups,
        o,
    )


def row_cost(
    row: BenchmarkRow, c: float, o: float, pass_cost: PassCostTable | None = None
) -> float:
    """:func:`counts_cost` of one benchmark row, whose ``drafter`` it names."""
    return counts_cost(row, row["drafter"], c, o, pass_cost)


def cost_estimate(
    row: BenchmarkRow, c: float, o: float, pass_cost: PassCostTable | None = None, seed: int = 0
) -> Estimate:
    """:func:`row_cost` with its 95% interval over prompts (a ratio of sums: each prompt's
    priced passes over its emitted tokens)."""
    priced = [
        counts_cost(p, row["drafter"], c, o, pass_cost) * p["emitted"] for p in row["per_prompt"]
    ]
    return ratio_estimate(priced, [p["emitted"] for p in row["per_prompt"]], seed)


def best_k(
    rows: Sequence[BenchmarkRow],
    workload: str,
    drafter: str,
    c: float,
    o: float,
    pass_cost: PassCostTable | None = None,
) -> int:
    """The k at which ``drafter`` costs least on ``workload`` (the smallest such k on a tie)."""
    table = index_rows(rows)
    ks = sorted(k for w, d, k in table if (w, d) == (workload, drafter))
    if not ks:
        raise ValueError(f"rows must hold {drafter!r} on {workload!r}")
    return min(ks, key=lambda k: row_cost(table[workload, drafter, k], c, o, pass_cost))


def _crossover_parts(
    rows: Sequence[BenchmarkRow], workload: str, o: float, pass_cost: PassCostTable | None
) -> tuple[list[int], torch.Tensor]:
    """Per prompt, for every k of the n-gram drafter then of the draft model, the columns
    (priced target side, draft passes, emitted) of its counts at c = 0."""
    table = index_rows(rows)
    ks = sorted(k for w, d, k in table if (w, d) == (workload, "draft"))
    if not ks or any((workload, "ngram", k) not in table for k in ks):
        raise ValueError(f"rows must hold both drafters at the same k on workload={workload!r}")
    n = {len(table[workload, d, k]["per_prompt"]) for d in _DRAFTERS for k in ks}
    if len(n) != 1:
        raise ValueError("rows must hold per_prompt counts of the same prompts in every row")
    columns = []
    for drafter in ("ngram", "draft"):
        for k in ks:
            each = table[workload, drafter, k]["per_prompt"]
            columns += [
                [counts_cost(p, drafter, 0.0, o, pass_cost) * p["emitted"] for p in each],
                [float(p["draft_passes"]) for p in each],
                [float(p["emitted"]) for p in each],
            ]
    return ks, torch.tensor(columns, dtype=torch.float64).T


def _crossover_of(sums: torch.Tensor, n_k: int) -> torch.Tensor:
    """The crossover c for each row of column sums laid out as :func:`_crossover_parts`."""
    ngram, draft = sums[:, : 3 * n_k], sums[:, 3 * n_k :]
    best_ngram = (ngram[:, 0::3] / ngram[:, 2::3]).min(dim=1, keepdim=True).values
    return ((best_ngram * draft[:, 2::3] - draft[:, 0::3]) / draft[:, 1::3]).max(dim=1).values


def crossover_c(
    rows: Sequence[BenchmarkRow], workload: str, o: float, pass_cost: PassCostTable | None = None
) -> float:
    """The price of a draft pass c below which the draft model, at its best k, costs less per
    token on ``workload`` than the n-gram drafter at its best k (lookups at ``o``,
    ``pass_cost`` as in :func:`counts_cost`); at or below 0, it never does.

    At k the draft model costs (V + c·D) / E, so it beats the n-gram drafter's best cost N
    while c < (N·E − V) / D; the crossover is the largest of these over k.
    """
    ks, parts = _crossover_parts(rows, workload, o, pass_cost)
    return float(_crossover_of(parts.sum(dim=0, keepdim=True), len(ks))[0])


def crossover_estimate(
    rows: Sequence[BenchmarkRow],
    workload: str,
    o: float,
    pass_cost: PassCostTable | None = None,
    seed: int = 0,
) -> Estimate:
    """:func:`crossover_c` with its 95% interval over prompts, by the course's bootstrap
    (:func:`~specdec_lib.analysis.intervals.prompt_draws`): each resample draws prompts with
    replacement, the same prompts for both drafters and every k (the benchmark ran them all
    on one prompt set), and recomputes both drafters' best costs."""
    ks, parts = _crossover_parts(rows, workload, o, pass_cost)
    n = parts.shape[0]
    counts = []  # how often each prompt was drawn, per resample
    for draw in prompt_draws(n, seed):
        drawn = [0] * n
        for i in draw:
            drawn[i] += 1
        counts.append(drawn)
    boot = _crossover_of(torch.tensor(counts, dtype=torch.float64) @ parts, len(ks))
    return percentile_estimate(crossover_c(rows, workload, o, pass_cost), boot.tolist())


# --- seconds (chapters 1 and 9, appendix B) --------------------------------------------


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
        :func:`unit_costs_from_result` reads them back),
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


def unit_costs_from_result(units: Mapping[str, object]) -> UnitCosts:
    """The :class:`UnitCosts` a ``wall_clock.py`` result file recorded (its ``unit_costs``),
    so that one run's measured costs can predict another run's times."""
    try:
        return UnitCosts(
            pass_fit=PassCostFit(
                fixed=units["target_pass_fixed_s"], per_position=units["target_pass_per_position_s"]
            ),
            draft_pass=units["draft_pass_s"],
            lookup=units["lookup_s"],
            prefill={int(n): t for n, t in units["prefill_s"].items()},
            host_step=units["host_step_s"],
            host_round=units["host_round_s"],
            host_draft_step=units["host_draft_step_s"],
            single_pass=units["target_pass_s"],
        )
    except KeyError as missing:
        raise ValueError(
            f"units must hold every unit cost wall_clock.py records; {missing} is missing"
        ) from None


def request_log(rounds: Sequence[RoundRecord], draft_passes: int, emitted: int) -> dict:
    """One request's round log as :func:`predicted_speedup` reads it (and result files
    store it): each round's proposal length, acceptance and k, the request's draft passes
    and emitted tokens; from it a prediction can be redone with any unit costs."""
    return {
        "proposal_lengths": [len(r.proposed) for r in rounds],
        "accepted": [r.n_accepted for r in rounds],
        "ks": [r.k for r in rounds],
        "draft_passes": draft_passes,
        "emitted": emitted,
    }


def request_logs(*args: Any, **kwargs: Any) -> list[dict]:
    """Each request's :func:`request_log`, untimed, for :func:`predicted_speedup` to price:
    every prompt decoded with a fresh drafter by
    :func:`~specdec_lib.analysis.runs.per_prompt_speculation`, which takes the same
    arguments (``target, make_drafter, prompts, params, k, adaptive_k, greedy``). With
    ``greedy`` (plain decoding's outputs) every output is checked against it, so a policy
    can never be priced for output it changed."""
    each = per_prompt_speculation(*args, **kwargs)
    return [request_log(s.log, s.draft_passes, s.emitted) for s in each]


def predicted_speedup(
    costs: UnitCosts,
    prompt_lengths: Sequence[int],
    tokens: int,
    requests: Sequence[Mapping[str, object]],
    drafter: str,
) -> float:
    """Predicted speed-up over plain decoding of the requests whose round logs are given
    (each with ``proposal_lengths`` and ``draft_passes``), from ``costs``: total predicted
    plain time over total predicted speculative time. ``drafter`` is ``"ngram"`` (a lookup
    per round) or ``"draft"`` (draft passes, no lookup)."""
    if drafter not in ("ngram", "draft"):
        raise ValueError(f"drafter must be 'ngram' or 'draft', got {drafter!r}")
    if len(prompt_lengths) != len(requests) or not requests:
        raise ValueError("prompt_lengths and requests must hold one entry per request")
    plain = sum(costs.plain_request(n, tokens) for n in prompt_lengths)
    spec = sum(
        costs.speculative_request(
            n,
            r["proposal_lengths"],
            r["draft_passes"],
            len(r["proposal_lengths"]) if drafter == "ngram" else 0,
        )
        for n, r in zip(prompt_lengths, requests, strict=True)
    )
    return plain / spec


def predict_other_run(units_from: Mapping, measured: Mapping, counts: Mapping) -> list[dict]:
    """Out of sample: the unit costs one ``wall_clock.py`` run measured (``units_from``, its
    ``unit_costs``) predict every fixed-k row another run measured (``measured``), from the
    round logs of ``wall_clock.py --counts-only`` (``counts``). Each row holds the measured
    speed-up and interval, the cost model's prediction and the textbook's
    :func:`~specdec_lib.analysis.theory.expected_speedup` with the same run's c, lookup
    and verification costs and the row's fitted acceptance rate."""
    costs = unit_costs_from_result(units_from)
    tokens = counts["tokens_per_prompt"]
    if tokens != measured["tokens_per_prompt"]:
        raise ValueError(
            f"counts were taken at {tokens} tokens, measured at {measured['tokens_per_prompt']}"
        )
    out = []
    for r in measured["rows"]:
        if r["drafter"] == "none" or r["adaptive"]:
            continue
        scenario = counts["scenarios"][r["workload"]]
        requests = scenario["requests"][r["method"]]
        if sum(len(q["proposal_lengths"]) for q in requests) != r["rounds"]:
            raise ValueError(f"counts and measured run disagree on the rounds of {r['method']}")
        k, ngram = r["k"], r["drafter"] == "ngram"
        textbook = expected_speedup(
            r["alpha"],
            k,
            0.0 if ngram else units_from["c_draft"],
            units_from["verify_cost"][str(k)],
            units_from["c_lookup"] if ngram else 0.0,
        )
        out.append(
            {
                "workload": r["workload"],
                "method": r["method"],
                "drafter": r["drafter"],
                "k": k,
                "measured": r["speedup"],
                "low": r["speedup_low"],
                "high": r["speedup_high"],
                "model": predicted_speedup(
                    costs, scenario["prompt_lengths"], tokens, requests, r["drafter"]
                ),
                "textbook": textbook,
            }
        )
    return out


# --- batches (chapter 10) --------------------------------------------------------------


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
    if len(timings) < 3:
        raise ValueError(f"timings must hold at least 3 (B, T) cells, got {len(timings)}")
    cells = sorted(timings)
    y = torch.tensor([timings[c].median for c in cells], dtype=torch.float64)
    x = torch.tensor([[1.0, b, b * t] for b, t in cells], dtype=torch.float64)
    w = (1 / y).unsqueeze(1)
    coef = torch.linalg.lstsq(x * w, (y * w.squeeze(1)).unsqueeze(1)).solution.squeeze(1)
    return BatchPassFit(*(float(c) for c in coef))


def sweep_counts(row: dict, k: int) -> dict[str, float]:
    """What the two methods of one sweep row did, counted: ``passes`` and carried
    ``positions`` (beyond the prompts, which both feed alike) of plain decoding and of
    speculation, over the row's timed unit (``requests`` batches of one at B = 1, else one
    batch of B). A pass carries every row padded to its longest proposal; at B > 1 that is
    counted as k + 1 per row (with several rows some row almost always proposes k; an
    upper bound), at B = 1 as what the one request fed. The row's ``spec_positions_per_pass``
    is (B + proposed) / passes, which gives the number proposed."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    b, tokens = row["batch"], row["plain_target_passes"]
    calls = row.get("requests", b) if b == 1 else 1
    passes = row["spec_target_passes"]
    proposed = round(row["spec_positions_per_pass"] * passes - b)
    if b == 1:
        spec_positions = passes - calls + proposed
    else:
        spec_positions = b * (k + (k + 1) * (passes - 1))
    return {
        "batch": b,
        "plain_passes": calls * tokens,
        "plain_positions": b * calls * (tokens - 1),
        "spec_passes": passes,
        "spec_positions": spec_positions,
    }


def _features(counts: dict[str, float]) -> list[float]:
    saved = counts["spec_passes"] - counts["plain_passes"]
    extra = counts["spec_positions"] - counts["plain_positions"]
    return [saved, counts["batch"] * saved, extra]


@dataclass(frozen=True)
class SweepCostFit:
    """Seconds speculation adds to a batched call, from its counts:
    ``fixed`` x (passes added) + ``per_row`` x B x (passes added) + ``per_position`` x
    (positions added); passes added are negative where speculation saves them. The prompt's
    prefill, which both methods pay alike, cancels, so it needs no term."""

    fixed: float
    per_row: float
    per_position: float

    def difference(self, counts: dict[str, float]) -> float:
        """Predicted speculative minus plain seconds for :func:`sweep_counts`' counts."""
        f = _features(counts)
        return self.fixed * f[0] + self.per_row * f[1] + self.per_position * f[2]

    def break_even_passes(self, tokens: int, k: int) -> float:
        """The speculative passes per batch (for ``tokens`` tokens per request) above which
        speculation costs more than plain decoding at a large enough B: where the per-row
        and per-position terms, which grow with B, stop favouring it. Below it, only the
        fixed cost per pass is left to decide, and it favours the method with fewer passes."""
        if tokens < 1 or k < 1:
            raise ValueError(f"tokens and k must be >= 1, got {tokens}, {k}")
        return (
            tokens
            * (self.per_row + self.per_position)
            / (self.per_row + (k + 1) * self.per_position)
        )

    def crossing(self, passes: int, tokens: int, k: int) -> float | None:
        """B* for a workload whose batch needs ``passes`` speculative passes for ``tokens``
        tokens per request at every B (the counts held at the largest B swept): where
        the added seconds turn positive (below 1: slower at every B). ``None``: they never
        do, at any B."""
        if passes < 1 or tokens < 1:
            raise ValueError(f"passes and tokens must be >= 1, got {passes}, {tokens}")
        saved = passes - tokens
        extra = k + (k + 1) * (passes - 1) - (tokens - 1)  # per row
        slope = self.per_row * saved + self.per_position * extra
        if slope <= 0:
            return None
        return -self.fixed * saved / slope


def fit_sweep_costs(rows: Sequence[dict], k: int) -> SweepCostFit:
    """Least squares of :class:`SweepCostFit` to sweep rows' measured time differences
    (speculative minus plain median seconds, from the rows' throughputs), each divided by
    plain's time so that every batch size counts alike. Rows of several workloads and
    runs may be pooled."""
    if len(rows) < 3:
        raise ValueError(f"rows must hold at least 3 rows, got {len(rows)}")
    x, y = [], []
    for r in rows:
        plain, spec = _seconds(r)
        x.append([v / plain for v in _features(sweep_counts(r, k))])
        y.append((spec - plain) / plain)
    a = torch.tensor(x, dtype=torch.float64)
    b = torch.tensor(y, dtype=torch.float64).unsqueeze(1)
    coef = torch.linalg.lstsq(a, b).solution.squeeze(1)
    return SweepCostFit(*(float(c) for c in coef))


def _seconds(row: dict) -> tuple[float, float]:
    """Plain and speculative median seconds of a row's timed unit."""
    n = row.get("requests", row["batch"]) * row["plain_target_passes"]
    return n / row["plain_tokens_per_second"], n / row["spec_tokens_per_second"]


def predict_sweep(fit: SweepCostFit, rows: Sequence[dict], k: int) -> list[dict]:
    """Predicted speed-up at each of ``rows``' batch sizes: plain's measured time over that
    time plus what the fit says speculation adds, from the row's counts alone (nothing
    speculation's timing measured enters). Sorted by B; ``predicted``, ``measured``, and
    whether the measured 95% interval holds the prediction (``inside``)."""
    out = []
    for r in sorted(rows, key=lambda r: r["batch"]):
        plain, _ = _seconds(r)
        spec = plain + fit.difference(sweep_counts(r, k))
        if spec <= 0:
            raise ValueError(f"the fit predicts a non-positive time at B = {r['batch']}")
        out.append(
            {
                "batch": r["batch"],
                "predicted": plain / spec,
                "measured": r["speedup"],
                "inside": r["speedup_low"] <= plain / spec <= r["speedup_high"],
            }
        )
    return out


# --- server steps (chapter 10b) --------------------------------------------------------


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
