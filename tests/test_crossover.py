"""The crossover batch size B*: read off a sweep's intervals, agreed between runs, and
predicted from counts by a cost model fitted on other workloads."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

from specdec_lib.analysis.costs import SweepCostFit, fit_sweep_costs, predict_sweep, sweep_counts
from specdec_lib.analysis.crossover import (
    CrossoverEstimate,
    agree_crossovers,
    estimate_crossover,
    log_crossing,
    prediction_miss,
)

ROOT = Path(__file__).resolve().parents[1]


def _row(batch, value, spread=1.1):
    return {
        "workload": "w",
        "batch": batch,
        "speedup": value,
        "speedup_low": value / spread,
        "speedup_high": value * spread,
    }


def _power_law(batches, at_one=4.0):
    """Speed-ups 4 / sqrt(B): exactly linear in log B and log speed-up, crossing 1 at 16."""
    return [_row(b, at_one / math.sqrt(b)) for b in batches]


def test_log_crossing_interpolates_in_log_batch_and_log_speedup():
    share = math.log(1.5) / (math.log(1.5) - math.log(0.5))
    assert log_crossing([1, 2, 4], [2.0, 1.5, 0.5]) == pytest.approx(2 * 2**share)
    assert log_crossing([1, 2, 4], [2.0, 1.5, 1.0]) is None
    assert log_crossing([1, 2], [1.0, 0.9]) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("batches", "values", "name"),
    [
        ([1, 2], [1.0], "batches and values"),
        ([2, 1], [1.0, 0.9], "batches"),
        ([0, 1], [1.0, 0.9], "batches"),
        ([1, 2], [1.0, 0.0], "values"),
    ],
)
def test_log_crossing_refuses_bad_input_naming_it(batches, values, name):
    with pytest.raises(ValueError, match=name):
        log_crossing(batches, values)


def test_a_crossing_between_grid_points_is_found_with_its_interval_inside_the_bracket():
    est = estimate_crossover(_power_law([1, 2, 4, 8, 32, 64]))
    assert est.status == "crossed"
    assert est.value == pytest.approx(16)
    # the bounds are the curve divided and multiplied by 1.1: they cross where
    # 4 / sqrt(B) = 1.1 and 1 / 1.1
    assert est.low == pytest.approx((4 / 1.1) ** 2)
    assert est.high == pytest.approx((4 * 1.1) ** 2)
    assert (est.faster_until, est.slower_from, est.largest) == (8, 32, 64)
    assert est.faster_until < est.low < est.value < est.high < est.slower_from
    assert est.describe() == "B* = 16 (13 to 19; faster at B = 8, slower at B = 32)"


def test_rows_in_any_order_give_the_same_estimate():
    rows = _power_law([1, 2, 4, 8, 32, 64])
    assert estimate_crossover(rows[::-1]) == estimate_crossover(rows)


def test_a_curve_that_never_resolves_slower_has_only_a_lower_bound():
    est = estimate_crossover(_power_law([1, 2, 4, 8]))
    assert (est.status, est.value, est.high) == ("not crossed", None, None)
    assert est.low == 8  # the lower bounds stay above 1 up to the grid's end
    assert est.describe() == "no crossover up to B = 8 (B* > 8)"
    # an unresolved last point: the lower bound crosses 1 inside the grid
    est = estimate_crossover(_power_law([1, 2, 4, 8, 16]))
    assert est.status == "not crossed"
    assert est.low == pytest.approx((4 / 1.1) ** 2)


def test_no_crossover_is_claimed_where_speculation_never_paid_or_paid_again():
    never = estimate_crossover([_row(1, 0.95, 1.02), _row(2, 0.8)])
    assert never.status == "never faster" and never.value is None
    again = estimate_crossover([_row(1, 2.0), _row(2, 0.8), _row(4, 1.5)])
    assert again.status == "not monotone" and again.value is None
    with pytest.raises(ValueError, match="rows"):
        estimate_crossover([])


def _crossed(low, value, high):
    return CrossoverEstimate("crossed", value, low, high, 8, 32, 64)


def test_runs_agree_on_a_crossover_only_where_their_intervals_share_a_range():
    both = agree_crossovers([_crossed(12, 16, 20), _crossed(18, 22, 26)])
    assert both["agree"] and (both["low"], both["high"]) == (12, 26)
    assert both["verdict"] == "B* between 12 and 26 in both runs (point estimates 16, 22)"
    apart = agree_crossovers([_crossed(12, 16, 20), _crossed(21, 22, 26), _crossed(14, 17, 19)])
    assert not apart["agree"] and apart["low"] is None
    assert "share no range" in apart["verdict"]


def test_runs_with_different_statuses_disagree_and_one_run_is_not_enough():
    not_crossed = CrossoverEstimate("not crossed", None, 64, None, 64, None, 64)
    mixed = agree_crossovers([_crossed(12, 16, 20), not_crossed])
    assert not mixed["agree"] and mixed["verdict"].startswith("the runs disagree")
    alike = agree_crossovers([not_crossed, not_crossed])
    assert alike["agree"] and alike["verdict"] == "no crossover up to B = 64 in both runs (B* > 64)"
    with pytest.raises(ValueError, match="estimates"):
        agree_crossovers([not_crossed])


def _sweep_row(batch, passes, proposed, plain_s, spec_s, requests=None, tokens=64):
    requests = requests or batch
    n = requests * tokens
    return {
        "workload": "w",
        "batch": batch,
        "requests": requests,
        "plain_target_passes": tokens,
        "spec_target_passes": passes,
        "spec_positions_per_pass": (batch + proposed) / passes,
        "plain_tokens_per_second": n / plain_s,
        "spec_tokens_per_second": n / spec_s,
        "speedup": plain_s / spec_s,
        "speedup_low": 0.95 * plain_s / spec_s,
        "speedup_high": 1.05 * plain_s / spec_s,
    }


def test_sweep_counts_reads_batch_one_as_its_requests_and_pads_a_batch_to_k_plus_one():
    one = sweep_counts(_sweep_row(1, passes=156, proposed=576, plain_s=1, spec_s=1, requests=12), 4)
    assert one == {
        "batch": 1,
        "plain_passes": 12 * 64,
        "plain_positions": 12 * 63,
        "spec_passes": 156,
        "spec_positions": 156 - 12 + 576,
    }
    many = sweep_counts(_sweep_row(8, passes=13, proposed=400, plain_s=1, spec_s=1), 4)
    assert many["plain_passes"] == 64 and many["plain_positions"] == 8 * 63
    assert many["spec_positions"] == 8 * (4 + 5 * 12)
    with pytest.raises(ValueError, match="k"):
        sweep_counts(_sweep_row(8, 13, 400, 1, 1), 0)


def _synthetic_sweep(fit, passes_of):
    """Rows whose speculative time is exactly plain's plus what ``fit`` says it adds."""
    rows = []
    for b in (1, 2, 4, 8, 16, 32, 64):
        requests = 12 if b == 1 else b
        passes = passes_of(b) * (requests if b == 1 else 1)
        row = _sweep_row(b, passes, 3 * requests * passes_of(b), 1.0, 1.0, requests)
        plain = 0.01 * requests + 0.002 * b * 64
        spec = plain + fit.difference(sweep_counts(row, 4))
        rows.append(_sweep_row(b, passes, 3 * requests * passes_of(b), plain, spec, requests))
    return rows


def test_the_fit_recovers_the_costs_that_made_the_rows_and_predicts_them_back():
    truth = SweepCostFit(fixed=5e-4, per_row=7e-5, per_position=4e-5)
    copy = _synthetic_sweep(truth, lambda b: 13)
    novel = _synthetic_sweep(truth, lambda b: 50 + b // 16)
    fit = fit_sweep_costs(copy + novel, k=4)
    for name in ("fixed", "per_row", "per_position"):
        assert getattr(fit, name) == pytest.approx(getattr(truth, name), rel=1e-6)
    middle = _synthetic_sweep(truth, lambda b: 30 + b)
    for p in predict_sweep(fit, middle[::-1], k=4):
        assert p["predicted"] == pytest.approx(p["measured"], rel=1e-6)
        assert p["inside"]
    off = predict_sweep(SweepCostFit(5e-4, 7e-5, 8e-5), middle, k=4)
    assert not all(p["inside"] for p in off)
    assert [p["batch"] for p in predict_sweep(fit, middle, 4)] == [1, 2, 4, 8, 16, 32, 64]
    with pytest.raises(ValueError, match="rows"):
        fit_sweep_costs(copy[:2], k=4)


def test_a_prediction_of_a_negative_time_is_refused():
    saving = SweepCostFit(fixed=1.0, per_row=1.0, per_position=0.0)
    row = _sweep_row(4, passes=13, proposed=200, plain_s=0.01, spec_s=0.01)
    with pytest.raises(ValueError, match="non-positive"):
        predict_sweep(saving, [row], k=4)


def test_the_crossing_beyond_the_grid_is_where_the_added_time_turns_positive():
    fit = SweepCostFit(fixed=5e-4, per_row=1e-7, per_position=4e-5)
    b_star = fit.crossing(passes=13, tokens=64, k=4)
    # a batch of B at those counts: the added seconds vanish at B*
    at = {
        "batch": b_star,
        "plain_passes": 64,
        "plain_positions": b_star * 63,
        "spec_passes": 13,
        "spec_positions": b_star * (4 + 5 * 12),
    }
    assert fit.difference(at) == pytest.approx(0, abs=1e-12)
    assert (
        fit.difference(
            {
                **at,
                "batch": 2 * b_star,
                "plain_positions": 2 * b_star * 63,
                "spec_positions": 2 * b_star * 64,
            }
        )
        > 0
    )
    # copy's counts with a per-row cost that outweighs the one extra position: never
    assert SweepCostFit(5e-4, 7e-5, 4e-5).crossing(13, 64, 4) is None
    with pytest.raises(ValueError, match="passes"):
        fit.crossing(0, 64, 4)


def test_above_the_break_even_passes_a_crossing_exists_and_below_it_none():
    fit = SweepCostFit(fixed=5e-4, per_row=7e-5, per_position=4e-5)
    p_star = fit.break_even_passes(tokens=64, k=4)
    assert p_star == pytest.approx(64 * 11e-5 / 27e-5)
    assert fit.crossing(math.floor(p_star), 64, 4) is None
    assert fit.crossing(math.ceil(p_star), 64, 4) > 1
    with pytest.raises(ValueError, match="tokens"):
        fit.break_even_passes(0, 4)


def _compare_runs():
    spec = importlib.util.spec_from_file_location(
        "compare_runs", ROOT / "benchmarks" / "compare_runs.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_compare_runs_prints_each_workloads_b_star_and_counts_a_disagreement(capsys):
    first = {"rows": _power_law([1, 2, 4, 8, 32, 64])}
    shifted = {"rows": _power_law([1, 2, 4, 8, 32, 64], at_one=8.0)}  # B* = 64
    assert _compare_runs().print_crossover_estimates(first, first) == 0
    assert "B*, w: run 1 B* = 16 (13 to 19" in capsys.readouterr().out
    assert _compare_runs().print_crossover_estimates(first, shifted) == 1
    assert "the runs disagree" in capsys.readouterr().out


def test_a_predicted_b_star_is_set_against_the_range_the_runs_agree_on():
    agreed = agree_crossovers([_crossed(12, 16, 20), _crossed(18, 22, 26), _crossed(14, 18, 22)])
    inside = prediction_miss(24.0, agreed)
    assert inside["inside"] and inside["factor"] == pytest.approx(24 / 18)
    assert inside["text"] == (
        "B* = 24, inside the measured range (12 to 26), 1.33 times the measured point estimate (18)"
    )
    assert prediction_miss(40.0, agreed)["inside"] is False
    assert prediction_miss(None, agreed)["inside"] is False
    never = agree_crossovers([_crossed(12, 16, 20), _crossed(21, 22, 26)])
    assert prediction_miss(24.0, never)["factor"] is None
    with pytest.raises(ValueError, match="predicted"):
        prediction_miss(0.0, agreed)
