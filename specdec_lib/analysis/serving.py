"""What a server run measured, and a model of what its steps cost.

:func:`summarize` turns a :class:`~specdec_lib.engine.server.ServeRun` into the numbers a
serving benchmark reports: latency percentiles (end to end, time to first token, time per
output token), throughput, and goodput, the share of requests that met a latency target.

:func:`fit_step_costs` fits what a server's steps cost from the steps of measured runs: a
decoding round of B rows W positions wide (padding included) as a line in B for each
width measured (``fixed[W] + per_row[W] * B``: drafting and verifying cost per row, not
only per position), interpolated between widths; a prefill as ``fixed + per_token * B * W``
(W the longest prompt). Like vLLM's dynamic speculation, it reads profiled step times
rather than a model of the hardware. The fit is the pass-cost model the goodput policy
plans with (:meth:`StepCostFit.predict`) and the clock of the simulator
(:meth:`StepCostFit.seconds`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from specdec_lib.engine.server import ServeRun, Step


def percentile(values: Sequence[float], q: float) -> float:
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
            out[f"{name}_p{q}"] = percentile(values, q)
    out["throughput"] = sum(len(s.output) for s in done) / span
    out["goodput"] = float(np.mean([v <= latency_target for v in latency]))
    out["mean_batch"] = float(np.mean([s.batch for s in decodes])) if decodes else 0.0
    out["tokens_per_pass"] = run.stats.tokens_per_pass / max(out["mean_batch"], 1e-12)
    out["acceptance"] = run.stats.acceptance_rate
    return out


@dataclass(frozen=True)
class StepCostFit:
    """Seconds of a server step, fitted to measured steps (see the module's docstring)."""

    widths: tuple[int, ...]
    fixed: tuple[float, ...]
    per_row: tuple[float, ...]
    prefill_fixed: float
    prefill_per_token: float

    def predict(self, batch: int, positions: int) -> float:
        """A decoding round of ``batch`` rows, each ``positions`` wide: the line fitted at
        that width, or interpolated between the nearest fitted widths (extended past the
        ends by the nearest two)."""
        at = [self.fixed[i] + self.per_row[i] * batch for i in range(len(self.widths))]
        if len(at) == 1:
            return at[0]
        i = int(np.clip(np.searchsorted(self.widths, positions) - 1, 0, len(at) - 2))
        w0, w1 = self.widths[i], self.widths[i + 1]
        return at[i] + (at[i + 1] - at[i]) * (positions - w0) / (w1 - w0)

    def seconds(self, step: Step) -> float:
        """What ``step`` costs by this model (the simulator's clock)."""
        if step.kind == "prefill":
            return self.prefill_fixed + self.prefill_per_token * step.batch * step.width
        return self.predict(step.batch, step.width)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _weighted_fit(features: Sequence[Sequence[float]], seconds: Sequence[float]) -> list[float]:
    """Least squares of ``seconds`` on ``features``, each step weighted by 1 / its time, so a
    small step counts as much, relatively, as a large one."""
    x, y = np.asarray(features, dtype=np.float64), np.asarray(seconds, dtype=np.float64)
    if len(y) <= x.shape[1] or (y <= 0).any():
        raise ValueError(f"steps must hold more than {x.shape[1]} positive times, got {len(y)}")
    w = 1 / y
    coef, *_ = np.linalg.lstsq(x * w[:, None], y * w, rcond=None)
    return [float(c) for c in coef]


def fit_step_costs(steps: Sequence[Step], min_steps: int = 20) -> StepCostFit:
    """:class:`StepCostFit` from measured steps (``Step.seconds``) of one or more runs: a line
    in the batch for every width with at least ``min_steps`` rounds of 2 batch sizes or more."""
    lines = {}
    for width in sorted({s.width for s in steps if s.kind == "decode"}):
        mine = [s for s in steps if s.kind == "decode" and s.width == width]
        if len(mine) >= min_steps and len({s.batch for s in mine}) >= 2:
            lines[width] = _weighted_fit([[1, s.batch] for s in mine], [s.seconds for s in mine])
    prefills = [s for s in steps if s.kind == "prefill"]
    if len(lines) < 2 or len(prefills) < 3:
        raise ValueError("steps must hold decoding rounds of at least 2 widths and 3 prefills")
    prefill = _weighted_fit(
        [[1, s.batch * s.width] for s in prefills], [s.seconds for s in prefills]
    )
    return StepCostFit(
        tuple(lines),
        tuple(c[0] for c in lines.values()),
        tuple(c[1] for c in lines.values()),
        *prefill,
    )
