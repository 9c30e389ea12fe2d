import math

import pytest
import torch

from specdec_lib import SamplingParams, process_logits


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"temperature": -0.1}, "temperature"),
        ({"temperature": math.inf}, "temperature"),
        ({"top_p": 0.0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
        ({"top_k": 0}, "top_k"),
        ({"max_tokens": 0}, "max_tokens"),
    ],
)
def test_bad_sampling_parameters_are_refused_by_name(kwargs, name):
    with pytest.raises(ValueError, match=name):
        SamplingParams(**kwargs)


def test_sampling_params_are_frozen():
    with pytest.raises(AttributeError):
        SamplingParams().temperature = 1.0


def test_greedy_processing_is_the_one_hot_argmax():
    logits = torch.tensor([0.1, 2.0, -1.0])
    assert process_logits(logits, SamplingParams()).tolist() == [0.0, 1.0, 0.0]


def test_temperature_scales_logits_before_softmax():
    logits = torch.tensor([1.0, 2.0, 3.0])
    got = process_logits(logits, SamplingParams(temperature=2.0))
    torch.testing.assert_close(got, torch.softmax(logits.double() / 2, -1))


def test_top_k_keeps_the_k_most_likely_tokens_renormalised():
    logits = torch.log(torch.tensor([0.1, 0.4, 0.2, 0.3]))
    got = process_logits(logits, SamplingParams(temperature=1.0, top_k=2))
    torch.testing.assert_close(got, torch.tensor([0, 4 / 7, 0, 3 / 7], dtype=torch.float64))


def test_top_p_keeps_the_smallest_prefix_reaching_p():
    logits = torch.log(torch.tensor([0.1, 0.4, 0.2, 0.3]))
    got = process_logits(logits, SamplingParams(temperature=1.0, top_p=0.65))
    torch.testing.assert_close(got, torch.tensor([0, 4 / 7, 0, 3 / 7], dtype=torch.float64))
    tiny = process_logits(logits, SamplingParams(temperature=1.0, top_p=0.01))
    assert tiny.tolist() == [0.0, 1.0, 0.0, 0.0]  # never empty


def test_top_k_is_applied_before_top_p():
    logits = torch.log(torch.tensor([0.05, 0.45, 0.3, 0.2]))
    got = process_logits(logits, SamplingParams(temperature=1.0, top_k=2, top_p=0.55))
    # top-k first renormalises the pair to (0.6, 0.4), so top-p 0.55 keeps one token;
    # top-p first would have kept two (0.45 alone is short of 0.55).
    assert got.tolist() == [0.0, 1.0, 0.0, 0.0]


def test_processing_works_on_batches_of_rows():
    logits = torch.randn(3, 5, 17)
    got = process_logits(logits, SamplingParams(temperature=0.7, top_k=5, top_p=0.9))
    assert got.shape == (3, 5, 17)
    torch.testing.assert_close(got.sum(-1), torch.ones(3, 5, dtype=torch.float64))
