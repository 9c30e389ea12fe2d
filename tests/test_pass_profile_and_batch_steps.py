import pytest
import torch

from specdec_lib import workload_prompts
from specdec_lib.analysis.pass_profile import profile_pass
from specdec_lib.experiments.batch_steps import time_batch_decode_steps


@pytest.fixture(scope="module")
def profiles(target):
    return {
        t: profile_pass(target, positions=t, context_len=32, passes=2, warmup=1) for t in (1, 8)
    }


def test_a_profiled_pass_does_one_matrix_product_per_linear_layer(target, profiles):
    linears = sum(isinstance(m, torch.nn.Linear) for m in target.modules())
    for p in profiles.values():
        assert p.matrix_products == linears


def test_the_number_of_operator_calls_does_not_grow_with_the_positions_of_a_pass(profiles):
    one, eight = profiles[1], profiles[8]
    assert one.top_level_calls == eight.top_level_calls
    assert abs(one.aten_calls - eight.aten_calls) <= 0.05 * one.aten_calls
    assert one.aten_calls > one.top_level_calls > one.matrix_products > 0


def test_a_profile_accounts_for_every_call_and_its_time(profiles):
    p = profiles[1]
    assert sum(n for n, _ in p.by_category().values()) == pytest.approx(p.aten_calls)
    inside = sum(op.self_seconds for op in p.ops)
    assert 0 < inside <= p.wall_seconds
    assert p.outside_seconds == pytest.approx(p.wall_seconds - inside)
    shares = [s for _, s in p.by_category().values()]
    assert shares == sorted(shares, reverse=True)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"positions": 0}, "positions"),
        ({"passes": 0}, "passes"),
        ({"context_len": 600}, "context_len"),
    ],
)
def test_profile_pass_refuses_bad_arguments_naming_them(target, kwargs, name):
    with pytest.raises(ValueError, match=name):
        profile_pass(target, **kwargs)


def test_batch_decode_timing_splits_each_call_into_prefill_steps_and_host(target, tok):
    ids = tok.encode(workload_prompts("novel", n=1, seed=100)[0])[:24]
    timings = time_batch_decode_steps(target, ids, [1, 3], n_tokens=5, repeats=2, warmup=0)
    assert set(timings) == {1, 3}
    for b, t in timings.items():
        # the prefill pass gives the first token, so 5 tokens take 4 decode steps
        assert t.batch_size == b and t.steps == 4
        assert t.step.repeats == 2 * 4 and t.call.repeats == 2
        parts = t.prefill.fastest + t.steps * t.step.fastest + t.host.fastest
        assert parts <= t.call.fastest * (1 + 1e-9)
        assert 0 < t.step.median < t.call.median


@pytest.mark.parametrize(
    ("args", "name"),
    [(([], 5), "batch_sizes"), (([1, 0], 5), "batch_sizes"), (([1], 0), "n_tokens")],
)
def test_batch_decode_timing_refuses_bad_arguments_naming_them(target, tok, args, name):
    with pytest.raises(ValueError, match=name):
        time_batch_decode_steps(target, tok.encode("The kepa."), args[0], n_tokens=args[1])


def test_profiling_a_pass_writes_nothing_to_stderr(target, capfd):
    profile_pass(target, positions=1, context_len=16, passes=1, warmup=1)
    assert capfd.readouterr().err == ""
