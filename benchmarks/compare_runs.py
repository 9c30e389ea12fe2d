"""Do two runs of a benchmark agree? Every row's interval is set against the other run's.

    python benchmarks/compare_runs.py benchmarks/results/wall_clock.json \
        benchmarks/results/wall_clock_rerun.json

Works on the results of ``wall_clock.py`` and ``batch_sweep.py``. Two runs agree on a row
when their 95% intervals overlap; the script lists every row, counts the ones that do
not overlap, and (for ``wall_clock.py``) says whether each best fixed k is the same in
both runs or, if not, whether each run's best lies inside the other's set of ks it
cannot tell apart from its best. Exit status 1 if any row disagrees.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _key(row: dict) -> tuple:
    return (row["workload"], row.get("method", row.get("batch")))


def _interval(row: dict) -> tuple[float, float, float]:
    value = row.get("speedup", row.get("speedup_median"))
    return value, row["speedup_low"], row["speedup_high"]


def compare(first: dict, second: dict) -> int:
    rows2 = {_key(r): r for r in second["rows"]}
    disagree = 0
    for r in first["rows"]:
        other = rows2.get(_key(r))
        if other is None:
            continue
        (v1, l1, h1), (v2, l2, h2) = _interval(r), _interval(other)
        overlap = l1 <= h2 and l2 <= h1
        disagree += not overlap
        print(
            f"{r['workload']:10} {str(_key(r)[1]):18} {v1:6.2f} [{l1:5.2f}, {h1:5.2f}]   "
            f"{v2:6.2f} [{l2:5.2f}, {h2:5.2f}]   {'agree' if overlap else 'DISAGREE'}"
        )
    for name, s1 in first.get("summary", {}).items():
        if name == "goals":
            print("goals, run 1:", s1, "\ngoals, run 2:", second["summary"]["goals"])
            continue
        s2 = second["summary"][name]
        same = s1["best_k"] == s2["best_k"]
        within = s1["best_k"] in s2["ks_not_resolved_from_best"] and (
            s2["best_k"] in s1["ks_not_resolved_from_best"]
        )
        verdict = "same" if same else "each within the other's ties" if within else "DIFFERENT"
        print(f"best fixed k, {name}: run 1 k={s1['best_k']}, run 2 k={s2['best_k']} ({verdict})")
    for w, c in first.get("crossover", {}).items():
        print(f"crossover, {w}: run 1 {c['verdict']}; run 2 {second['crossover'][w]['verdict']}")
    print(f"{disagree} row(s) disagree")
    return disagree


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    first, second = (json.loads(Path(p).read_text()) for p in sys.argv[1:])
    sys.exit(1 if compare(first, second) else 0)


if __name__ == "__main__":
    main()
