"""The early-exit drafter: the target's own first layers, read by its own final norm and
output layer; and the one-pass agreement that gives its first-position acceptance at every
depth."""

from __future__ import annotations

import pytest
import torch
from smollm2_pass_cost import peak_rates

from specdec_lib import SamplingParams, SpeculationStats, generate, load_model, speculative_generate
from specdec_lib.engine.drafters import DraftModelDrafter
from specdec_lib.engine.model import early_exit
from specdec_lib.experiments.exit_agreement import exit_agreement
from specdec_lib.text.language import workload_prompts
from specdec_lib.text.tokenizer import Tokenizer


@pytest.fixture(scope="module")
def target():
    return load_model("target")


@pytest.fixture(scope="module")
def written(target):
    """A prompt and what the target writes after it greedily."""
    prompt = Tokenizer().encode(workload_prompts("novel", 1, seed=5)[0])
    return prompt, generate(target, prompt, SamplingParams(max_tokens=40))


def test_an_early_exit_shares_every_tensor_with_its_target(target):
    draft = early_exit(target, 2)
    own = {p.data_ptr() for p in target.parameters()}
    assert draft.config.n_layer == 2
    assert {p.data_ptr() for p in draft.parameters()} <= own
    assert draft.lm_head.weight is target.model.embed_tokens.weight


def test_its_guess_is_the_argmax_the_agreement_reads_at_that_depth(target, written):
    prompt, out = written
    tokens = prompt + out
    with torch.inference_mode():
        logits = early_exit(target, 2)(torch.tensor([tokens]))[0]
    guess = logits[len(prompt) - 1 : -1].argmax(-1)
    share = float((guess == torch.tensor(out)).double().mean())
    agreement = exit_agreement(target, tokens, len(prompt))
    assert len(agreement) == target.config.n_layer
    assert agreement[1] == pytest.approx(share)
    assert agreement[-1] == 1.0  # all layers: the text is the target's own greedy output


def test_greedy_speculation_with_an_early_exit_is_greedy_decoding(target, written):
    prompt, out = written
    for layers in (1, 3):
        stats = SpeculationStats()
        drafter = DraftModelDrafter(early_exit(target, layers))
        params = SamplingParams(max_tokens=40)
        got = speculative_generate(target, drafter, prompt, params, k=3, stats=stats)
        assert got == out
        assert stats.proposed > 0


@pytest.mark.parametrize("layers", [0, 4, 2.5])
def test_an_early_exit_needs_a_depth_short_of_the_target(target, layers):
    with pytest.raises(ValueError, match="layers"):
        early_exit(target, layers)


def test_an_early_exit_is_made_of_a_tinygpt():
    with pytest.raises(ValueError, match="model"):
        early_exit(torch.nn.Linear(2, 2), 1)


def test_the_agreement_needs_written_text_after_the_prompt(target):
    with pytest.raises(ValueError, match="start"):
        exit_agreement(target, [1, 2, 3], 3)


def test_peak_rates_are_positive_and_refuse_an_empty_buffer():
    rates = peak_rates(buffer_mb=8)
    assert rates.bandwidth > 0 and rates.flops > 0 and rates.balance > 0
    with pytest.raises(ValueError, match="buffer_mb"):
        peak_rates(buffer_mb=0)


def test_smollm2_prompts_are_built_from_the_standard_library_and_refuse_bad_requests():
    from specdec_lib.text.stdlib_prompts import SMOLLM2_WORKLOADS, smollm2_prompts

    for w in SMOLLM2_WORKLOADS:
        prompts = smollm2_prompts(w, 8)
        assert len(prompts) == 8 and len(set(prompts)) == 8
    recite = smollm2_prompts("recite", 1)[0]
    source, again = recite.split("(an exact copy)\n")
    assert again and again in source  # the function's first lines, shown twice
    with pytest.raises(ValueError, match="workload"):
        smollm2_prompts("copy", 1)
    with pytest.raises(ValueError, match="n must"):
        smollm2_prompts("open", 9)
