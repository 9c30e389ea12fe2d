"""Two runs of one benchmark: which verdicts replicate, and how far apart runs fall.

A timing interval computed inside one run covers the noise between that run's repeats
and prompts. It does not cover what moves a whole run: the machine's state, the other
work on its cores, where memory landed. So the course claims a verdict (a crossover,
a best k, faster or slower than plain decoding) only where a second run of the same
command resolves it too, and measures how often one run's interval holds the other's
value. The chapters read their verdicts from here; ``benchmarks/compare_runs.py`` prints
them. (What one run's timing tables resolve, the summary a benchmark writes beside its
rows, is ``benchmarks/run_summaries.py``'s.)

* :func:`speedup_verdict`, :func:`crossover`, :func:`agreed_crossover`: faster, slower or
  not resolved at each batch size, in one run and in both.
* :func:`agreed_best_k`: the best fixed k, resolved by both runs, or only the same point
  estimate, or not even that; :func:`best_k_candidates`: the ks both leave in contention.
  :func:`agreed_ratio`: which of two methods is faster, resolved by both runs' paired
  intervals (``wall_clock.py``'s n-gram against draft model).
* :func:`verdicts`: every verdict of a pair of result files, by name.
* :func:`cross_containment`: how often each run's interval holds the other run's value
  (:func:`row_speedup`, a row's point estimate).
* :func:`between_run_variance`, :func:`rerun_interval`: a run-to-run term estimated from
  the rows of two runs, and where a rerun should fall with it;
  :func:`next_run_interval`, :func:`next_run_coverage`: where a third run should fall, from
  two runs pooled, and how often it does.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence

from specdec_lib.analysis.intervals import Estimate

#: The normal quantile of a two-sided 95% interval.
_Z95 = 1.959963984540054


def speedup_verdict(low: float, high: float) -> str:
    """``"faster"``, ``"slower"`` or ``"not resolved"``: where a speed-up's interval lies
    against 1."""
    if not low <= high:
        raise ValueError(f"low must be <= high, got {low} > {high}")
    return "faster" if low > 1.0 else "slower" if high < 1.0 else "not resolved"


def _rows_of(result: dict, workload: str) -> list[dict]:
    rows = sorted(
        (r for r in result["rows"] if r["workload"] == workload), key=lambda r: r["batch"]
    )
    if not rows:
        raise ValueError(f"workload {workload!r} has no rows in this result")
    return rows


def crossover(rows: Sequence[dict]) -> dict:
    """One run's batch sweep of one workload, read off its intervals: the batch sizes at
    which speculation was faster, slower, not resolved, and a one-line verdict."""
    by = {
        v: [r["batch"] for r in rows if speedup_verdict(r["speedup_low"], r["speedup_high"]) == v]
        for v in ("faster", "slower", "not resolved")
    }
    if by["slower"]:
        verdict = f"slower from B = {by['slower'][0]} (interval below 1)"
    elif by["not resolved"]:
        verdict = (
            f"no crossover resolved within the range; not resolved at B in {by['not resolved']}"
        )
    else:
        verdict = "no crossover within the range: faster at every B"
    return {
        "faster_at": by["faster"],
        "not_resolved_at": by["not resolved"],
        "slower_at": by["slower"],
        "verdict": verdict,
    }


def agreed_crossover(first: dict, second: dict, workload: str, *more: dict) -> dict:
    """What every run of a batch sweep resolves for ``workload`` (two runs, or more): the
    batch sizes where all say faster, where all say slower, the rest, and a sentence."""
    runs = (first, second, *more)
    each = [crossover(_rows_of(run, workload)) for run in runs]
    batches = [r["batch"] for r in _rows_of(first, workload)]
    if any(batches != [r["batch"] for r in _rows_of(run, workload)] for run in runs):
        raise ValueError(f"the runs swept different batch sizes for {workload!r}")
    faster = [b for b in batches if all(b in c["faster_at"] for c in each)]
    slower = [b for b in batches if all(b in c["slower_at"] for c in each)]
    unresolved = [b for b in batches if b not in faster + slower]
    every = "both runs" if len(runs) == 2 else f"all {len(runs)} runs"
    if faster == batches:
        text = f"faster at every batch size in {every}"
    elif slower == batches:
        text = f"slower at every batch size in {every}"
    else:
        parts = [
            f"{word} in {every} at B = {', '.join(map(str, bs))}"
            for word, bs in (("faster", faster), ("slower", slower))
            if bs
        ]
        if unresolved:
            parts.append(f"no verdict shared by {every} at B = {', '.join(map(str, unresolved))}")
        text = "; ".join(parts)
    return {
        "faster_at": faster,
        "slower_at": slower,
        "not_resolved_at": unresolved,
        "verdict": text,
    }


def agreed_ratio(first: dict, second: dict, faster: str, slower: str) -> dict:
    """Which side two runs' paired intervals of a ratio (``value``, ``low``, ``high``; > 1:
    ``faster`` ran faster than ``slower``) resolve, in both runs."""
    one, two = (speedup_verdict(r["low"], r["high"]) for r in (first, second))
    if one == two == "faster":
        return {"resolved": faster, "verdict": f"{faster} faster than {slower} in both runs"}
    if one == two == "slower":
        return {"resolved": slower, "verdict": f"{slower} faster than {faster} in both runs"}
    text = f"not resolved by both runs: {faster} against {slower}, run 1 {one}, run 2 {two}"
    return {"resolved": None, "verdict": text}


def best_k_candidates(first: dict, second: dict) -> list[int]:
    """The ks two runs' summaries of one scenario and drafter leave in contention for best:
    each run's best, and every k either run cannot tell apart from its best."""
    if any({"best_k", "ks_not_resolved_from_best"} - set(s) for s in (first, second)):
        raise ValueError("first and second must be best_fixed_k entries of one scenario")
    ks = {first["best_k"], second["best_k"]}
    return sorted(ks.union(first["ks_not_resolved_from_best"], second["ks_not_resolved_from_best"]))


def agreed_best_k(first: dict, second: dict) -> dict:
    """The best fixed k of one scenario and drafter, read off two runs' summaries.

    Each summary entry holds ``best_k`` (highest point estimate),
    ``ks_not_resolved_from_best`` (the ks the run cannot tell apart from it, the best
    included) and, when the run stored them, the paired ratios ``vs_best`` of every k
    tried. ``resolved_k`` is set only when both runs name the same k, neither run ties
    another k to it, and it is not the largest k tried: a curve still rising at the edge
    of the grid has its best beyond it (the verdict says so whenever the largest k tried
    is among the :func:`best_k_candidates`). ``point_k`` when both runs' point estimates
    name the same k.
    """
    k1, k2 = first["best_k"], second["best_k"]
    ties = sorted(
        (set(first["ks_not_resolved_from_best"]) | set(second["ks_not_resolved_from_best"])) - {k1}
    )
    grid = {int(k) for k in first.get("vs_best", {})} | {k1}
    candidates = best_k_candidates(first, second)
    edge = (
        "; the largest k tried is among them, so the best k may lie beyond the grid"
        if max(grid) in candidates and len(grid) > 1
        else ""
    )
    if k1 != k2:
        text = (
            f"not resolved: the first run's best point estimate is k = {k1}, the second's "
            f"k = {k2}; together the runs leave k = {', '.join(map(str, candidates))} in "
            f"contention{edge}"
        )
        return {"resolved_k": None, "point_k": None, "verdict": text}
    if not ties and k1 == max(grid) > min(grid):
        text = (
            f"k = {k1}, the largest k tried, beats every smaller k in both runs, so the best k "
            "may lie beyond the grid"
        )
        return {"resolved_k": None, "point_k": k1, "verdict": text}
    if not ties:
        return {"resolved_k": k1, "point_k": k1, "verdict": f"k = {k1}, resolved by both runs"}
    text = (
        f"k = {k1} has the highest point estimate in both runs, but is not resolved from "
        f"k = {', '.join(map(str, ties))}{edge}"
    )
    return {"resolved_k": None, "point_k": k1, "verdict": text}


def verdicts(first: dict, second: dict) -> dict[str, dict]:
    """Every verdict two runs of one benchmark resolve, by name: ``"best k, <scenario>
    <drafter>"`` for ``wall_clock.py``, ``"crossover, <workload>"`` for
    ``batch_sweep.py``."""
    out: dict[str, dict] = {}
    for name, s1 in first.get("summary", {}).items():
        if name != "goals":
            out[f"best k, {name}"] = agreed_best_k(s1, second["summary"][name])
    for w, ratio in first.get("ngram_over_draft", {}).items():
        two = second["ngram_over_draft"][w]
        out[f"drafter, {w}"] = agreed_ratio(ratio, two, "n-gram", "draft model")
    if "crossover" in first:
        for w in first["crossover"]:
            out[f"crossover, {w}"] = agreed_crossover(first, second, w)
    return out


def row_speedup(row: dict) -> float:
    """A row's point speed-up: ``speedup``, or ``speedup_median`` in a row that has no other."""
    return row["speedup"] if "speedup" in row else row["speedup_median"]


def _check_paired(first: Sequence[dict], second: Sequence[dict]) -> None:
    """Two runs' rows pair up one to one (the same configurations, in the same order)."""
    if len(first) != len(second) or not first:
        raise ValueError("first and second must hold the same, non-zero number of rows")


def cross_containment(
    first: Sequence[dict], second: Sequence[dict], bounds: str = "speedup"
) -> dict[str, int]:
    """How often each run's 95% interval holds the other run's point estimate, over paired
    rows (the same configuration in both runs, in the same order). ``bounds`` names the
    interval: ``"speedup"`` (``speedup_low``/``speedup_high``, the paired interval) or
    ``"rerun"`` (``rerun_low``/``rerun_high``, where a rerun should fall)."""
    _check_paired(first, second)
    if bounds not in ("speedup", "rerun"):
        raise ValueError(f"bounds must be 'speedup' or 'rerun', got {bounds!r}")
    low, high = f"{bounds}_low", f"{bounds}_high"

    def held(x: Sequence[dict], y: Sequence[dict]) -> int:
        return sum(a[low] <= row_speedup(b) <= a[high] for a, b in zip(x, y, strict=True))

    return {
        "rows": len(first),
        "first_holds_second": held(first, second),
        "second_holds_first": held(second, first),
    }


def _log_se(row: dict) -> float:
    """A row's standard error on the log scale, from its 95% interval."""
    return math.log(row["speedup_high"] / row["speedup_low"]) / (2 * _Z95)


def between_run_variance(first: Sequence[dict], second: Sequence[dict]) -> float:
    """Run-to-run variance of log speed-up beyond what each run's own interval covers.

    Two runs of a row differ in log speed-up by d, with E[d²] = s₁² + s₂² + 2τ² when each
    run adds its own effect of variance τ² to its within-run error of variance s².
    Pooled over rows (method of moments, floored at 0): τ² = mean(d² − s₁² − s₂²) / 2.
    """
    _check_paired(first, second)
    excess = [
        math.log(row_speedup(a) / row_speedup(b)) ** 2 - _log_se(a) ** 2 - _log_se(b) ** 2
        for a, b in zip(first, second, strict=True)
    ]
    return max(0.0, statistics.fmean(excess) / 2)


def rerun_interval(row: dict, tau2: float) -> Estimate:
    """Where a rerun's point estimate should fall, from one run's row: the row's own error
    (twice: this run's and the rerun's, taken alike) plus the run-to-run term twice."""
    if tau2 < 0:
        raise ValueError(f"tau2 must be >= 0, got {tau2}")
    half = _Z95 * math.sqrt(2 * _log_se(row) ** 2 + 2 * tau2)
    v = row_speedup(row)
    return Estimate(v, v * math.exp(-half), v * math.exp(half))


def next_run_interval(first: dict, second: dict, tau2: float) -> Estimate:
    """Where a further run's value of a row should fall, from two runs of it: centred on the
    two runs' geometric mean, carrying that mean's error (both runs' own errors, and τ²/2
    for a mean of two) plus the further run's own: its within-run error (taken as the
    mean of the two runs') and its own run-to-run term τ²."""
    if tau2 < 0:
        raise ValueError(f"tau2 must be >= 0, got {tau2}")
    centre = (math.log(row_speedup(first)) + math.log(row_speedup(second))) / 2
    own = (_log_se(first) ** 2 + _log_se(second) ** 2) / 2
    half = _Z95 * math.sqrt(own / 2 + tau2 / 2 + own + tau2)
    return Estimate(math.exp(centre), math.exp(centre - half), math.exp(centre + half))


def next_run_coverage(runs: Sequence[Sequence[dict]]) -> dict[str, float]:
    """How often :func:`next_run_interval` from two runs holds a third run's value: for every
    pair of ``runs`` (each a list of rows, the same configurations in the same order; τ²
    from that pair's rows), every row of every other run. Needs three runs or more."""
    if len(runs) < 3 or any(len(r) != len(runs[0]) or not r for r in runs):
        raise ValueError("runs must hold three or more runs of the same, non-zero number of rows")
    held = checked = 0
    for i, j in itertools.combinations(range(len(runs)), 2):
        tau2 = between_run_variance(runs[i], runs[j])
        for k in (k for k in range(len(runs)) if k not in (i, j)):
            for a, b, c in zip(runs[i], runs[j], runs[k], strict=True):
                held += next_run_interval(a, b, tau2).holds(row_speedup(c))
                checked += 1
    return {"checked": checked, "held": held, "share": held / checked}
