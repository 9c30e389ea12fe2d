"""The cost model chapter 5 prices drafters with: verification passes charged their measured
cost, and the crossover between drafters with its interval over prompts."""

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from specdec_lib import load_model  # noqa: E402
from specdec_lib.analysis.costs import (  # noqa: E402
    Prices,
    cost_estimate,
    cost_per_token,
    counts_cost,
    crossover_c,
    crossover_estimate,
    measure_prices,
    median_prices,
    pass_costs,
    passes_by_positions,
    verification_cost,
    verified_cost_per_token,
)
from specdec_lib.analysis.runs import prompt_stats
from specdec_lib.analysis.timing import Timing  # noqa: E402
from specdec_lib.course.cost_view import plot_cost_panels, verdict

from helpers import check_figure  # noqa: E402


def _timing(seconds: float) -> Timing:
    return Timing(seconds, seconds, seconds, 1)


def test_pass_costs_take_one_position_as_the_unit_and_the_robust_line_beyond_it():
    # the line is 2.0 s + 0.1 s per position; one position runs faster than the line (1.9 s,
    # as on a CPU), and the median at T = 4 is spoiled, which the robust line ignores
    times = {1: 1.9, 2: 2.2, 3: 2.3, 4: 9.0, 5: 2.5, 6: 2.6}
    run = {t: _timing(x) for t, x in times.items()}
    costs = pass_costs([run], 7)
    assert costs[1] == 1.0
    assert costs[2] == pytest.approx(2.2 / 1.9) and costs[7] == pytest.approx(2.7 / 1.9)
    assert costs[4] == pytest.approx(2.4 / 1.9)
    # ratios do not depend on the machine's speed; several runs take the median per T
    twice = {t: _timing(2 * x) for t, x in times.items()}
    assert pass_costs([twice], 7) == pytest.approx(costs)
    slower = {1: _timing(1.9), **{t: _timing(3.0 + 0.1 * t) for t in (2, 3, 5, 6, 7)}}
    assert pass_costs([slower], 7)[2] == pytest.approx(3.2 / 1.9)
    assert pass_costs([run, twice, slower], 7)[2] == pytest.approx(2.2 / 1.9)
    with pytest.raises(ValueError, match="max_positions"):
        pass_costs([run], 0)
    with pytest.raises(ValueError, match="runs"):
        pass_costs([{2: _timing(1.0), 3: _timing(1.1)}], 3)


def test_passes_are_counted_by_the_positions_each_verified():
    # 10 rounds: 3 drafted nothing, 2 drafted one token, 5 drafted three
    assert passes_by_positions(10, [7, 5, 5]) == {1: 3, 2: 2, 4: 5}
    assert passes_by_positions(4, []) == {1: 4}
    with pytest.raises(ValueError, match="position_proposed"):
        passes_by_positions(4, [5])
    with pytest.raises(ValueError, match="position_proposed"):
        passes_by_positions(10, [3, 4])


def test_each_verification_pass_is_charged_for_its_own_length():
    price = {1: 1.0, 2: 1.1, 3: 1.2, 4: 1.3}
    assert verification_cost(10, [7, 5, 5], price) == pytest.approx(3 * 1.0 + 2 * 1.1 + 5 * 1.3)
    with pytest.raises(ValueError, match="pass_cost"):
        verification_cost(10, [7, 5, 5], {1: 1.0, 2: 1.1})
    got = verified_cost_per_token(10, [7, 5, 5], 17, 25, c=0.2, pass_cost=price, lookups=4, o=0.5)
    assert got == pytest.approx((3 + 2.2 + 6.5 + 0.2 * 17 + 0.5 * 4) / 25)
    # with every pass at one, it is the pass-counting model
    flat = {t: 1.0 for t in price}
    assert verified_cost_per_token(10, [7, 5, 5], 17, 25, 0.2, flat) == pytest.approx(
        cost_per_token(10, 17, 25, 0.2)
    )
    with pytest.raises(ValueError, match="emitted"):
        verified_cost_per_token(10, [7], 7, 0, 0.2, price)
    with pytest.raises(ValueError, match="c and o"):
        verified_cost_per_token(10, [7], 7, 20, -0.1, price)


def test_median_prices_take_each_price_on_its_own_and_verify_cost_reads_k_plus_one():
    runs = [
        Prices(0.2, 0.01, {1: 1.0, 2: 1.2, 5: 1.5}, 1e-3, 2e-4, 1e-5),
        Prices(0.3, 0.03, {1: 1.0, 2: 1.1, 5: 1.4}, 2e-3, 6e-4, 6e-5),
        Prices(0.25, 0.02, {1: 1.0, 2: 1.3, 5: 1.2}, 3e-3, 7e-4, 3e-5),
    ]
    mid = median_prices(runs)
    assert (mid.c, mid.o, mid.target_pass) == (0.25, 0.02, 2e-3)
    assert mid.pass_cost == {1: 1.0, 2: 1.2, 5: 1.4}
    assert mid.verify_cost(4) == 1.4
    with pytest.raises(ValueError, match="k must"):
        mid.verify_cost(5)
    with pytest.raises(ValueError, match="runs"):
        median_prices([])


def test_measure_prices_times_each_run_on_its_own():
    target, draft = load_model("target"), load_model("draft")
    runs = measure_prices(
        target, draft, lambda: None, context_len=32, max_positions=3, runs=2, pairs=10
    )
    assert len(runs) == 2
    for p in runs:
        assert sorted(p.pass_cost) == [1, 2, 3] and p.pass_cost[1] == 1.0
        assert 0 < p.c and 0 < p.o < p.c
        assert p.c == pytest.approx(p.draft_pass / p.target_pass)
    for bad in (dict(runs=0), dict(pairs=5), dict(max_positions=1)):
        with pytest.raises(ValueError, match=next(iter(bad))):
            measure_prices(target, draft, lambda: None, **bad)


def _prompt(emitted, passes, proposed, draft_passes):
    return dict(
        emitted=emitted,
        target_passes=passes,
        proposed=sum(proposed),
        accepted=0,
        draft_passes=draft_passes,
        position_proposed=proposed,
        position_accepted=[0] * len(proposed),
    )


def _row(workload, drafter, k, prompts):
    row = dict(workload=workload, drafter=drafter, k=k, per_prompt=prompts)
    for name in ("emitted", "target_passes", "draft_passes"):
        row[name] = sum(p[name] for p in prompts)
    depth = max(len(p["position_proposed"]) for p in prompts)
    row["position_proposed"] = [
        sum(p["position_proposed"][i] for p in prompts if i < len(p["position_proposed"]))
        for i in range(depth)
    ]
    return row


def _rows(draft_tokens=(30, 40, 50)):
    """Three prompts; at k = 1 and 2 the n-gram drafter gets 20 tokens from 10 passes,
    the draft model ``draft_tokens[i]`` from 10 passes, drafting k tokens a round."""
    rows = []
    for k in (1, 2):
        rows.append(_row("novel", "ngram", k, [_prompt(20, 10, [10] * k, 0)] * 3))
        draft = [_prompt(t, 10, [10] * k, 10 * k) for t in draft_tokens]
        rows.append(_row("novel", "draft", k, draft))
    return rows


def test_counts_cost_charges_lookups_to_the_ngram_drafter_and_passes_by_length():
    prompt = _prompt(20, 10, [10, 10], 20)
    price = {1: 1.0, 2: 1.5, 3: 2.0}
    assert counts_cost(prompt, "draft", 0.5, 0.3) == pytest.approx((10 + 10) / 20)
    assert counts_cost(prompt, "ngram", 0.5, 0.3) == pytest.approx((10 + 10 + 3) / 20)
    lookups_only = _prompt(20, 10, [10, 10], 0)
    assert counts_cost(lookups_only, "ngram", 0.5, 0.3) == pytest.approx((10 + 3) / 20)
    assert counts_cost(prompt, "draft", 0.5, 0.3, price) == pytest.approx((20 + 10) / 20)
    with pytest.raises(ValueError, match="drafter"):
        counts_cost(prompt, "eagle", 0.5, 0.3)


def test_the_crossover_is_the_price_at_which_both_best_costs_are_equal():
    rows, price = _rows(), {1: 1.0, 2: 1.2, 3: 1.4}
    for pass_cost in (None, price):
        x = crossover_c(rows, "novel", 0.1, pass_cost)
        best = verdict(rows, x - 1e-6, 0.1, pass_cost)[0]
        assert "draft model cheaper" in best
        assert "n-gram cheaper" in verdict(rows, x + 1e-6, 0.1, pass_cost)[0]
    # pass counting: n-gram costs (10 + 0.1*10)/20 = 0.55 at best; the draft model at k = 1
    # costs (10 + 10c)/40 pooled, equal at c = (0.55*120 - 30)/30 = 1.2
    assert crossover_c(rows, "novel", 0.1) == pytest.approx(1.2)
    # priced: every n-gram pass (k = 1 is its best) verifies 2 positions, (12 + 1)/20 = 0.65;
    # the draft model at k = 1 costs (36 + 30c)/120 pooled, equal at c = (78 - 36)/30 = 1.4
    assert crossover_c(rows, "novel", 0.1, price) == pytest.approx(1.4)
    with pytest.raises(ValueError, match="workload"):
        crossover_c(rows, "copy", 0.1)


def test_the_crossover_interval_resamples_prompts_and_is_a_point_when_they_agree():
    e = crossover_estimate(_rows(), "novel", 0.1, seed=1)
    assert e.low < e.value < e.high
    assert e.low == pytest.approx(crossover_c(_rows((30, 30, 30)), "novel", 0.1), abs=0.05)
    alike = crossover_estimate(_rows((40, 40, 40)), "novel", 0.1)
    assert alike.low == pytest.approx(alike.value) == pytest.approx(alike.high)
    assert crossover_estimate(_rows(), "novel", 0.1, seed=1) == e


def test_cost_estimate_and_prompt_stats_read_the_rows_per_prompt_counts():
    row = _rows()[1]  # the draft model at k = 1
    stats = prompt_stats(row)
    assert [s.emitted for s in stats] == [30, 40, 50]
    e = cost_estimate(row, 0.5, 0.0)
    assert e.value == pytest.approx((30 + 15) / 120)
    assert e.low < e.value < e.high
    with pytest.raises(ValueError, match="per_prompt"):
        prompt_stats({"drafter": "draft"})


def test_plot_cost_panels_draws_one_panel_per_workload_with_intervals():
    fig = plot_cost_panels(_rows(), 0.2, 0.01, {1: 1.0, 2: 1.2, 3: 1.4}, "title")
    (ax,) = fig.axes
    assert ax.get_title() == '"novel"'
    assert len(ax.containers) == 2  # an error-bar series per drafter
    check_figure(fig)
    with pytest.raises(ValueError, match="rows"):
        plot_cost_panels([], 0.2, 0.01)
