"""Bad input a new user tries: each case raises a ValueError naming the parameter, and
valid NumPy scalars work like Python numbers (issue 20's robustness list)."""

import numpy as np
import pytest
import torch

from specdec_lib import SamplingParams, Tokenizer
from specdec_lib.checks import check_ids, check_int, check_real


def test_numpy_scalars_are_numbers_like_any_other():
    p = SamplingParams(
        temperature=np.float32(0.7),
        top_k=np.int64(5),
        top_p=np.float64(0.9),
        max_tokens=np.int32(8),
    )
    assert (p.temperature, p.top_k, p.top_p, p.max_tokens) == (
        pytest.approx(0.7),
        5,
        pytest.approx(0.9),
        8,
    )
    assert all(type(v) in (int, float) for v in (p.temperature, p.top_k, p.top_p, p.max_tokens))
    assert check_int("k", np.int64(3)) == 3 and type(check_int("k", np.int64(3))) is int


@pytest.mark.parametrize("t", [5e-324, 1e-9, -0.1, float("nan"), float("inf"), True, "0.7"])
def test_temperature_out_of_range_is_refused(t):
    with pytest.raises(ValueError, match="temperature must be"):
        SamplingParams(temperature=t)


def test_smallest_allowed_temperature_gives_finite_probabilities():
    from specdec_lib.engine.sampling import MIN_TEMPERATURE, process_logits

    probs = process_logits(torch.randn(50) * 30, SamplingParams(temperature=MIN_TEMPERATURE))
    assert torch.isfinite(probs).all() and probs.sum().item() == pytest.approx(1.0)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"top_k": 0}, "top_k"),
        ({"top_k": np.bool_(True)}, "top_k"),
        ({"top_p": 0}, "top_p"),
        ({"top_p": float("nan")}, "top_p"),
        ({"max_tokens": 2.0}, "max_tokens"),
    ],
)
def test_other_sampling_parameters_name_themselves(kwargs, name):
    with pytest.raises(ValueError, match=f"{name} must be"):
        SamplingParams(**kwargs)


@pytest.mark.parametrize(
    "ids",
    ["65", b"65", [1.5], [True, 2], [[1, 2]], np.array([[1, 2]]), 7, np.int64(7), torch.tensor(7)],
)
def test_token_ids_that_are_not_a_flat_sequence_of_integers_are_refused(ids):
    with pytest.raises(ValueError, match="ids"):
        check_ids("ids", ids, 100)
    with pytest.raises(ValueError, match="token_ids"):
        Tokenizer().decode(ids)


def test_token_ids_out_of_range_and_valid_array_ids():
    with pytest.raises(ValueError, match=r"ids must lie in \[0, 99\], got 100"):
        check_ids("ids", [3, 100], 100)
    assert check_ids("ids", np.array([3, 4]), 100) == [3, 4]
    assert check_ids("ids", torch.tensor([5]), 100) == [5]


def test_check_real_reports_the_allowed_range():
    assert check_real("x", np.float32(0.5), "in (0, 1]", lambda v: 0 < v <= 1) == 0.5
    with pytest.raises(ValueError, match=r"x must be in \(0, 1\], got 2"):
        check_real("x", 2, "in (0, 1]", lambda v: 0 < v <= 1)


@pytest.mark.parametrize("ids", [[1.5, 2.0], [True, 2], "12", [[1, 2]]])
def test_generate_refuses_ids_that_are_not_integers(draft, ids):
    from specdec_lib import generate

    with pytest.raises(ValueError, match="prompt_token_ids"):
        generate(draft, ids, SamplingParams(max_tokens=2))


def test_generate_takes_a_numpy_array_of_ids(draft):
    from specdec_lib import generate

    params = SamplingParams(max_tokens=3)
    assert generate(draft, np.array([5, 6]), params) == generate(draft, [5, 6], params)


def test_drafters_refuse_nested_or_out_of_range_context(draft):
    from specdec_lib import DraftModelDrafter, NgramDrafter

    with pytest.raises(ValueError, match="context must hold integer"):
        NgramDrafter().propose([[1, 2], [3, 4]], 3)
    vocab = draft.config.vocab_size
    with pytest.raises(ValueError, match=rf"context must lie in \[0, {vocab - 1}\]"):
        DraftModelDrafter(draft).propose([vocab], 3, SamplingParams())
    with pytest.raises(ValueError, match="context must lie"):
        NgramDrafter().propose([1, -1, 1], 2)
