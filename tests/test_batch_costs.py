"""The batch-cost helpers of chapters 9 and 10: a pass modelled in B and T, a batch
replayed from its requests' counts, and a cost model that predicts another run."""

from __future__ import annotations

import json

import pytest

from specdec_lib import RoundRecord, SpeculationStats
from specdec_lib.analysis.costs import (
    fit_batch_pass_cost,
    predict_other_run,
    predicted_speedup,
    unit_costs_from_result,
)
from specdec_lib.analysis.results import RESULTS_DIR as RESULTS
from specdec_lib.analysis.runs import batch_round_profile
from specdec_lib.analysis.timing import Timing


def _stats(proposal_lengths: list[int]) -> SpeculationStats:
    s = SpeculationStats()
    for m in proposal_lengths:
        s.record(RoundRecord(list(range(m)), m, list(range(m + 1))), 0)
    return s


def test_a_batch_runs_its_slowest_requests_rounds_and_pads_every_row_to_the_widest():
    prof = batch_round_profile([_stats([4, 4, 4]), _stats([4, 0])])
    assert prof["rounds"] == [3, 2] and prof["passes"] == 3
    assert prof["active"] == [2, 2, 1]
    assert prof["carried"] == [10, 10, 10]  # two rows, each 1 + the pass's longest proposal
    assert prof["used"] == [10, 6, 5]


def test_batch_round_profile_refuses_an_empty_request():
    with pytest.raises(ValueError, match="alone"):
        batch_round_profile([_stats([4]), SpeculationStats()])


def test_fit_batch_pass_cost_recovers_a_fixed_a_per_request_and_a_per_position_cost():
    truth = (2e-3, 4e-4, 5e-5)
    cells = [(b, t) for b in (1, 4, 16, 64) for t in (1, 4, 5)]
    timings = {}
    for b, t in cells:
        y = truth[0] + truth[1] * b + truth[2] * b * t
        timings[b, t] = Timing(y, y, y, 1)
    fit = fit_batch_pass_cost(timings)
    assert (fit.fixed, fit.per_sequence, fit.per_position) == pytest.approx(truth, rel=1e-6)
    assert fit.predict(64, 1) > fit.predict(16, 4)  # the same 64 positions, more requests
    with pytest.raises(ValueError, match="timings"):
        fit_batch_pass_cost({(1, 1): timings[1, 1]})


def test_one_runs_unit_costs_reproduce_its_own_predictions_from_the_round_logs():
    wall = json.loads((RESULTS / "wall_clock.json").read_text())
    counts = json.loads((RESULTS / "wall_clock_counts.json").read_text())
    stored = {
        (r["workload"], r["method"]): r["predicted_speedup"]
        for r in wall["rows"]
        if "predicted_speedup" in r
    }
    rows = predict_other_run(wall["unit_costs"], wall, counts)
    assert len(rows) == 70  # 5 scenarios x 14 methods with round logs (fixed k, +2/-1)
    assert all(
        p["model"] == pytest.approx(stored[p["workload"], p["method"]], rel=1e-12) for p in rows
    )


def test_unit_costs_and_predictions_refuse_what_they_cannot_use():
    wall = json.loads((RESULTS / "wall_clock.json").read_text())
    units = dict(wall["unit_costs"])
    del units["lookup_s"]
    with pytest.raises(ValueError, match="lookup_s"):
        unit_costs_from_result(units)
    costs = unit_costs_from_result(wall["unit_costs"])
    request = {"proposal_lengths": [4], "draft_passes": 0}
    with pytest.raises(ValueError, match="drafter"):
        predicted_speedup(costs, [60], 5, [request], "medusa")
    with pytest.raises(ValueError, match="prompt_lengths"):
        predicted_speedup(costs, [60, 61], 5, [request], "ngram")
