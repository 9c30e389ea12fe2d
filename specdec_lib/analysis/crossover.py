"""Where speculation stops paying: the crossover batch size B*, read off measured sweeps.

A batch sweep (``benchmarks/batch_sweep.py``) gives, at each batch size B on a grid that
doubles, a paired speed-up of speculation over plain decoding with a 95% interval. Three
questions are asked of it here.

* **Where does it cross?** :func:`estimate_crossover` reads B* off one run: between the
  last B resolved faster and the first B after it resolved slower, interpolated where the
  point estimates cross 1. The grid doubles and the speed-up falls roughly in proportion
  to log B between neighbours, so the interpolation is linear in log B and log speed-up
  (:func:`log_crossing`). The interval applies the same interpolation to the bounds: B*
  cannot lie before the lower bounds cross 1 (there speculation is still resolved faster)
  nor after the upper bounds do (there it is resolved slower). It lies inside the bracket
  of resolved grid points and, like the pointwise intervals it is read from, it is not a
  simultaneous confidence statement: it says where each B's own interval puts the
  crossing.
* **Do the runs agree?** :func:`agree_crossovers`: one run's interval does not carry what
  moves a whole run, so B* is claimed only where every run crosses and their intervals
  share a range; the reported range is the hull of the runs' intervals.
* **Did a prediction hit?** :func:`prediction_miss` sets a B* predicted from the costs
  (:class:`~specdec_lib.analysis.costs.SweepCostFit`, fitted on other workloads, so out of
  sample) against the range the runs measured.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from specdec_lib.analysis.replication import speedup_verdict


def log_crossing(batches: Sequence[int], values: Sequence[float]) -> float | None:
    """The first B at which ``values`` fall from >= 1 to below 1, interpolated linearly in
    log B and log value between the two grid points around it; ``None`` if they never do."""
    if len(batches) != len(values) or not batches:
        raise ValueError("batches and values must be non-empty and of the same length")
    if any(b < 1 for b in batches) or list(batches) != sorted(set(batches)):
        raise ValueError(f"batches must be increasing and >= 1, got {list(batches)}")
    if any(not v > 0 for v in values):
        raise ValueError("values must be positive speed-ups")
    pairs = list(zip(batches, values, strict=True))
    for (b0, v0), (b1, v1) in itertools.pairwise(pairs):
        if v0 >= 1 > v1:
            share = math.log(v0) / (math.log(v0) - math.log(v1))
            return math.exp(math.log(b0) + share * (math.log(b1) - math.log(b0)))
    return None


@dataclass(frozen=True)
class CrossoverEstimate:
    """One run's B* for one workload.

    ``status``: ``"crossed"`` (resolved faster, then resolved slower at a larger B; ``value``,
    ``low`` and ``high`` set), ``"not crossed"`` (resolved faster, never resolved slower
    after; ``low`` is the least B* the bounds allow, or the grid's end), ``"never faster"``
    (resolved faster at no B: there is no crossover to find) or ``"not monotone"`` (resolved
    faster again after resolved slower). ``faster_until`` is the last B resolved faster,
    ``slower_from`` the first after it resolved slower."""

    status: str
    value: float | None
    low: float | None
    high: float | None
    faster_until: int | None
    slower_from: int | None
    largest: int

    def describe(self) -> str:
        """The estimate as a phrase, at the precision a doubling grid supports."""
        if self.status == "crossed":
            return (
                f"B* = {self.value:.0f} ({self.low:.0f} to {self.high:.0f}; faster at "
                f"B = {self.faster_until}, slower at B = {self.slower_from})"
            )
        if self.status == "not crossed":
            return f"no crossover up to B = {self.largest} (B* > {self.low:.0f})"
        if self.status == "never faster":
            return "faster at no batch size, so no crossover"
        return "not monotone: faster again after slower"


def estimate_crossover(rows: Sequence[dict]) -> CrossoverEstimate:
    """B* of one workload in one run, from its rows (``batch``, ``speedup``, ``speedup_low``,
    ``speedup_high``, in any order): see the module docstring for why it is shaped so."""
    if not rows:
        raise ValueError("rows must hold at least one batch size")
    rows = sorted(rows, key=lambda r: r["batch"])
    batches = [r["batch"] for r in rows]
    verdict = [speedup_verdict(r["speedup_low"], r["speedup_high"]) for r in rows]
    faster = [i for i, v in enumerate(verdict) if v == "faster"]
    if not faster:
        return CrossoverEstimate("never faster", None, None, None, None, None, batches[-1])
    last = faster[-1]
    later = [i for i in range(last + 1, len(rows)) if verdict[i] == "slower"]
    if any(verdict[i] == "slower" for i in range(last)):
        return CrossoverEstimate("not monotone", None, None, None, batches[last], None, batches[-1])
    span = rows[last : (later[0] + 1 if later else len(rows))]
    bs = [r["batch"] for r in span]

    def cross(field: str) -> float | None:
        return log_crossing(bs, [r[field] for r in span])

    if not later:
        low = cross("speedup_low")
        return CrossoverEstimate(
            "not crossed", None, low or batches[-1], None, batches[last], None, batches[-1]
        )
    return CrossoverEstimate(
        "crossed",
        cross("speedup"),
        cross("speedup_low"),
        cross("speedup_high"),
        batches[last],
        batches[later[0]],
        batches[-1],
    )


def agree_crossovers(estimates: Sequence[CrossoverEstimate]) -> dict:
    """What two or more runs' :func:`estimate_crossover` say together: ``agree`` when every
    run has the same status and, if they crossed, their intervals share a range; ``low`` and
    ``high`` the hull of the runs' intervals (``low`` alone if none crossed); a sentence."""
    if len(estimates) < 2:
        raise ValueError(f"estimates must hold two runs or more, got {len(estimates)}")
    n = len(estimates)
    every = "both runs" if n == 2 else f"all {n} runs"
    statuses = {e.status for e in estimates}
    out = {"agree": False, "status": None, "low": None, "high": None, "values": []}
    if len(statuses) > 1:
        text = "the runs disagree: " + "; ".join(
            f"run {i} {e.describe()}" for i, e in enumerate(estimates, 1)
        )
        return {**out, "verdict": text}
    status = statuses.pop()
    out.update(status=status, values=[e.value for e in estimates])
    if status == "crossed":
        low, high = min(e.low for e in estimates), max(e.high for e in estimates)
        shared = max(e.low for e in estimates) <= min(e.high for e in estimates)
        values = ", ".join(f"{e.value:.0f}" for e in estimates)
        if not shared:
            text = f"every run crossed, but their intervals share no range (B* = {values})"
            return {**out, "verdict": text}
        text = f"B* between {low:.0f} and {high:.0f} in {every} (point estimates {values})"
        return {**out, "agree": True, "low": low, "high": high, "verdict": text}
    if status == "not crossed":
        low = min(e.low for e in estimates)
        largest = min(e.largest for e in estimates)
        text = f"no crossover up to B = {largest} in {every} (B* > {low:.0f})"
        return {**out, "agree": True, "low": low, "verdict": text}
    if status == "never faster":
        return {**out, "agree": True, "verdict": f"faster at no batch size in {every}"}
    return {**out, "verdict": f"not monotone in {every}"}


def prediction_miss(predicted: float | None, measured: dict) -> dict:
    """How a predicted B* (``None``: no crossing predicted) compares with what the runs
    measured (:func:`agree_crossovers`): ``inside`` the measured range, the ``factor``
    predicted / measured (the median of the runs' point estimates), and a phrase. Both are
    ``None`` where the runs agree on no crossing to compare with."""
    if predicted is not None and not predicted > 0:
        raise ValueError(f"predicted must be positive or None, got {predicted}")
    said = "no crossing on the grid" if predicted is None else f"B* = {predicted:.0f}"
    if not (measured["agree"] and measured["status"] == "crossed"):
        return {"inside": None, "factor": None, "text": f"{said}; measured: {measured['verdict']}"}
    low, high = measured["low"], measured["high"]
    if predicted is None:
        text = f"{said}, where the runs measured B* between {low:.0f} and {high:.0f}"
        return {"inside": False, "factor": None, "text": text}
    point = statistics.median(measured["values"])
    inside = low <= predicted <= high
    text = (
        f"{said}, {'inside' if inside else 'outside'} the measured range ({low:.0f} to "
        f"{high:.0f}), {predicted / point:.2f} times the measured point estimate ({point:.0f})"
    )
    return {"inside": inside, "factor": predicted / point, "text": text}
