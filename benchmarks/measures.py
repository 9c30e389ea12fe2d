"""What the benchmarks measure that no chapter runs live: the measurement behind a stored
result, which the chapters read back from its file.

A benchmark script imports these as it imports :mod:`harness` (this folder is on
``sys.path`` when a script runs, and the tests put it there in ``tests/conftest.py``).
The library keeps what a chapter calls; a function only the benchmarks call lives here.

* Serving (``serve_sweep.py``, ``serve_roofline.py``): :func:`summarize`, what a server
  run measured; :func:`fit_step_costs`, the step-cost model
  (:class:`~specdec_lib.analysis.costs.StepCostFit`) from measured steps.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

import numpy as np

from specdec_lib.analysis.costs import StepCostFit
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
