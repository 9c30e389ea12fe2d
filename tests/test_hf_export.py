"""The course's models exported to Hugging Face transformers, and transformers' rules replayed."""

import json
import random

import pytest
import torch
from transformers import LogitsProcessorList, TopPLogitsWarper
from transformers.generation.candidate_generator import PromptLookupCandidateGenerator

from specdec_lib import (
    DraftModelDrafter,
    ModelConfig,
    SamplingParams,
    SpeculationStats,
    TinyGPT,
    generate,
    speculative_generate,
)
from specdec_lib.experiments.hf_compare import (
    KEY_SMEAR_ATTENTION,
    ConfidenceStopDrafter,
    ForwardCounter,
    LeftmostNgramDrafter,
    export_hf,
    hf_config,
    hf_generate,
    load_hf,
    topp_forbidden_ids,
)

GREEDY = SamplingParams(temperature=0, max_tokens=12)


def tiny(smear_keys: bool, seed: int = 0) -> TinyGPT:
    torch.manual_seed(seed)
    config = ModelConfig(
        block_size=64,
        vocab_size=50,
        n_layer=2,
        n_head=2,
        n_embd=16,
        n_hidden=32,
        smear_keys=smear_keys,
    )
    model = TinyGPT(config).eval()
    if smear_keys:
        with torch.no_grad():
            for layer in model.model.layers:
                layer.self_attn.k_smear.normal_(0, 2)  # a real mix, not the zero init
    return model


@pytest.fixture(scope="module", params=[True, False], ids=["smeared", "plain"])
def pair(request, tmp_path_factory):
    model = tiny(request.param)
    return model, load_hf(export_hf(model, tmp_path_factory.mktemp("hf")))


def test_the_folder_holds_a_llama_config_and_the_weights(tmp_path):
    model = tiny(True)
    folder = export_hf(model, tmp_path / "m")
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "llama" and config["tie_word_embeddings"] is True
    assert config["attn_implementation"] == KEY_SMEAR_ATTENTION
    want = [layer.self_attn.k_smear.tolist() for layer in model.model.layers]
    assert config["key_smear_logits"] == want
    assert (folder / "model.safetensors").stat().st_size > 0
    assert "attn_implementation" not in hf_config(tiny(False))


def test_logits_agree_with_the_course_model(pair):
    model, hf = pair
    ids = torch.tensor([[random.Random(1).randrange(50) for _ in range(40)]])
    with torch.inference_mode():
        diff = (model(ids) - hf(ids).logits).abs().max().item()
    assert diff < 1e-4


def test_a_smeared_target_differs_from_plain_llama(tmp_path):
    """The smear matters: the same folder without it is off by far more than rounding."""
    model = tiny(True)
    folder = export_hf(model, tmp_path / "m")
    smeared = load_hf(folder)
    config = json.loads((folder / "config.json").read_text())
    del config["attn_implementation"], config["key_smear_logits"]
    (folder / "config.json").write_text(json.dumps(config))
    plain = load_hf(folder)
    ids = torch.tensor([list(range(1, 30))])
    with torch.inference_mode():
        kept = (model(ids) - smeared(ids).logits).abs().max().item()
        dropped = (model(ids) - plain(ids).logits).abs().max().item()
    assert dropped > 100 * max(kept, 1e-7)


def test_cached_greedy_generation_agrees_with_the_course(pair):
    """Cached passes over several new tokens need the registered mask, not only the function."""
    model, hf = pair
    prompt = [3, 7, 9, 3, 7, 11, 3, 7]
    x = torch.tensor([prompt])
    ref = generate(model, prompt, GREEDY)
    out = hf.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=12, do_sample=False)
    assert out[0, len(prompt) :].tolist() == ref
    pld = hf.generate(
        x,
        attention_mask=torch.ones_like(x),
        max_new_tokens=12,
        do_sample=False,
        prompt_lookup_num_tokens=4,
    )
    assert pld[0, len(prompt) :].tolist() == ref


def test_assisted_generation_counts_both_models_passes(tmp_path):
    target, draft = tiny(True, 1), tiny(False, 2)
    hf_target = load_hf(export_hf(target, tmp_path / "t"))
    hf_draft = load_hf(export_hf(draft, tmp_path / "d"))
    hf_draft.generation_config.num_assistant_tokens = 3
    hf_draft.generation_config.assistant_confidence_threshold = 0.0
    prompt = [1, 2, 3, 4]
    out, passes, draft_passes = hf_generate(hf_target, prompt, 12, assistant_model=hf_draft)
    stats = SpeculationStats()
    ours = speculative_generate(target, DraftModelDrafter(draft), prompt, GREEDY, k=3, stats=stats)
    assert out == ours == generate(target, prompt, GREEDY)
    assert (passes, draft_passes) == (stats.target_passes, stats.draft_passes)
    with pytest.raises(ValueError, match="max_new_tokens"):
        hf_generate(hf_target, prompt, 0)
    with pytest.raises(ValueError, match="prompt_token_ids"):
        hf_generate(hf_target, [], 4)


def test_forward_counter_counts_calls_and_detaches():
    model = tiny(False)
    with ForwardCounter(model) as counter:
        generate(model, [1, 2, 3], GREEDY)
    generate(model, [1, 2, 3], GREEDY)
    assert counter.calls == GREEDY.max_tokens


@pytest.mark.parametrize("seed", range(40))
def test_leftmost_drafter_proposes_what_transformers_prompt_lookup_proposes(seed):
    rng = random.Random(seed)
    context = [rng.randrange(6) for _ in range(rng.randrange(2, 30))]
    k = rng.randrange(1, 8)
    hf = PromptLookupCandidateGenerator(
        num_output_tokens=k, max_matching_ngram_size=2, max_length=10**6
    )
    x = torch.tensor([context])
    want = hf.get_candidates(x)[0][0, len(context) :].tolist()
    assert LeftmostNgramDrafter().propose(context, k).tokens == want


def test_leftmost_drafter_takes_the_first_occurrence():
    context = [5, 1, 2, 9, 1, 2, 8, 1, 2]
    assert LeftmostNgramDrafter().propose(context, 2).tokens == [9, 1]
    assert LeftmostNgramDrafter().find_match([4, 4]) == (0, 1)
    assert LeftmostNgramDrafter().find_match([4, 5]) is None


def test_confidence_stop_at_zero_is_the_plain_draft_model():
    target, draft = tiny(True, 1), tiny(False, 2)
    a, b = SpeculationStats(), SpeculationStats()
    prompt = [1, 2, 3, 4]
    out_a = speculative_generate(
        target, ConfidenceStopDrafter(draft, 0.0), prompt, GREEDY, k=3, stats=a
    )
    out_b = speculative_generate(target, DraftModelDrafter(draft), prompt, GREEDY, k=3, stats=b)
    assert out_a == out_b == generate(target, prompt, GREEDY)
    assert (a.target_passes, a.draft_passes) == (b.target_passes, b.draft_passes)


def test_confidence_stop_at_one_drafts_a_single_token():
    proposal = ConfidenceStopDrafter(tiny(False), 1.0).propose([1, 2, 3], 5, GREEDY)
    assert len(proposal.tokens) == 1 and proposal.draft_passes == 1


def test_topp_screen_forbids_a_tenth_of_the_vocabulary():
    forbidden = topp_forbidden_ids(0.9, 1000)
    warped = LogitsProcessorList([TopPLogitsWarper(0.9)])(
        torch.zeros(1, 1, dtype=torch.long), torch.ones(1, 1000)
    )
    assert forbidden == torch.isinf(warped[0]).nonzero().flatten().tolist()
    assert len(forbidden) == 100


def test_bad_arguments_are_refused(tmp_path):
    with pytest.raises(ValueError, match="model"):
        export_hf(torch.nn.Linear(2, 2), tmp_path)
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="directory"):
        export_hf(tiny(False), tmp_path / "file")
    with pytest.raises(ValueError, match="directory"):
        load_hf(tmp_path)
    with pytest.raises(ValueError, match="module"):
        ForwardCounter("model")
    with pytest.raises(ValueError, match="threshold"):
        ConfidenceStopDrafter(tiny(False), 1.5)
    with pytest.raises(ValueError, match="params"):
        ConfidenceStopDrafter(tiny(False)).propose([1, 2], 2, SamplingParams(temperature=1.0))
    with pytest.raises(ValueError, match="k"):
        ConfidenceStopDrafter(tiny(False)).propose([1, 2], -1, GREEDY)
    with pytest.raises(ValueError, match="top_p"):
        topp_forbidden_ids(0.0, 10)
    with pytest.raises(ValueError, match="max_n"):
        LeftmostNgramDrafter(max_n=0)
