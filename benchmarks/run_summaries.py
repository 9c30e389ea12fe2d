"""What a timing benchmark's tables resolve, and the rows two of its runs are compared by.

The timing benchmarks (``wall_clock.py``, ``batch_sweep.py``, ``hf_wall_clock.py``) store
every timing; beside their rows they write what one run resolves, and
``compare_runs.py`` reads two runs back. The chapters read the verdicts two runs share
from the library (:mod:`specdec_lib.analysis.replication`); what only the benchmarks
compute from their own tables lives here, imported by the scripts as :mod:`harness` is.

* :func:`paired_rerun_interval`: where a rerun's paired speed-up should land, from the
  spread between blocks of repeats (every timed row's ``rerun_low``/``rerun_high``).
* :func:`best_fixed_k`, :func:`drafter_comparison`: ``wall_clock.py``'s ``summary`` (the
  best fixed k, every k and adaptive policy against it) and ``ngram_over_draft``.
* :func:`paired_intervals`, :func:`rerun_coverage`: every paired interval of a result as
  a row, and how often one run's rerun interval holds the other run's value.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from scipy.stats import t as student

from specdec_lib.analysis.intervals import Estimate, blocks_of, median_speedup, paired_speedup
from specdec_lib.analysis.replication import between_run_variance, rerun_interval, row_speedup

from harness import interval


def paired_rerun_interval(
    base: Sequence[Sequence[float]], method: Sequence[Sequence[float]], blocks: int | None = None
) -> Estimate:
    """Where a rerun's ``paired_speedup`` of the same prompts should fall, from this run.

    Each block of repeats (``blocks_of``; ``blocks=None``: every repeat its own block)
    gives its own speed-up, total over prompts of each prompt's median in the block, base /
    method. Blocks spread over the run sample the machine's state at different times; if a
    rerun draws its blocks from the same states, this run's and the rerun's log speed-ups
    each average ``n`` such draws, and their difference has standard deviation s·√(2/n),
    s the blocks' standard deviation. The interval is this run's value times
    exp(±t·s·√(2/n)), t the Student quantile with n − 1 degrees of freedom (few blocks
    widen it, as they should). It holds a rerun's value at 95% only as far as the blocks'
    spread represents the spread between runs; compare two runs to find out
    (:mod:`specdec_lib.analysis.replication`).
    """
    ratio = median_speedup(base, method)  # checks the tables' shapes
    n_r = len(base[0])
    groups = blocks_of(n_r, n_r if blocks is None else blocks)
    if len(groups) < 2:
        raise ValueError(f"blocks must be >= 2 to measure a spread between blocks, got {blocks}")

    def log_ratio(reps: Sequence[int]) -> float:
        return math.log(ratio(range(len(base)), reps))

    centre, n = log_ratio(range(n_r)), len(groups)
    half = student.ppf(0.975, n - 1) * statistics.stdev(map(log_ratio, groups))
    half *= math.sqrt(2 / n)
    return Estimate(math.exp(centre), math.exp(centre - half), math.exp(centre + half))


def best_fixed_k(rows: Sequence[dict], times: dict, blocks: int | None = None) -> dict[str, dict]:
    """``wall_clock.py``'s verdicts of one run, per ``"<scenario> <drafter>"``: the best fixed
    k (highest point estimate), every fixed k's paired interval against it (time(k) /
    time(best) over the same prompts and blocks of repeats, ``vs_best``), the ks whose
    interval holds 1 (``ks_not_resolved_from_best``, the best included), and for each
    adaptive policy its speed-up and its paired share of the best (time(best) / time(policy)).
    ``times[scenario][method]`` is a prompts x repeats table of seconds."""
    out: dict[str, dict] = {}
    for w, d in dict.fromkeys(
        (r["workload"], r["drafter"]) for r in rows if r["drafter"] != "none"
    ):
        mine = [r for r in rows if r["workload"] == w and r["drafter"] == d]
        best = max((r for r in mine if not r["adaptive"]), key=lambda r: r["speedup"])
        t, top = times[w], times[w][best["method"]]
        vs = {
            r["k"]: paired_speedup(t[r["method"]], top, blocks=blocks)
            for r in mine
            if not r["adaptive"]
        }
        entry = {"best_k": best["k"], "speedup": best["speedup"], "low": best["speedup_low"]}
        entry.update(
            high=best["speedup_high"],
            vs_best={str(k): interval(e, digits=None) for k, e in vs.items()},
        )
        entry["ks_not_resolved_from_best"] = [k for k, e in vs.items() if e.holds(1.0)]
        for r in (r for r in mine if r["adaptive"]):
            share = paired_speedup(top, t[r["method"]], blocks=blocks)
            entry[r["method"].split(" ", 1)[1]] = {
                "speedup": r["speedup"],
                "low": r["speedup_low"],
                "high": r["speedup_high"],
                "share_of_best": share.value,
                "share_low": share.low,
                "share_high": share.high,
            }
        out[f"{w} {d}"] = entry
    return out


def drafter_comparison(summary: dict, times: dict, blocks: int | None = None) -> dict:
    """Per scenario of a :func:`best_fixed_k` summary, the paired interval of time(the draft
    model's best k) / time(the n-gram drafter's best k): above 1, the n-gram drafter ran
    faster. Methods are named ``"<drafter> k=<k>"`` as in ``wall_clock.py``."""
    out = {}
    for w in dict.fromkeys(name.rsplit(" ", 1)[0] for name in summary if name != "goals"):
        draft, ngram = (f"{d} k={summary[f'{w} {d}']['best_k']}" for d in ("draft", "ngram"))
        out[w] = interval(
            paired_speedup(times[w][draft], times[w][ngram], blocks=blocks), digits=None
        )
    return out


def paired_intervals(result: dict) -> list[dict]:
    """Every paired interval of a result as a row (``workload``, ``key``, ``speedup``,
    ``speedup_low``, ``speedup_high``): its rows against plain decoding (plain's own left
    out; with ``rerun_low``/``rerun_high`` where the result has them), and, from
    ``wall_clock.py``, each fixed k against the best, each adaptive policy's
    share of the best and the n-gram drafter against the draft model. Two runs' lists pair
    up by ``key`` (``cross_containment`` takes them in the same order)."""

    def row(w: str, key: str, v: float, low: float, high: float) -> dict:
        return {"workload": w, "key": key, "speedup": v, "speedup_low": low, "speedup_high": high}

    out = []
    if "ratios" in result:  # a server benchmark: one policy over another, per cell
        for r in result["ratios"]:
            w, rate = r.get("mix", ""), f"{r['rate']}/s " if "rate" in r else ""
            name = f"{w} {rate}{r['policy']} over {r.get('over', 'off')}".strip()
            out.append(row(w, name, r["ratio"], r["low"], r["high"]))
        return out
    for r in result["rows"]:
        if "over" in r:  # a method over another, as trie_vs_chain.py writes its rows
            e, w = r["speedup"], result.get("workload", "")
            name = f"{w} {r['method']} over {r['over']}"
            out.append(row(w, name, e["value"], e["low"], e["high"]))
        elif r.get("drafter") != "none":
            name = f"{r['workload']} {r.get('method', r.get('batch'))} vs plain"
            out.append(
                row(r["workload"], name, row_speedup(r), r["speedup_low"], r["speedup_high"])
            )
            out[-1].update({k: r[k] for k in ("rerun_low", "rerun_high") if k in r})
    for name, s in result.get("summary", {}).items():
        w = name.rsplit(" ", 1)[0]
        for k, e in s.get("vs_best", {}).items():
            if int(k) != s["best_k"]:
                out.append(row(w, f"{name} k={k} vs best", e["value"], e["low"], e["high"]))
        for p in ("+2/-1", "cost-aware"):
            if "share_low" in s.get(p, {}):
                e = s[p]
                out.append(
                    row(w, f"{name} {p} share", e["share_of_best"], e["share_low"], e["share_high"])
                )
    for w, e in result.get("ngram_over_draft", {}).items():
        out.append(row(w, f"{w} n-gram over draft", e["value"], e["low"], e["high"]))
    return out


def rerun_coverage(first: Sequence[dict], second: Sequence[dict]) -> dict[str, float]:
    """How often ``rerun_interval`` from one run holds the other run's value, out of
    sample: for the rows of each workload, τ² is estimated from the other workloads' rows
    only. Returns the pooled τ² (all rows), the share of rows held each way, and the count."""
    if len(first) != len(second) or not first:
        raise ValueError("first and second must hold the same, non-zero number of rows")
    workloads = list(dict.fromkeys(r["workload"] for r in first))
    if len(workloads) < 2:
        raise ValueError("rerun_coverage needs rows of at least two workloads")
    held = [0, 0]
    for w in workloads:
        mine = [i for i, r in enumerate(first) if r["workload"] == w]
        rest = [i for i, r in enumerate(first) if r["workload"] != w]
        tau2 = between_run_variance([first[i] for i in rest], [second[i] for i in rest])
        for i in mine:
            for side, (a, b) in enumerate(((first[i], second[i]), (second[i], first[i]))):
                est = rerun_interval(a, tau2)
                held[side] += est.low <= row_speedup(b) <= est.high
    n = len(first)
    return {
        "tau2": between_run_variance(first, second),
        "rows": n,
        "first_holds_second": held[0] / n,
        "second_holds_first": held[1] / n,
    }
