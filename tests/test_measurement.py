"""The measurement discipline: intervals, load checks, stamps, the cost-aware policy and
the cost model in seconds."""

import time

import pytest
import torch
from measures import measure_unit_costs
from run_summaries import paired_rerun_interval

from specdec_lib import NgramDrafter, SamplingParams, SpeculationStats, speculative_generate
from specdec_lib.analysis.costs import PassCostFit, UnitCosts, request_log, unit_costs_from_result
from specdec_lib.analysis.intervals import Estimate, blocks_of, paired_speedup
from specdec_lib.analysis.theory import CostAwareK
from specdec_lib.analysis.timing import Timing, interleaved, time_inside

from harness import busy_report, library_stamp, run_stamp


def test_paired_speedup_recovers_a_known_ratio_and_its_interval_covers_prompt_spread():
    base = [[1.0, 1.1, 0.9], [2.0, 2.2, 1.8], [4.0, 4.4, 3.6]]
    exact = paired_speedup(base, [[t / 3 for t in row] for row in base])
    assert exact.value == pytest.approx(3.0) and exact.high - exact.low < 1e-9
    # one prompt speeds up 2x, the others 4x: the interval must cover more than one value
    mixed = paired_speedup(
        base, [[t / 2 for t in base[0]]] + [[t / 4 for t in r] for r in base[1:]]
    )
    assert mixed.low < mixed.value < mixed.high
    assert Estimate(1.5, 1.2, 1.8).resolves(1.0) and not Estimate(1.1, 0.9, 1.3).resolves(1.0)
    with pytest.raises(ValueError, match="one shape"):
        paired_speedup(base, [[1.0]])


def test_interleaved_times_every_job_every_repeat_in_shuffled_order():
    order = []
    jobs = {name: (lambda name=name: order.append(name)) for name in "abcd"}
    out = interleaved(jobs, repeats=5, seed=3, warmup=1)
    assert set(out) == set("abcd") and all(len(w) == len(c) == 5 for w, c in out.values())
    timed = [order[4 + 4 * r : 8 + 4 * r] for r in range(5)]
    assert all(sorted(r) == list("abcd") for r in timed)
    assert len({tuple(r) for r in timed}) > 1  # the order changes between repeats


def test_interleaved_runs_the_untimed_step_before_every_call_outside_the_clock():
    log = []
    jobs = {"a": lambda: log.append("a"), "b": lambda: log.append("b")}
    out = interleaved(jobs, repeats=3, warmup=1, untimed={"a": lambda: time.sleep(0.02)})
    assert log.count("a") == 4 and max(out["a"].wall) < 0.015  # the sleep is not timed
    with pytest.raises(ValueError, match="untimed"):
        interleaved(jobs, repeats=1, untimed={"c": lambda: None})


def test_timing_holds_the_median_and_the_range_of_its_runs():
    t = Timing.of([3.0, 1.0, 2.0])
    assert (t.median, t.fastest, t.slowest, t.repeats) == (2.0, 1.0, 3.0, 3)
    with pytest.raises(ValueError, match="seconds"):
        Timing.of([])


def test_blocks_of_cuts_repeats_into_contiguous_blocks():
    assert blocks_of(7, 3) == [[0, 1], [2, 3], [4, 5, 6]]
    assert blocks_of(4, 4) == [[0], [1], [2], [3]]
    with pytest.raises(ValueError, match="blocks"):
        blocks_of(4, 5)


def test_a_paired_interval_over_blocks_carries_drift_between_blocks():
    # the method's advantage drifts over the run: 2x in the first half, 3x in the second.
    # Each half, alone, is exact; resampling halves as blocks must span both.
    base = [[1.0] * 8 for _ in range(4)]
    method = [[0.5] * 4 + [1 / 3] * 4 for _ in range(4)]
    drift = paired_speedup(base, method, blocks=2)
    assert drift.low == pytest.approx(2.0) and drift.high == pytest.approx(3.0)
    assert drift.holds(2.5) and not drift.holds(3.5)


def test_busy_report_flags_a_descheduled_run_and_passes_a_quiet_one():
    quiet = busy_report([1.0] * 20, [0.99] * 20, threads=1)
    assert quiet["median_cpu_share"] == pytest.approx(0.99) and quiet["jobs_below_cpu_share"] == 0
    busy = busy_report([1.0] * 20, [0.5] * 20, threads=1)
    assert busy["busy"] and busy["jobs_below_cpu_share"] == 20
    with pytest.raises(ValueError, match="wall and cpu"):
        busy_report([1.0], [], threads=1)


def test_stamps_name_the_code_and_the_weights():
    lib = library_stamp()
    assert lib["specdec_lib"] and lib["commit"] and len(lib["weights_manifest_sha256"]) == 12
    assert {"cpu", "torch", "commit", "load_average_at_start"} <= set(run_stamp())


def test_time_inside_separates_forward_time_from_host_time():
    model = torch.nn.Linear(4, 4)

    def work() -> None:
        model(torch.zeros(1, 4))
        time.sleep(0.02)  # host time, outside any forward pass

    wall, inside = time_inside([model], work)
    assert wall >= 0.02 and 0 < inside < wall - 0.015
    assert not model._forward_hooks and not model._forward_pre_hooks  # hooks removed


def flat(k: int) -> float:
    return 1.0 + 0.02 * k


def test_cost_aware_k_drafts_long_when_accepted_and_short_when_rejected():
    policy = CostAwareK(c=0.0, verify_cost=flat, lookup=0.01, max_k=16)
    assert policy.next_k(8, [(8, 8)] * 6) == 16
    assert policy.next_k(8, [(8, 0)] * 6) < 4
    assert policy.next_k(2, [(2, 2)]) <= 4  # never beyond twice the last k
    dear = CostAwareK(c=0.5, verify_cost=flat, max_k=16)
    assert dear.next_k(8, [(8, 3)] * 6) < policy.next_k(8, [(8, 3)] * 6)  # a dear draft drafts less
    assert (
        policy.position_acceptance([(4, 4)] * 5)[:4] > policy.position_acceptance([(4, 1)] * 5)[:4]
    )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(decay=0.0), "decay must"),
        (dict(prior=(3.0, 2.0)), "prior must"),
        (dict(max_k=0), "k_max must"),
        (dict(c=-1.0), "c must"),
    ],
)
def test_a_bad_cost_aware_k_is_refused_with_the_parameter_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CostAwareK(**({"c": 0.1, "verify_cost": flat} | kwargs))


def test_cost_aware_k_leaves_the_greedy_output_unchanged(target, tok):
    ids = tok.encode("Text: The rupu lilos the kimo.\nQuote:")
    params = SamplingParams(max_tokens=24)
    stats = SpeculationStats()
    policy = CostAwareK(c=0.0, verify_cost=flat, max_k=16)
    plain = speculative_generate(target, NgramDrafter(), ids, params, k=1)
    adaptive = speculative_generate(
        target, NgramDrafter(), ids, params, k=16, stats=stats, adaptive_k=policy
    )
    assert adaptive == plain and all(1 <= r.k <= 16 for r in stats.log)


def _costs(**more) -> UnitCosts:
    """Made-up unit costs: a pass of 1 s + 0.1 s per position, a prefill of 10 tokens 3 s."""
    line = PassCostFit(fixed=1.0, per_position=0.1)
    return UnitCosts(line, 0.2, 0.01, {10: 3.0}, host_step=0.05, host_round=0.1, **more)


def test_unit_costs_predict_plain_and_speculative_requests_from_counts():
    costs = _costs()
    assert costs.prefill_time(12) == pytest.approx(3.2)
    assert costs.plain_request(10, 5) == pytest.approx(3.0 + 4 * 1.1 + 5 * 0.05)
    # two rounds: prefill with a 2-token proposal, then a pass over 3+1 positions
    expected = 3.2 + 1.4 + 5 * 0.2 + 2 * 0.01 + 2 * 0.1
    assert costs.speculative_request(10, [2, 3], draft_passes=5, lookups=2) == pytest.approx(
        expected
    )
    with pytest.raises(ValueError, match="proposal_lengths"):
        costs.speculative_request(10, [], 0, 0)


def test_time_inside_records_each_call_of_the_first_model_with_its_positions():
    first, second = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
    calls: list[tuple[int, float]] = []

    def work() -> None:
        first(torch.zeros(1, 3, 4))
        second(torch.zeros(1, 5, 4))
        first(torch.zeros(1, 1, 4))

    time_inside([first, second], work, calls)
    assert [n for n, _ in calls] == [3, 1] and all(t > 0 for _, t in calls)


def test_a_measured_single_pass_replaces_the_line_at_one_position_only():
    line = PassCostFit(fixed=1.0, per_position=0.1)
    costs = UnitCosts(pass_fit=line, draft_pass=0.0, lookup=0.0, prefill={4: 1.0}, single_pass=0.5)
    assert costs.pass_time(1) == 0.5 and costs.pass_time(3) == pytest.approx(1.3)
    assert costs.plain_request(4, 3) == pytest.approx(1.0 + 2 * 0.5)


def test_a_rerun_interval_widens_with_the_spread_between_blocks_and_with_fewer_blocks():
    base = [[1.0] * 8]
    steady = paired_rerun_interval(base, [[0.5] * 8])
    assert steady.value == pytest.approx(2.0) and steady.high - steady.low < 1e-9
    # the method's time drifts between blocks: 0.5 s, then 0.6 s, alternately
    drifting = [[0.5, 0.6] * 4]
    every = paired_rerun_interval(base, drifting)  # 8 blocks of one repeat
    pairs = paired_rerun_interval(base, drifting, blocks=4)  # each block holds both: no spread
    assert every.low < 1 / 0.6 and every.high > 1 / 0.5 * 0.99
    assert pairs.high - pairs.low < 1e-9
    few = paired_rerun_interval([[1.0] * 4], [[0.5, 0.6] * 2])  # 4 blocks: a wider t quantile
    assert few.high / few.low > every.high / every.low
    with pytest.raises(ValueError, match="blocks"):
        paired_rerun_interval(base, drifting, blocks=1)
    with pytest.raises(ValueError, match="one shape"):
        paired_rerun_interval(base, [[0.5]])


def test_unit_costs_round_trip_through_a_result_file():
    costs = _costs(host_draft_step=0.02, single_pass=0.5)
    stored = costs.to_result(max_k=4)
    assert stored["c_draft"] == pytest.approx(0.4) and stored["c_lookup"] == pytest.approx(0.02)
    assert (
        stored["verify_cost"]["4"] == pytest.approx(1.5 / 0.5) and len(stored["verify_cost"]) == 4
    )
    assert unit_costs_from_result(stored) == costs


def test_a_request_log_records_what_the_cost_model_reads():
    stats = SpeculationStats()
    speculative_generate(
        _tiny(),
        NgramDrafter(),
        [1, 2, 3, 1, 2],
        SamplingParams(temperature=0.0, max_tokens=6),
        k=3,
        stats=stats,
    )
    log = request_log(stats.log, stats.draft_passes, stats.emitted)
    assert log["emitted"] == 6 and len(log["proposal_lengths"]) == len(log["ks"]) == stats.rounds
    assert sum(log["accepted"]) == stats.accepted


def _tiny():
    from specdec_lib.engine.model import ModelConfig, TinyGPT

    torch.manual_seed(0)
    return TinyGPT(ModelConfig(block_size=64, n_layer=1, n_head=2, n_embd=16)).eval()


def test_measure_unit_costs_gives_positive_costs_and_a_pass_line():
    target, draft = _tiny(), _tiny()
    costs, extra = measure_unit_costs(
        target, draft, [[1, 2, 3, 1, 2], [4, 5, 6]], 4, repeats=3, max_k=2
    )
    assert costs.draft_pass > 0 and costs.lookup > 0 and costs.single_pass > 0
    assert costs.pass_fit.predict(3) > 0 and extra["context"] == 6
    with pytest.raises(ValueError, match="prompts"):
        measure_unit_costs(target, draft, [[1, 2]], 4)
