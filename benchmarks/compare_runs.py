"""Do two runs of a benchmark agree? Rows, and above all verdicts.

    python benchmarks/compare_runs.py benchmarks/results/wall_clock.json \
        benchmarks/results/wall_clock_rerun.json
    python benchmarks/compare_runs.py benchmarks/results/batch_sweep.json \
        benchmarks/results/batch_sweep_rerun.json

Works on the results of ``wall_clock.py`` and ``batch_sweep.py``. It prints, in order:

* every row of both runs, and whether each run's 95% interval holds the other run's value;
* how often that happened each way, and the run-to-run variance those misses imply
  (:func:`~specdec_lib.analysis.replication.between_run_variance`), with the share of rows
  an interval that carries it holds (estimated out of sample, one workload left out);
* every verdict, one run against the other and what both resolve
  (:func:`~specdec_lib.analysis.replication.verdicts`): each best fixed k (``wall_clock``),
  each crossover (``batch_sweep``).

A verdict the two runs disagree on is printed as DIFFERENT. Exit status 1 if any verdict
differs between the runs; a row whose intervals miss each other is reported, not fatal.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from specdec_lib.analysis.replication import (
    cross_containment,
    crossover,
    rerun_coverage,
    verdicts,
)


def _key(row: dict) -> tuple:
    return (row["workload"], row.get("method", row.get("batch")))


def _interval(row: dict) -> tuple[float, float, float]:
    return row.get("speedup", row.get("speedup_median")), row["speedup_low"], row["speedup_high"]


def paired_rows(first: dict, second: dict) -> tuple[list[dict], list[dict]]:
    """The rows both runs hold, in the first run's order; plain decoding's own rows (1 by
    definition) left out."""
    rows2 = {_key(r): r for r in second["rows"]}
    keep = [r for r in first["rows"] if _key(r) in rows2 and r.get("drafter") != "none"]
    return keep, [rows2[_key(r)] for r in keep]


def differing_verdicts(first: dict, second: dict) -> list[str]:
    """Names of the verdicts on which the two runs, each read alone, disagree."""
    out = []
    for name, s1 in first.get("summary", {}).items():
        if name != "goals" and s1["best_k"] != second["summary"][name]["best_k"]:
            out.append(f"best k, {name}")
    for w in first.get("crossover", {}):
        one = crossover([r for r in first["rows"] if r["workload"] == w])
        two = crossover([r for r in second["rows"] if r["workload"] == w])
        if one["verdict"] != two["verdict"]:
            out.append(f"crossover, {w}")
    return out


def compare(first: dict, second: dict) -> int:
    """Print the comparison; return the number of verdicts that differ between the runs."""
    rows1, rows2 = paired_rows(first, second)
    for r, other in zip(rows1, rows2, strict=True):
        (v1, l1, h1), (v2, l2, h2) = _interval(r), _interval(other)
        held = ("holds" if l1 <= v2 <= h1 else "MISSES", "holds" if l2 <= v1 <= h2 else "MISSES")
        print(
            f"{r['workload']:10} {str(_key(r)[1]):18} {v1:6.2f} [{l1:5.2f}, {h1:5.2f}]   "
            f"{v2:6.2f} [{l2:5.2f}, {h2:5.2f}]   run 1's interval {held[0]} run 2's value, "
            f"run 2's {held[1]} run 1's"
        )
    held = cross_containment(rows1, rows2)
    print(
        f"\nrun 1's 95% interval holds run 2's value in {held['first_holds_second']} of "
        f"{held['rows']} rows; run 2's holds run 1's in {held['second_holds_first']}"
    )
    if len({r["workload"] for r in rows1}) > 1:
        cover = rerun_coverage(rows1, rows2)
        print(
            f"run-to-run standard deviation of log speed-up beyond the intervals: "
            f"{cover['tau2'] ** 0.5:.3f}; an interval carrying it (one workload left out) holds "
            f"the other run's value in {cover['first_holds_second']:.0%} / "
            f"{cover['second_holds_first']:.0%} of rows"
        )
    differ = differing_verdicts(first, second)
    for name, v in verdicts(first, second).items():
        if name.startswith("best k, "):
            s = name.removeprefix("best k, ")
            one, two = first["summary"][s], second["summary"][s]
            alone = f"run 1 k={one['best_k']}, run 2 k={two['best_k']}"
        else:
            w = name.removeprefix("crossover, ")
            alone = (
                f"run 1 {crossover([r for r in first['rows'] if r['workload'] == w])['verdict']}; "
                f"run 2 {crossover([r for r in second['rows'] if r['workload'] == w])['verdict']}"
            )
        same = "DIFFERENT" if name in differ else "same"
        print(f"{name}: {alone} ({same}); both runs: {v['verdict']}")
    print(f"{len(differ)} verdict(s) differ between the runs")
    return len(differ)


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    first, second = (json.loads(Path(p).read_text()) for p in sys.argv[1:])
    sys.exit(1 if compare(first, second) else 0)


if __name__ == "__main__":
    main()
