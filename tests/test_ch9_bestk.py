"""Chapter 9's best k per workload: what two runs leave in contention, and the grid's edge;
and the round logs it prices for adaptive policies started alike.

A best k is claimed only where both runs resolve it; where they do not, the chapter says
which ks are still in contention, and the largest k tried is never called the best.
"""

from __future__ import annotations

import pytest

from specdec_lib import (
    NgramDrafter,
    SamplingParams,
    Tokenizer,
    generate,
    load_model,
    workload_prompts,
)
from specdec_lib.analysis.costs import request_logs
from specdec_lib.analysis.replication import agreed_best_k, best_k_candidates
from specdec_lib.engine.generate import AdaptiveK

GRID = {str(k): {} for k in (1, 2, 4, 8, 16)}


def _entry(best: int, ties: list[int]) -> dict:
    return {"best_k": best, "ks_not_resolved_from_best": sorted({best, *ties}), "vs_best": GRID}


def test_candidates_are_both_bests_and_every_k_either_run_ties_to_its_best():
    assert best_k_candidates(_entry(4, [2]), _entry(8, [16])) == [2, 4, 8, 16]
    assert best_k_candidates(_entry(4, []), _entry(4, [])) == [4]


def test_runs_that_name_different_bests_list_what_they_leave_in_contention():
    verdict = agreed_best_k(_entry(4, [2]), _entry(8, [4]))
    assert verdict["resolved_k"] is None and verdict["point_k"] is None
    assert verdict["verdict"].endswith("leave k = 2, 4, 8 in contention")


def test_a_tie_with_the_largest_k_tried_says_the_best_may_lie_beyond_the_grid():
    tied_at_edge = agreed_best_k(_entry(8, [16]), _entry(8, []))
    assert tied_at_edge["resolved_k"] is None and tied_at_edge["point_k"] == 8
    assert "not resolved from k = 16" in tied_at_edge["verdict"]
    assert tied_at_edge["verdict"].endswith("so the best k may lie beyond the grid")
    apart = agreed_best_k(_entry(4, [16]), _entry(16, [8]))
    assert "beyond the grid" in apart["verdict"]
    inside = agreed_best_k(_entry(4, [2]), _entry(4, [8]))
    assert "beyond the grid" not in inside["verdict"]


def test_a_best_k_away_from_the_edge_that_both_runs_resolve_is_named():
    assert agreed_best_k(_entry(4, []), _entry(4, [])) == {
        "resolved_k": 4,
        "point_k": 4,
        "verdict": "k = 4, resolved by both runs",
    }


def test_candidates_refuse_something_that_is_not_a_summary_entry():
    with pytest.raises(ValueError, match="first and second"):
        best_k_candidates({"best_k": 4}, _entry(4, []))


def test_request_logs_reproduce_the_counts_and_refuse_output_that_differs_from_greedy():

    target, tok = load_model("target"), Tokenizer()
    prompts = [tok.encode(p) for p in workload_prompts("copy", 2, seed=3)]
    params = SamplingParams(max_tokens=12)
    plain = [generate(target, ids, params) for ids in prompts]
    logs = request_logs(target, NgramDrafter, prompts, params, 4, AdaptiveK(1, 16), plain)
    assert [q["emitted"] for q in logs] == [12, 12]
    assert all(sum(q["accepted"]) + len(q["accepted"]) == 12 for q in logs)
    assert all(q["ks"][0] == 4 for q in logs)  # every request starts where it was told
    with pytest.raises(AssertionError, match="prompt 1"):
        request_logs(target, NgramDrafter, prompts, params, 4, greedy=[plain[0], plain[0]])
    with pytest.raises(ValueError, match="greedy"):
        request_logs(target, NgramDrafter, prompts, params, 4, greedy=plain[:1])
