"""The server: continuous batching through the one speculation round, with k per row."""

import functools
import itertools

import pytest
import torch
from measures import fit_step_costs, summarize

from specdec_lib import DraftModelDrafter, NgramDrafter, SamplingParams, generate
from specdec_lib.analysis.costs import RooflineStepCost, StepCostFit
from specdec_lib.analysis.hypothesis import chi_square, z_score
from specdec_lib.analysis.intervals import stream_ratio
from specdec_lib.engine import generate as generate_module
from specdec_lib.engine.generate import Row
from specdec_lib.engine.policies import DisableAbove, FixedK, Off
from specdec_lib.engine.sampling import process_logits
from specdec_lib.engine.server import ModelledClock, Request, serve
from specdec_lib.engine.traffic import (
    ClosedLoop,
    OpenLoop,
    mixed_requests,
    poisson_arrivals,
    poisson_stream,
)
from specdec_lib.engine.tree_decode import NgramTreeDrafter
from specdec_lib.engine.verify import sampled_rule, target_distribution
from specdec_lib.experiments.goodput_policy import GoodputK, _row_acceptance, goodput_ks

PARAMS = SamplingParams(max_tokens=24)
MIX = {"copy": 1, "edit": 1, "answer": 1, "novel": 1}


def lines(ks, fixed, per_row):
    """A step-cost model whose rounds at each k cost ``fixed + per_row * B`` (two profiled
    points a line, B = 1 and 64)."""
    points = tuple(((1, f + r), (64, f + 64 * r)) for f, r in zip(fixed, per_row, strict=True))
    return StepCostFit(tuple(ks), points, 1e-3, 3e-5)


COST = lines((0, 1, 3, 5), (1e-3, 1.1e-3, 1.2e-3, 1.3e-3), (2e-4, 2.5e-4, 3.5e-4, 4.5e-4))


def modelled(target, requests, policy):
    """The requests served by four rows on the model COST's clock."""
    return serve(
        target, OpenLoop(requests), policy, lambda r: NgramDrafter(), 4, clock=ModelledClock(COST)
    )


@pytest.fixture(scope="module")
def requests():
    # Different lengths (max_tokens 1 to 24) and all four workloads, in one stream.
    reqs = mixed_requests(MIX, 14, seed=5, params=PARAMS, arrivals=poisson_arrivals(300, 14, 5))
    return [
        Request(
            r.id, r.prompt, SamplingParams(max_tokens=1 + (7 * r.id) % 24), r.arrival, r.workload
        )
        for r in reqs
    ]


@pytest.fixture(scope="module")
def alone(target, requests):
    return {r.id: generate(target, r.prompt, r.params) for r in requests}


POLICIES = [Off(), FixedK(4), DisableAbove(3, 3), GoodputK(COST, max_k=5)]


@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: p.name)
@pytest.mark.parametrize("order", ["poisson", "reversed", "all at once"])
def test_every_request_equals_decoding_it_alone(target, requests, alone, policy, order):
    if order == "reversed":  # the same requests, arriving in the opposite order
        times = sorted(r.arrival for r in requests)
        requests = [
            Request(r.id, r.prompt, r.params, t, r.workload)
            for r, t in zip(requests, reversed(times), strict=True)
        ]
    elif order == "all at once":
        requests = [Request(r.id, r.prompt, r.params, 0.0, r.workload) for r in requests]
    run = serve(target, OpenLoop(requests), policy, lambda r: NgramDrafter(), capacity=4)
    assert sorted(s.request.id for s in run.served) == sorted(alone)
    for s in run.served:
        assert s.error is None
        assert s.output == alone[s.request.id], (policy.name, order, s.request.workload)
        assert s.request.arrival <= s.first_token <= s.finished
    assert max(step.batch for step in run.steps) <= 4


def test_draft_models_and_trees_serve_exactly_too(target, draft, requests, alone):
    for make in (lambda r: DraftModelDrafter(draft), lambda r: NgramTreeDrafter()):
        run = serve(target, OpenLoop(requests), FixedK(3), make, capacity=5)
        assert {s.request.id: s.output for s in run.served} == alone


def test_a_finished_request_leaves_at_once_and_a_waiting_one_takes_its_row(target, requests):
    run = serve(target, OpenLoop(requests), FixedK(2), lambda r: NgramDrafter(), capacity=3)
    # Never more rows than capacity, and the batch shrinks as soon as requests finish.
    decodes = [s for s in run.steps if s.kind == "decode"]
    assert max(s.batch for s in decodes) == 3
    ends = sorted(s.finished for s in run.served)
    assert ends[0] < ends[-1]
    last = max(run.served, key=lambda s: s.finished)
    # After the second-to-last request is done, the last one decodes alone.
    after = [s for s in decodes if s.end > ends[-2]]
    assert after and all(s.batch == 1 for s in after), last.request.id


def test_a_closed_loop_sends_each_users_next_request_when_the_last_is_done(target, requests):
    traffic = ClosedLoop(requests[:9], users=3)
    run = serve(target, traffic, FixedK(2), lambda r: NgramDrafter(), capacity=8)
    assert len(run.served) == 9
    # At most 3 requests are ever in flight: the users'.
    assert max(s.batch for s in run.steps) <= 3
    by_arrival = sorted(run.served, key=lambda s: s.request.arrival)
    assert [s.request.arrival for s in by_arrival[:3]] == [0.0, 0.0, 0.0]
    finishes = sorted(s.finished for s in run.served)
    assert all(s.request.arrival in finishes for s in by_arrival[3:])


def test_a_bad_request_is_reported_and_the_others_finish(target, requests, alone):
    bad = [
        Request(100, [], PARAMS, 0.0),
        Request(101, [10**6], PARAMS, 0.0),
        Request(102, [5] * 600, PARAMS, 0.0),
    ]
    run = serve(target, OpenLoop([*bad, *requests]), FixedK(3), lambda r: NgramDrafter(), 4)
    served = {s.request.id: s for s in run.served}
    assert len(served) == len(requests) + 3
    for r in bad:
        assert served[r.id].error and served[r.id].output == []
    assert "prompt_token_ids" in served[100].error and "block_size" not in served[100].error
    for r in requests:
        assert served[r.id].error is None and served[r.id].output == alone[r.id]


def test_the_modelled_clock_charges_each_step_its_shape(target, requests):
    run = modelled(target, requests, FixedK(3))
    again = modelled(target, requests, FixedK(3))
    assert [s.finished for s in run.served] == [s.finished for s in again.served]
    ends = [s.end for s in run.steps]
    assert ends == sorted(ends)
    for before, step in itertools.pairwise(run.steps):  # back-to-back or idle between
        gap = step.end - before.end
        assert gap >= COST.seconds(step) - 1e-12


class Constant:
    """Proposes one fixed token, deterministically (one-hot q)."""

    name = "constant"

    def __init__(self, token: int) -> None:
        self.token = token

    def propose(self, context, k, params, generator=None):
        from specdec_lib.engine.drafters import Proposal

        return Proposal([self.token] * min(k, 1))


def _second_token_counts(model, probe, others, params, token, seed):
    stream = [Request(i, probe, params, 0.002 * i) for i in range(len(others), len(others) + 500)]
    stream += others
    run = serve(
        model,
        OpenLoop(stream),
        FixedK(1),
        lambda r: Constant(token),
        capacity=6,
        generator=torch.Generator().manual_seed(seed),
    )
    counts = torch.zeros(model.config.vocab_size)
    for s in run.served:
        if s.request.prompt == probe:
            counts[s.output[1]] += 1
    return counts, max(s.batch for s in run.steps)


def test_a_sampled_row_in_a_mixed_batch_keeps_the_targets_distribution(
    untrained_target, requests, monkeypatch
):
    model = untrained_target
    params = SamplingParams(temperature=1.0, top_k=5, max_tokens=3)
    probe = requests[0].prompt[:20]
    with torch.inference_mode():  # the exact marginal of the second token, and the bias
        p1 = process_logits(model(torch.tensor([probe]))[0, -1], params)
        rows = {
            t: process_logits(model(torch.tensor([probe + [t]]))[0, -1], params)
            for t in torch.nonzero(p1).flatten().tolist()
        }
    p2 = sum(p1[t] * p for t, p in rows.items())
    # The biased rule gives a proposed d the chance p(2 - p): propose where that differs most.
    shift = sum(p1[t] * p * (1 - p) for t, p in rows.items())
    token = int(shift.argmax())
    others = [Request(r.id, r.prompt, r.params, 0.002 * r.id, r.workload) for r in requests[:6]]
    counts, batch = _second_token_counts(model, probe, others, params, token, seed=1)
    assert batch > 1  # the probes shared their passes
    n = int(counts.sum())
    assert chi_square(counts, p2).p_value > 1e-3
    assert abs(z_score(int(counts[token]), n, float(p2[token]))) < 3
    # Negative control: the rule that resamples from p on rejection fails the same tests.
    biased = functools.partial(sampled_rule, replacement=target_distribution)
    monkeypatch.setattr(generate_module, "sampled_rule", biased)
    counts, _ = _second_token_counts(model, probe, others, params, token, seed=1)
    assert z_score(int(counts[token]), n, float(p2[token])) > 5
    assert chi_square(counts, p2).p_value < 1e-3


def test_disable_above_switches_speculation_off_for_the_whole_batch():
    rows = [Row([1, 2], 2, PARAMS, NgramDrafter(), 0) for _ in range(4)]
    rule = DisableAbove(k=3, batch=4)
    assert rule.choose(rows[:3], 0) == [3, 3, 3]
    assert rule.choose(rows, 0) == [0, 0, 0, 0]


def _row_with(rounds):
    row = Row([1, 2], 2, PARAMS, NgramDrafter(), 0)
    for proposed, accepted, asked in rounds:
        row.rounds.append((proposed, accepted))
        row.asked.append(asked)
    return row


def test_goodput_speculates_alone_and_stops_when_the_batch_is_large():
    good = _row_with([(4, 4, 4)] * 6)
    policy = GoodputK(lines((0, 6), (1e-3, 1e-3), (2e-4, 8e-4)), max_k=6)
    assert policy.choose([good], 0) == [6]
    # Many rows that accept nothing: drafting widens every row's pass for no tokens.
    bad = [_row_with([(4, 0, 4)] * 6) for _ in range(32)]
    assert policy.choose(bad, 0) == [0] * 32
    assert _row_acceptance(good, 0.7, 0.5) > 0.9 > 0.1 > _row_acceptance(bad[0], 0.7, 0.5)


def test_goodput_takes_each_rows_own_acceptance_when_drafting_costs():
    good, bad = _row_with([(4, 4, 4)] * 6), _row_with([(4, 0, 4)] * 6)
    cost = lines((0, 4), (1e-3, 1e-3), (1e-4, 1.4e-4))
    policy = GoodputK(cost, max_k=4, draft_seconds=2e-4)
    k_good, k_bad = policy.choose([good, bad], 0)
    assert k_good > 0 and k_bad == 0  # the batch's mean acceptance would give both the same


def test_goodput_keeps_each_rows_evidence_a_round_at_a_time_as_if_reread_whole():
    from specdec_lib.experiments.goodput_policy import _row_evidence

    rng = torch.Generator().manual_seed(3)
    policy = GoodputK(lines((0, 6), (1e-3, 1e-3), (2e-4, 8e-4)), max_k=6, memory=0.8)
    fresh = GoodputK(policy.cost, max_k=6, memory=0.8)  # rereads every row every round
    rows = [_row_with([]) for _ in range(3)]
    for step in range(40):
        if step % 7 == 3:  # one leaves, one joins with a history of its own
            rows = rows[1:] + [_row_with([(4, 2, 4)] * (step % 5))]
        for row in rows if step % 11 else rows[:1]:  # one round a row, or (sometimes) not
            asked = int(torch.randint(0, 7, (1,), generator=rng))
            row.rounds.append((asked, int(torch.randint(0, asked + 1, (1,), generator=rng))))
            row.asked.append(asked)
        for row, kept in zip(rows, policy._update(rows), strict=True):
            whole = _row_evidence(row, 0.8)
            assert all(abs(a - b) < 1e-9 for a, b in zip(kept, whole, strict=True))
        assert policy.choose(rows, 0) == fresh.choose(rows, 0)
        fresh._evidence.clear()
    assert len(policy._evidence) == len(rows)  # rows that left are forgotten


def test_a_request_that_stopped_drafting_returns_to_the_prior_and_tries_again():
    from specdec_lib.experiments.goodput_policy import _acceptance

    policy = GoodputK(lines((0, 6), (1e-3, 1e-3), (2e-4, 8e-4)), max_k=6)
    row = _row_with([(1, 0, 1), (1, 1, 1), (1, 0, 1), (1, 0, 1)])
    policy._update([row])
    for plain in range(1, 12):
        row.rounds.append((0, 0))
        row.asked.append(0)
        [kept] = policy._update([row])
        estimate = _acceptance(kept, 0.5, 2.0)
        assert abs(estimate - _row_acceptance(row, 0.7, 0.5)) < 1e-9
        assert (abs(estimate - 0.5) < 1e-9) == (plain >= 10)  # its drafts left the window


def test_a_recent_collapse_in_acceptance_is_seen_within_five_rounds():
    row = _row_with([(4, 4, 4)] * 20 + [(4, 0, 4)] * 5)
    assert _row_acceptance(row, 0.7, 0.5) < 0.5


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: poisson_arrivals(0, 5, 1), "rate"),
        (lambda: poisson_arrivals(-1.0, 5, 1), "rate"),
        (lambda: OpenLoop([]), "requests"),
        (lambda: ClosedLoop([], 2), "requests"),
        (lambda: mixed_requests({"chat": 1}, 3, 1, PARAMS), "mix"),
        (lambda: mixed_requests({"copy": 0}, 3, 1, PARAMS), "mix"),
        (lambda: poisson_stream(1.0, 0, 1, MIX, PARAMS), "n"),
        (lambda: FixedK(0), "k"),
        (lambda: DisableAbove(2, 0), "batch"),
        (lambda: GoodputK(COST, memory=1.5), "memory"),
        (lambda: GoodputK(COST, prior_rounds=0), "prior_rounds"),
    ],
)
def test_bad_traffic_and_policies_raise_naming_the_parameter(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_serve_refuses_a_capacity_below_one(target, requests):
    with pytest.raises(ValueError, match="capacity"):
        serve(target, OpenLoop(requests), Off(), lambda r: NgramDrafter(), capacity=0)


def test_the_cache_lets_rows_join_and_leave(target):
    cache = target.new_cache(0, capacity=3)
    fresh = target.new_cache(2)
    with torch.inference_mode():
        target(torch.tensor([[1, 2, 3], [4, 5, 6]]), fresh)
    fresh.crop([3, 2])
    assert cache.join(fresh, 1) == 0 and cache.join(fresh, 0) == 1
    assert cache.lengths == [2, 3]
    assert torch.equal(cache.k[0][1, :, :3], fresh.k[0][0, :, :3])
    cache.leave(0)  # the last row moves into row 0
    assert cache.lengths == [3]
    assert torch.equal(cache.k[0][0, :, :3], fresh.k[0][0, :, :3])
    with pytest.raises(ValueError, match="row"):
        cache.leave(1)
    with pytest.raises(ValueError, match="row"):
        cache.join(fresh, 2)
    cache.join(fresh, 0), cache.join(fresh, 0)
    with pytest.raises(ValueError, match="full"):
        cache.join(fresh, 0)


def test_traffic_says_when_the_next_request_is_due(requests):
    stream = OpenLoop(requests[:3])
    first = min(r.arrival for r in requests[:3])
    assert stream.next_arrival() == first and stream.arrivals(first - 1e-9) == []
    assert len(stream.arrivals(float("inf"))) == 3 and stream.next_arrival() is None
    users = ClosedLoop(requests[:3], users=1, think=0.5)
    assert [r.id for r in users.arrivals(0.0)] == [requests[0].id]
    assert users.next_arrival() is None  # the one user waits for its answer


def test_the_step_cost_fit_recovers_a_known_model_and_summaries_add_up(target, requests):
    run = modelled(target, requests, FixedK(3))
    runs = [run] + [
        modelled(target, requests, policy) for policy in (Off(), FixedK(1), FixedK(3), FixedK(5))
    ]
    fit = fit_step_costs([s for r in runs for s in r.steps], min_steps=1)
    for k, points in zip(fit.ks, fit.points, strict=True):  # timed by the model's own clock:
        for batch, seconds in points:  # the profile is the model, point for point
            assert seconds == pytest.approx(COST.predict(batch, k))
    assert fit.prefill_per_token == pytest.approx(COST.prefill_per_token)
    summary = summarize(run, latency_target=0.05)
    assert summary["requests"] == len(requests) and summary["refused"] == 0
    assert summary["latency_p50"] <= summary["latency_p90"] <= summary["latency_p99"]
    assert 0 <= summary["goodput"] <= 1
    latencies = sorted(s.latency for s in run.served)
    assert summary["goodput"] == sum(v <= 0.05 for v in latencies) / len(latencies)


def test_goodput_ks_weighs_tokens_against_the_rounds_time():
    flat = lines((0, 6), (1e-3, 1e-3), (1e-4, 1e-4))  # asking is free
    assert goodput_ks([0.5, 0.9], flat, 6) == [6, 6]
    assert goodput_ks([0.0, 0.0], flat, 6) == [0, 0]  # no gain: the smallest k on a tie
    assert goodput_ks([], flat, 6) == []
    steep = lines((0, 1), (1e-3, 2e-3), (1e-4, 1e-4))  # k = 1 doubles it
    assert goodput_ks([0.9], steep, 1) == [0]  # 1.9 tokens for twice the time: not worth it
    # Drafting time: the row whose tokens are rarely accepted stops drafting first.
    assert goodput_ks([0.2, 0.95], flat, 6, draft_seconds=2e-4) == [0, 6]


def test_goodput_asks_for_a_margin_before_it_speculates():
    cost = lines((0, 1), (1e-3, 1.1e-3), (1e-4, 1e-4))  # k = 1 costs 1.09x plain alone
    assert goodput_ks([0.2], cost, 1) == [1]  # 1.2 tokens for 1.09x the time: +10%
    assert goodput_ks([0.2], cost, 1, margin=0.05) == [1]
    assert goodput_ks([0.2], cost, 1, margin=0.15) == [0]  # +10% is inside the margin
    assert goodput_ks([0.9], cost, 1, margin=0.15) == [1]  # +74% is not
    rounds = [(1, 1, 1), (1, 0, 1), (1, 0, 1), (1, 0, 1)]  # the row's own acceptance: 0.19
    assert GoodputK(cost, max_k=1, margin=0.0).choose([_row_with(rounds)], 0) == [1]
    assert GoodputK(cost, max_k=1, margin=0.15).choose([_row_with(rounds)], 0) == [0]
    for bad in (-0.1, float("nan")):
        with pytest.raises(ValueError, match="margin"):
            goodput_ks([0.5], cost, 1, margin=bad)
        with pytest.raises(ValueError, match="margin"):
            GoodputK(cost, margin=bad)


def test_asking_for_more_never_costs_less_in_the_profile():
    crossing = StepCostFit((0, 2), (((1, 2e-3), (8, 4e-3)), ((1, 1e-3), (8, 6e-3))), 1e-3, 3e-5)
    assert crossing.predict(1, 2) == pytest.approx(2e-3)  # not 1e-3: k = 0 costs that much
    assert crossing.predict(8, 2) == pytest.approx(6e-3)
    assert crossing.predict(1, 1) == pytest.approx(2e-3)
    assert crossing.predict(16, 0) == pytest.approx(2e-3 + 15 * 2e-3 / 7)  # extended


def test_a_new_request_starts_from_the_servers_recent_acceptance():
    cost = lines((0, 1, 4), (1e-3, 1.3e-3, 1.6e-3), (1e-4, 1e-4, 1e-4))  # k = 1: +27%
    fresh = _row_with([])
    seen_good, seen_bad = GoodputK(cost, max_k=4), GoodputK(cost, max_k=4)
    for _ in range(10):  # the servers' recent rounds: everything accepted, or nothing
        seen_good.choose([_row_with([(4, 4, 4)])], 0)
        seen_bad.choose([_row_with([(4, 0, 4)])], 0)
    assert seen_good.choose([fresh], 0) == [4]
    assert seen_bad.choose([fresh], 0) == [0]


def test_the_roofline_model_is_memory_bound_alone_and_compute_bound_in_a_crowd():
    gpu = RooflineStepCost()
    alone = gpu.predict(1, 0)
    assert alone == pytest.approx(gpu.weight_bytes / gpu.bandwidth, rel=0.01)
    assert gpu.predict(1, 4) == alone  # the weight read hides four more positions
    crowd = gpu.predict(64, 4)
    assert crowd == pytest.approx(2 * gpu.params * 64 * 5 / gpu.flops)
    assert crowd > gpu.predict(64, 0)  # at batch 64 they cost
    long = RooflineStepCost(context=8192)
    assert long.predict(64, 4) == long.predict(64, 0)  # reading the caches hides them again


def test_stream_ratio_is_a_geometric_mean_with_a_t_interval_over_streams():
    base = [(200.0, 10), (300.0, 10), (250.0, 10)]  # mean latencies 20, 30, 25
    other = [(100.0, 10), (100.0, 10), (100.0, 10)]  # 10 each: ratios 2, 3, 2.5
    r = stream_ratio(base, other)
    assert r["ratio"] == pytest.approx((2 * 3 * 2.5) ** (1 / 3))
    assert r["low"] < 2 < 3 < r["high"] and r["streams"] == 3  # t with 2 df is wide
    same = stream_ratio(base, base)
    assert same["ratio"] == same["low"] == same["high"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="streams"):
        stream_ratio(base, other[:2])
