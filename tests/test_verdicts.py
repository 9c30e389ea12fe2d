"""Verdicts (a best k, a crossover) are claimed only where two runs resolve them.

The chapters glue their verdicts into the prose; ``benchmarks/compare_runs.py`` reads the
same two stored runs. These tests fail when a chapter's stored glue says something the
two runs do not both resolve, and check the verdict logic itself on small made-up runs.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import sys
from pathlib import Path

import pytest
from run_summaries import drafter_comparison, paired_intervals, rerun_coverage

from specdec_lib.analysis.replication import (
    agreed_best_k,
    agreed_crossover,
    agreed_ratio,
    between_run_variance,
    cross_containment,
    crossover,
    next_run_coverage,
    next_run_interval,
    rerun_interval,
    speedup_verdict,
    verdicts,
)
from specdec_lib.analysis.results import RESULTS_DIR

ROOT = Path(__file__).resolve().parents[1]
RESULTS = RESULTS_DIR


def _compare_runs():
    spec = importlib.util.spec_from_file_location(
        "compare_runs", ROOT / "benchmarks" / "compare_runs.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _pair(name: str) -> tuple[dict, dict]:
    return tuple(json.loads((RESULTS / f"{n}.json").read_text()) for n in (name, f"{name}_rerun"))


def _runs(name: str) -> tuple[dict, ...]:
    """Every stored run of a benchmark: the run, its rerun, and a third run if there is one."""
    names = [name, f"{name}_rerun", f"{name}_run3"]
    return tuple(
        json.loads((RESULTS / f"{n}.json").read_text())
        for n in names
        if (RESULTS / f"{n}.json").exists()
    )


def _verdicts(bench: str) -> dict[str, dict]:
    """What the chapters may claim: chapter 9 reads two runs, chapter 10 every batch sweep."""
    if bench != "batch_sweep":
        return verdicts(*_pair(bench))
    runs = _runs(bench)
    workloads = dict.fromkeys(r["workload"] for r in runs[0]["rows"])
    return {f"crossover, {w}": agreed_crossover(runs[0], runs[1], w, *runs[2:]) for w in workloads}


def glued(notebook: str) -> dict[str, object]:
    """Every value a notebook's stored outputs glue, by name."""
    nb = json.loads((ROOT / "chapters" / notebook).read_text())
    out = {}
    for cell in nb["cells"]:
        for o in cell.get("outputs", []):
            name = o.get("metadata", {}).get("scrapbook", {}).get("name")
            if name is not None:
                out[name] = ast.literal_eval(o["data"]["application/papermill.record/text/plain"])
    return out


# glue name -> (benchmark, verdict name, field of the verdict it must equal)
CHAPTER_9 = {
    "copy_best_k": ("wall_clock", "best k, copy ngram", "point_k"),
    "greedy_ngram_k": ("wall_clock", "best k, novel ngram", "point_k"),
    "greedy_draft_k": ("wall_clock", "best k, novel draft", "point_k"),
    "novel_best_k": ("wall_clock", "best k, novel T=1 ngram", "point_k"),
    "draft_novel_k": ("wall_clock", "best k, novel T=1 draft", "point_k"),
    "draft_copy_k": ("wall_clock", "best k, copy draft", "point_k"),
    **{
        f"bestk_{s.replace(' ', '_').replace('=', '')}_{d}": (
            "wall_clock",
            f"best k, {s} {d}",
            "verdict",
        )
        for s in ("copy", "novel", "novel T=1")
        for d in ("ngram", "draft")
    },
}
CHAPTER_10 = {
    "cross_copy": ("batch_sweep", "crossover, copy", "verdict"),
    "cross_edit": ("batch_sweep", "crossover, edit", "verdict"),
    "cross_answer": ("batch_sweep", "crossover, answer", "verdict"),
    "cross_novel_greedy": ("batch_sweep", "crossover, novel", "verdict"),
    "cross_novel_t1": ("batch_sweep", "crossover, novel T=1", "verdict"),
}


@pytest.mark.parametrize(
    ("notebook", "mapping"),
    [("09_does_it_pay.ipynb", CHAPTER_9), ("10_when_it_does_not_pay.ipynb", CHAPTER_10)],
)
def test_every_glued_verdict_is_what_both_stored_runs_resolve(notebook, mapping):
    values = glued(notebook)
    for glue_name, (bench, verdict_name, field) in mapping.items():
        expected = _verdicts(bench)[verdict_name][field]
        if expected is None:  # the two runs do not agree: the chapter must not name one
            assert glue_name not in values, (
                f"{notebook} glues {glue_name}, which the runs do not agree on"
            )
        else:
            assert glue_name in values, f"{notebook} should glue {glue_name}"
            assert values[glue_name] == expected, f"{notebook}: {glue_name} = {values[glue_name]!r}"


def test_chapter_10_glues_the_smallest_batch_every_run_finds_greedy_novel_slower_at():
    values = glued("10_when_it_does_not_pay.ipynb")
    slower = _verdicts("batch_sweep")["crossover, novel"]["slower_at"]
    n = len(_runs("batch_sweep"))
    every = "both runs" if n == 2 else f"all {['', '', 'two', 'three', 'four'][n]} runs"
    batches = sorted({r["batch"] for r in _runs("batch_sweep")[0]["rows"]})
    if not slower:
        expected = f"at no batch size in {every}"
    elif slower == [b for b in batches if b >= min(slower)]:
        expected = f"from batch {min(slower)} on, in {every}"
    else:
        expected = f"at B = {', '.join(map(str, slower))}, in {every}"
    assert values["novel_slower_from"] == expected


def _row(workload, batch, low, high, value=None):
    value = (low + high) / 2 if value is None else value
    return {
        "workload": workload,
        "batch": batch,
        "speedup_median": value,
        "speedup_low": low,
        "speedup_high": high,
    }


def _sweep(rows):
    result = {"rows": rows}
    result["crossover"] = {
        w: crossover([r for r in rows if r["workload"] == w]) for w in {r["workload"] for r in rows}
    }
    return result


def test_a_crossover_that_moves_between_runs_is_a_differing_verdict_though_every_row_overlaps():
    first = _sweep([_row("w", 1, 0.90, 0.99), _row("w", 2, 0.80, 0.95)])
    second = _sweep([_row("w", 1, 0.95, 1.05), _row("w", 2, 0.81, 0.96)])
    compare = _compare_runs()
    assert compare.differing_verdicts(first, second) == ["crossover, w"]
    both = agreed_crossover(first, second, "w")
    assert both["slower_at"] == [2] and both["not_resolved_at"] == [1]
    assert compare.compare(first, second) == 1


def test_a_crossover_is_agreed_only_where_every_run_resolves_it():
    first = _sweep([_row("w", 1, 1.1, 1.3), _row("w", 2, 0.80, 0.95), _row("w", 4, 0.7, 0.9)])
    second = _sweep([_row("w", 1, 1.2, 1.4), _row("w", 2, 0.81, 0.96), _row("w", 4, 0.6, 0.8)])
    third = _sweep([_row("w", 1, 1.05, 1.2), _row("w", 2, 0.9, 1.1), _row("w", 4, 0.7, 0.9)])
    two = agreed_crossover(first, second, "w")
    assert (two["faster_at"], two["slower_at"]) == ([1], [2, 4])
    three = agreed_crossover(first, second, "w", third)
    assert (three["faster_at"], three["slower_at"], three["not_resolved_at"]) == ([1], [4], [2])
    assert three["verdict"] == (
        "faster in all 3 runs at B = 1; slower in all 3 runs at B = 4; "
        "no verdict shared by all 3 runs at B = 2"
    )


def test_compare_runs_reports_every_verdict_of_the_stored_sweeps(capsys):
    first, second = _pair("batch_sweep")
    differing = _compare_runs().differing_verdicts(first, second)
    assert _compare_runs().compare(first, second) == len(differing)
    out = capsys.readouterr().out
    for w in ("copy", "novel", "novel T=1"):
        assert f"crossover, {w}:" in out
    assert ("DIFFERENT" in out) == bool(differing)


def test_a_best_k_is_resolved_only_when_both_runs_name_it_and_neither_ties_another():
    alone = {"best_k": 16, "ks_not_resolved_from_best": [16]}
    tied = {"best_k": 16, "ks_not_resolved_from_best": [12, 16]}
    other = {"best_k": 12, "ks_not_resolved_from_best": [12]}
    assert agreed_best_k(alone, alone)["resolved_k"] == 16
    assert agreed_best_k(alone, tied) == {
        "resolved_k": None,
        "point_k": 16,
        "verdict": "k = 16 has the highest point estimate in both runs, "
        "but is not resolved from k = 12",
    }
    assert agreed_best_k(alone, other)["point_k"] is None


def test_the_largest_k_tried_is_never_called_the_best():
    grid = {str(k): {} for k in (1, 2, 4, 8, 16)}
    edge = {"best_k": 16, "ks_not_resolved_from_best": [16], "vs_best": grid}
    inside = {"best_k": 8, "ks_not_resolved_from_best": [8], "vs_best": grid}
    verdict = agreed_best_k(edge, edge)
    assert verdict["resolved_k"] is None and verdict["point_k"] == 16
    assert "largest k tried" in verdict["verdict"] and "beyond the grid" in verdict["verdict"]
    assert agreed_best_k(inside, inside)["resolved_k"] == 8


def test_speedup_verdict_reads_an_interval_against_one_and_refuses_a_reversed_one():
    assert [speedup_verdict(*i) for i in ((1.1, 1.2), (0.8, 0.9), (0.9, 1.1))] == [
        "faster",
        "slower",
        "not resolved",
    ]
    with pytest.raises(ValueError, match="low"):
        speedup_verdict(1.2, 1.1)


def test_cross_containment_counts_each_direction():
    first = [_row("a", 1, 1.0, 2.0, 1.5), _row("a", 2, 1.0, 1.2, 1.1)]
    second = [_row("a", 1, 1.4, 1.6, 1.5), _row("a", 2, 1.25, 1.35, 1.3)]
    assert cross_containment(first, second) == {
        "rows": 2,
        "first_holds_second": 1,
        "second_holds_first": 1,
    }


def test_between_run_variance_is_zero_when_runs_differ_less_than_their_intervals_say():
    rows = [_row("a", b, 0.9, 1.1, 1.0) for b in (1, 2, 3)]
    assert between_run_variance(rows, rows) == 0.0


def test_between_run_variance_grows_with_the_gap_and_widens_the_intervals():
    first = [_row("a", b, 0.99, 1.01, 1.0) for b in (1, 2)] + [_row("b", 1, 0.99, 1.01, 1.0)]
    second = [_row("a", b, 1.19, 1.21, 1.2) for b in (1, 2)] + [_row("b", 1, 1.19, 1.21, 1.2)]
    tau2 = between_run_variance(first, second)
    assert tau2 > 0.01
    wide = rerun_interval(first[0], tau2)
    assert wide.low < 0.99 and wide.high > 1.2  # holds the other run's value now
    assert rerun_coverage(first, second)["first_holds_second"] == 1.0
    with pytest.raises(ValueError, match="tau2"):
        rerun_interval(first[0], -1.0)


def _benchmark(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # a dataclass resolves its annotations through it
    spec.loader.exec_module(module)
    return module


def _wall_clock():
    return _benchmark("wall_clock")


def _timed_result(slow_k2: float) -> dict:
    """A made-up wall_clock result: 3 prompts x 4 repeats per method, k=1 against k=2."""
    rows, times = [], {}
    for w in ("copy", "novel", "novel T=1"):
        times[w] = {"plain": [[1.0, 1.02, 0.98, 1.0]] * 3}
        for d in ("ngram", "draft"):
            for name, k, t in ((f"{d} k=1", 1, 0.5), (f"{d} k=2", 2, 0.5 * slow_k2)):
                times[w][name] = [[t, t * 1.01, t * 0.99, t]] * 3
                rows.append(
                    {
                        "workload": w,
                        "method": name,
                        "drafter": d,
                        "k": k,
                        "adaptive": False,
                        "speedup": 1 / t,
                        "speedup_low": 0.9 / t,
                        "speedup_high": 1.1 / t,
                    }
                )
            for name in (f"{d} +2/-1", f"{d} cost-aware"):
                times[w][name] = [[0.6, 0.61, 0.59, 0.6]] * 3
                rows.append(
                    {
                        "workload": w,
                        "method": name,
                        "drafter": d,
                        "k": 4,
                        "adaptive": True,
                        "speedup": 1.5,
                        "speedup_low": 1.4,
                        "speedup_high": 1.6,
                    }
                )
    return {"rows": rows, "times": times, "blocks": 2}


def test_wall_clock_ties_the_best_k_by_the_paired_interval_when_timings_are_stored():
    summarise = _wall_clock().summarise
    apart = summarise(_timed_result(slow_k2=1.05))["copy ngram"]
    # the two marginal intervals overlap (0.9/0.5 .. 1.1/0.5 against 0.9/0.525 ..), yet
    # the paired ratio of k=2 to k=1 is 1.05 in every prompt and repeat: resolved
    assert apart["best_k"] == 1 and apart["ks_not_resolved_from_best"] == [1]
    assert apart["vs_best"]["2"]["low"] == pytest.approx(1.05)
    # an adaptive policy's share of the best is a paired ratio too: 0.5 s against 0.6 s
    assert apart["+2/-1"]["share_of_best"] == pytest.approx(0.5 / 0.6)
    assert apart["+2/-1"]["share_high"] < 1.0
    same = summarise(_timed_result(slow_k2=1.0))["copy ngram"]
    assert sorted(same["ks_not_resolved_from_best"]) == [1, 2]


def test_the_faster_drafter_is_a_paired_verdict_that_both_runs_must_resolve():
    result = _timed_result(slow_k2=1.05)
    summary = _wall_clock().summarise(result)
    both = drafter_comparison(summary, result["times"], blocks=2)
    # both drafters' best is k = 1 at 0.5 s in every prompt and repeat: a ratio of exactly 1
    assert both["copy"]["value"] == pytest.approx(1.0) and both["copy"]["low"] <= 1.0
    faster, unsure = (
        {"value": 1.3, "low": 1.1, "high": 1.5},
        {"value": 1.1, "low": 0.9, "high": 1.3},
    )
    assert agreed_ratio(faster, faster, "a", "b")["resolved"] == "a"
    assert agreed_ratio(faster, unsure, "a", "b")["resolved"] is None
    first = {"rows": [], "ngram_over_draft": {"w": faster}}
    second = {"rows": [], "ngram_over_draft": {"w": unsure}}
    assert _compare_runs().differing_verdicts(first, second) == ["drafter, w"]


def test_paired_intervals_list_every_comparison_and_containment_reads_either_interval():
    result = _timed_result(slow_k2=1.05)
    result["summary"] = _wall_clock().summarise(result)
    result["ngram_over_draft"] = drafter_comparison(result["summary"], result["times"], 2)
    keys = [r["key"] for r in paired_intervals(result)]
    assert "copy ngram k=1 vs plain" in keys and "copy ngram k=2 vs best" in keys
    assert "copy ngram +2/-1 share" in keys and "copy n-gram over draft" in keys
    assert "copy ngram k=1 vs best" not in keys  # the best against itself is no comparison
    a = [_row("a", 1, 1.0, 2.0, 1.5) | {"rerun_low": 1.4, "rerun_high": 1.45}]
    b = [_row("a", 1, 1.4, 1.6, 1.5) | {"rerun_low": 1.0, "rerun_high": 2.0}]
    assert cross_containment(a, b, "rerun") == {
        "rows": 1,
        "first_holds_second": 0,
        "second_holds_first": 1,
    }
    with pytest.raises(ValueError, match="bounds"):
        cross_containment(a, b, "range")


@pytest.mark.parametrize("name", ["wall_clock", "batch_sweep"])
def test_the_benchmarks_quick_check_needs_its_own_output_and_blocks_need_a_spread(name, capsys):
    parse = _benchmark(name).benchmark().parse
    with pytest.raises(SystemExit):
        parse(["--small"])  # would overwrite the committed results
    assert "--small needs --out" in capsys.readouterr().err
    small = parse(["--small", "--out", "/tmp/x.json"])
    assert small.repeats == small.blocks == 4
    assert parse([]).blocks == parse([]).repeats  # by default every repeat is its own block
    with pytest.raises(SystemExit):
        parse(["--blocks", "1"])  # one block has no spread to measure


def test_two_runs_pooled_predict_a_third_with_its_own_error_and_run_term():
    one, two = _row("a", 1, 0.99, 1.01, 1.0), _row("a", 1, 1.19, 1.21, 1.2)
    quiet = next_run_interval(one, two, tau2=0.0)
    assert quiet.value == pytest.approx(1.2**0.5)
    wide = next_run_interval(one, two, tau2=0.01)
    assert wide.low < quiet.low and wide.high > quiet.high  # the third run's run term
    # three runs that differ by a run effect: pooling any two predicts the third
    runs = [[_row(w, 1, v * 0.98, v * 1.02, v) for w in "ab"] for v in (1.0, 1.2, 1.1)]
    cover = next_run_coverage(runs)
    assert cover["checked"] == 6 and cover["share"] == 1.0
    with pytest.raises(ValueError, match="three"):
        next_run_coverage(runs[:2])
    with pytest.raises(ValueError, match="tau2"):
        next_run_interval(one, two, -0.1)
