"""What a server run measured, and a model of what its steps cost.

:func:`summarize` turns a :class:`~specdec_lib.engine.server.ServeRun` into the numbers a
serving benchmark reports: latency percentiles (end to end, time to first token, time per
output token), throughput, and goodput, the share of requests that met a latency target.

:func:`fit_step_costs` fits what a server's steps cost from the steps of measured runs: a
decoding round of B rows that asked each row for up to k drafted tokens as the median
measured step at that k and batch, interpolated between batches and between k; a prefill as
``fixed + per_token * B * W`` (W the longest prompt). A round is charged by what it asked,
not by what the drafter happened to propose: asking costs a lookup and a verification per
row even when nothing is proposed, and the padded pass is as wide as the longest proposal.
Like vLLM's dynamic speculation, it reads profiled step times rather than a model of the
hardware. The fit is the pass-cost model the goodput policy plans with
(:meth:`StepCostFit.predict`) and the clock of the simulator (:meth:`StepCostFit.seconds`).
"""

from __future__ import annotations

import bisect
import functools
import itertools
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from specdec_lib.engine.server import ServeRun, Step


def _percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values``, linearly interpolated (NumPy's default);
    nan for no values."""
    return float(np.percentile(values, q)) if len(values) else float("nan")


def summarize(run: ServeRun, latency_target: float) -> dict[str, float]:
    """A run's service: percentiles in seconds, throughput in output tokens per second over
    the run (first arrival to last token), goodput as the share of served requests whose
    end-to-end latency met ``latency_target`` seconds, and the mean decoding batch."""
    done = [s for s in run.served if s.error is None]
    if not done:
        raise ValueError("run must have served at least 1 request without error")
    latency = [s.latency for s in done]
    ttft = [s.ttft for s in done]
    tpot = [s.tpot for s in done if len(s.output) > 1]
    span = max(s.finished for s in done) - min(s.request.arrival for s in done)
    decodes = [s for s in run.steps if s.kind == "decode"]
    out = {"requests": len(done), "refused": len(run.served) - len(done)}
    for name, values in (("latency", latency), ("ttft", ttft), ("tpot", tpot)):
        out[f"{name}_mean"] = float(np.mean(values)) if values else float("nan")
        for q in (50, 90, 99):
            out[f"{name}_p{q}"] = _percentile(values, q)
    out["throughput"] = sum(len(s.output) for s in done) / span
    out["goodput"] = float(np.mean([v <= latency_target for v in latency]))
    out["mean_batch"] = float(np.mean([s.batch for s in decodes])) if decodes else 0.0
    out["tokens_per_pass"] = run.stats.tokens_per_pass / max(out["mean_batch"], 1e-12)
    out["acceptance"] = run.stats.acceptance_rate
    return out


#: Batch sizes are pooled in these bins before a median is taken (a bin is [edge, next edge)).
_BATCH_BINS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 40, 48, 64, 96, 128)


@dataclass(frozen=True)
class StepCostFit:
    """Seconds of a server step, from profiled steps (see the module's docstring).

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
        return _predict(self, batch, k)

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
def _predict(fit: StepCostFit, batch: int, k: int) -> float:
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


def _weighted_fit(features: Sequence[Sequence[float]], seconds: Sequence[float]) -> list[float]:
    """Least squares of ``seconds`` on ``features``, each step weighted by 1 / its time, so a
    small step counts as much, relatively, as a large one."""
    x, y = np.asarray(features, dtype=np.float64), np.asarray(seconds, dtype=np.float64)
    if len(y) <= x.shape[1] or (y <= 0).any():
        raise ValueError(f"steps must hold more than {x.shape[1]} positive times, got {len(y)}")
    w = 1 / y
    coef, *_ = np.linalg.lstsq(x * w[:, None], y * w, rcond=None)
    return [float(c) for c in coef]


def fit_step_costs(steps: Sequence[Step], min_steps: int = 5) -> StepCostFit:
    """:class:`StepCostFit` from measured steps (``Step.seconds``) of one or more runs: for
    every k asked, the median step of each batch bin holding at least ``min_steps`` rounds
    (a median, so one step slowed by other work cannot move it)."""
    points = {}
    for k in sorted({s.asked for s in steps if s.kind == "decode"}):
        mine = [s for s in steps if s.kind == "decode" and s.asked == k]
        bins = np.searchsorted(_BATCH_BINS, [s.batch for s in mine], side="right")
        here = []
        for b in sorted(set(bins)):
            cell = [s for s, x in zip(mine, bins, strict=True) if x == b]
            if len(cell) >= min_steps:
                here.append(
                    (
                        statistics.median(s.batch for s in cell),
                        statistics.median(s.seconds for s in cell),
                    )
                )
        if here:
            points[k] = tuple(here)
    prefills = [s for s in steps if s.kind == "prefill"]
    if len(points) < 2 or len(prefills) < 3:
        raise ValueError("steps must hold decoding rounds of at least 2 k asked and 3 prefills")
    prefill = _weighted_fit(
        [[1, s.batch * s.width] for s in prefills], [s.seconds for s in prefills]
    )
    return StepCostFit(tuple(points), tuple(points.values()), *prefill)


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


def stream_ratio(
    base: Sequence[tuple[float, int]], other: Sequence[tuple[float, int]]
) -> dict[str, float]:
    """How many times faster ``other`` served than ``base``, over independent streams, each
    given as (summed latency, requests), the same streams in both: the geometric mean of
    the streams' ratios of mean latency, with a 95% t-interval (n - 1 degrees of freedom)
    on their logarithms. A stream's requests share one schedule and are not independent,
    so the streams are the units; with as few as four of them a bootstrap over streams
    gives intervals too narrow, and the t-interval's wider ones are the honest price.
    Above 1: ``other`` is faster."""
    from scipy.stats import t

    if len(base) != len(other) or len(base) < 2:
        raise ValueError(
            f"base and other must hold the same 2 or more streams, got {len(base)}, {len(other)}"
        )
    logs = np.log([(b[0] / b[1]) / (o[0] / o[1]) for b, o in zip(base, other, strict=True)])
    mean, n = float(logs.mean()), len(logs)
    half = float(t.ppf(0.975, n - 1) * logs.std(ddof=1) / np.sqrt(n))
    return {
        "ratio": float(np.exp(mean)),
        "low": float(np.exp(mean - half)),
        "high": float(np.exp(mean + half)),
        "streams": n,
    }
