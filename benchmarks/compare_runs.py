"""Do two runs of a benchmark agree? Every paired interval, and every verdict.

    python benchmarks/compare_runs.py specdec_lib/results/wall_clock.json \
        specdec_lib/results/wall_clock_rerun.json
    python benchmarks/compare_runs.py specdec_lib/results/batch_sweep.json \
        specdec_lib/results/batch_sweep_rerun.json
    python benchmarks/compare_runs.py RUN1.json RUN2.json RUN3.json ...   # three or more runs

Works on the results of ``wall_clock.py``, ``batch_sweep.py``, ``smollm2_workloads.py``,
``trie_vs_chain.py``, ``serve_sweep.py`` and ``serve_shift.py`` (all but the first two have
only speed-up intervals to pair, and no verdict beyond them). It prints, in order:

* every paired interval both runs hold
  (:func:`run_summaries.paired_intervals`: each method or batch size
  against plain decoding and, from ``wall_clock.py``, each fixed k against the best, each
  adaptive policy's share of the best, the n-gram drafter against the draft model), and
  whether each run's 95% interval holds the other run's value;
* coverage: how often that happened each way; how often each run's stored rerun interval
  (``rerun_low``/``rerun_high``, :func:`run_summaries.paired_rerun_interval`)
  holds the other's value; how often a rerun interval built from one run's paired interval
  (:func:`~specdec_lib.analysis.replication.rerun_interval` with no run-to-run
  term: its own error counted for both runs) holds the other's value; and the run-to-run
  variance the misses imply, with the share an interval carrying it holds (estimated out of
  sample, one workload left out). The target of each rerun interval is 95%;
* every verdict, one run against the other and what both resolve
  (:func:`~specdec_lib.analysis.replication.verdicts`): each best fixed k and the faster
  drafter (``wall_clock``), each crossover (``batch_sweep``);
* for a batch sweep, each workload's crossover batch size B* with its interval, run by run
  (:func:`~specdec_lib.analysis.crossover.estimate_crossover`), and whether every run given
  agrees on it (:func:`~specdec_lib.analysis.crossover.agree_crossovers`).

Given three runs or more, it compares the first two as above, then reports how often two
runs pooled (:func:`~specdec_lib.analysis.replication.next_run_interval`) hold a third
run's value, over every pair and every other run
(:func:`~specdec_lib.analysis.replication.next_run_coverage`; target 95%).

A verdict the two runs disagree on is printed as DIFFERENT. Exit status 1 if any verdict
differs between the runs, or the runs do not agree on a workload's B*; an interval that
misses the other run's value is reported, not fatal.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from run_summaries import paired_intervals, rerun_coverage

from specdec_lib.analysis.crossover import agree_crossovers, estimate_crossover
from specdec_lib.analysis.replication import (
    cross_containment,
    crossover,
    next_run_coverage,
    rerun_interval,
    verdicts,
)


def common_rows(*results: dict) -> list[list[dict]]:
    """The paired intervals every run holds (:func:`paired_intervals`), in the first run's
    order, matched by key: one list per run."""
    keyed = [{r["key"]: r for r in paired_intervals(result)} for result in results]
    keys = [k for k in keyed[0] if all(k in other for other in keyed[1:])]
    return [[rows[k] for k in keys] for rows in keyed]


def paired_rows(first: dict, second: dict) -> tuple[list[dict], list[dict]]:
    """:func:`common_rows` of two runs."""
    rows1, rows2 = common_rows(first, second)
    return rows1, rows2


def _alone(result: dict, name: str) -> str:
    """What one run, read alone, says for the verdict called ``name``."""
    if name.startswith("best k, "):
        return f"k={result['summary'][name.removeprefix('best k, ')]['best_k']}"
    if name.startswith("drafter, "):
        e = result["ngram_over_draft"][name.removeprefix("drafter, ")]
        return f"n-gram over draft {e['value']:.2f} [{e['low']:.2f}, {e['high']:.2f}]"
    w = name.removeprefix("crossover, ")
    return crossover([r for r in result["rows"] if r["workload"] == w])["verdict"]


def differing_verdicts(first: dict, second: dict) -> list[str]:
    """Names of the verdicts on which the two runs, each read alone, disagree (a drafter
    comparison: when the runs resolve different sides, or one resolves and one does not)."""
    out = []
    for name in verdicts(first, second):
        if name.startswith("drafter, "):
            w = name.removeprefix("drafter, ")
            sides = [
                (r["ngram_over_draft"][w]["low"] > 1) - (r["ngram_over_draft"][w]["high"] < 1)
                for r in (first, second)
            ]
            if sides[0] != sides[1]:
                out.append(name)
        elif _alone(first, name) != _alone(second, name):
            out.append(name)
    return out


def print_coverage(rows1: list[dict], rows2: list[dict]) -> None:
    held = cross_containment(rows1, rows2)
    print(
        f"\nrun 1's 95% interval holds run 2's value in {held['first_holds_second']} of "
        f"{held['rows']} intervals; run 2's holds run 1's in {held['second_holds_first']}"
    )
    alone = [
        sum(rerun_interval(a, 0.0).holds(b["speedup"]) for a, b in zip(x, y, strict=True))
        for x, y in ((rows1, rows2), (rows2, rows1))
    ]
    n = len(rows1)
    print(
        f"a rerun interval from one run alone holds the other run's value in {alone[0]} / "
        f"{alone[1]} of {n} ({alone[0] / n:.0%} / {alone[1] / n:.0%}; target 95%)"
    )
    stored = [
        i
        for i, (a, b) in enumerate(zip(rows1, rows2, strict=True))
        if "rerun_low" in a and "rerun_low" in b
    ]
    if stored:
        held = cross_containment([rows1[i] for i in stored], [rows2[i] for i in stored], "rerun")
        print(
            f"each run's stored rerun interval (from the spread between its blocks) holds the "
            f"other run's value in {held['first_holds_second']} / {held['second_holds_first']} of "
            f"{held['rows']} ({held['first_holds_second'] / held['rows']:.0%} / "
            f"{held['second_holds_first'] / held['rows']:.0%}; target 95%)"
        )
    if len({r["workload"] for r in rows1}) > 1:
        cover = rerun_coverage(rows1, rows2)
        print(
            f"run-to-run standard deviation of log speed-up beyond the intervals: "
            f"{cover['tau2'] ** 0.5:.3f}; an interval carrying it (one workload left out) holds "
            f"the other run's value in {cover['first_holds_second']:.0%} / "
            f"{cover['second_holds_first']:.0%} of intervals"
        )


def compare(first: dict, second: dict) -> int:
    """Print the comparison; return the number of verdicts that differ between the runs."""
    rows1, rows2 = paired_rows(first, second)
    for a, b in zip(rows1, rows2, strict=True):
        held = [
            "holds" if x["speedup_low"] <= y["speedup"] <= x["speedup_high"] else "MISSES"
            for x, y in ((a, b), (b, a))
        ]
        print(
            f"{a['key']:34} {a['speedup']:6.2f} [{a['speedup_low']:5.2f}, {a['speedup_high']:5.2f}]"
            f"   {b['speedup']:6.2f} [{b['speedup_low']:5.2f}, {b['speedup_high']:5.2f}]   "
            f"run 1's interval {held[0]} run 2's value, run 2's {held[1]} run 1's"
        )
    print_coverage(rows1, rows2)
    differ = differing_verdicts(first, second)
    for name, v in verdicts(first, second).items():
        same = "DIFFERENT" if name in differ else "same"
        alone = f"run 1 {_alone(first, name)}; run 2 {_alone(second, name)}"
        print(f"{name}: {alone} ({same}); both runs: {v['verdict']}")
    print(f"{len(differ)} verdict(s) differ between the runs")
    return len(differ)


def print_crossover_estimates(*results: dict) -> int:
    """Each workload's B* in every run, and what all the runs agree on; returns the number
    of workloads whose runs do not agree."""
    disagree = 0
    for w in dict.fromkeys(r["workload"] for r in results[0]["rows"]):
        each = [
            estimate_crossover([r for r in result["rows"] if r["workload"] == w])
            for result in results
        ]
        runs = "; ".join(f"run {i} {e.describe()}" for i, e in enumerate(each, 1))
        together = agree_crossovers(each)
        disagree += not together["agree"]
        print(f"B*, {w}: {runs}; together: {together['verdict']}")
    return disagree


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    results = [json.loads(Path(p).read_text()) for p in sys.argv[1:]]
    differ = compare(*results[:2])
    if "crossover" in results[0]:
        differ += print_crossover_estimates(*results)
    if len(results) > 2:
        cover = next_run_coverage(common_rows(*results))
        print(
            f"two runs pooled hold a third run's value in {cover['held']} of {cover['checked']} "
            f"checks ({cover['share']:.0%}; target 95%)"
        )
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
