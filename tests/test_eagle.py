"""The EAGLE head: its shapes and draft-vocabulary map, exact decoding through the one
speculation loop whatever its weights, the distribution its sampled drafts report, bad
input refused, and no measurement prompt in its training data."""

from __future__ import annotations

import inspect
import shlex

import numpy as np
import pytest
import torch

from specdec_lib import SamplingParams, SpeculationStats, generate, speculative_generate
from specdec_lib.analysis.hypothesis import distribution_test, first_tokens
from specdec_lib.engine import eagle_data
from specdec_lib.engine.drafters import Proposal
from specdec_lib.engine.eagle import (
    EagleDrafter,
    EagleHead,
    EagleOrLookupDrafter,
    check_d2t,
    draft_vocabulary,
    eagle_info,
    load_eagle,
    save_eagle,
)
from specdec_lib.engine.eagle_tree import EagleTreeDrafter
from specdec_lib.engine.generate import speculate
from specdec_lib.engine.sampling import process_logits
from specdec_lib.engine.smollm2 import SmolLM2Tokenizer, load_smollm2
from specdec_lib.engine.train_eagle import EagleTrainConfig, eagle_losses, make_batch, train_eagle
from specdec_lib.engine.tree import TokenTree
from specdec_lib.engine.verify import sampled_rule


def untrained_head(target, size, seed=0):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        d2t = torch.randperm(target.config.vocab_size)[:size]
        return EagleHead(target, d2t).eval()


@pytest.fixture(scope="module")
def smollm2():
    return load_smollm2(1024), SmolLM2Tokenizer()


def test_the_draft_vocabulary_holds_the_most_frequent_tokens_most_frequent_first():
    counts = torch.tensor([5, 0, 9, 5, 1])
    assert draft_vocabulary(counts, 3).tolist() == [2, 0, 3]  # ties by id
    assert draft_vocabulary(counts, 5).tolist() == [2, 0, 3, 4, 1]


def test_the_head_reads_features_and_next_tokens_and_guesses_over_the_draft_vocabulary(target):
    head = untrained_head(target, 64)
    C = target.config.n_embd
    logits, guess = head(torch.randn(2, 7, C), torch.randint(0, 64, (2, 7)))
    assert logits.shape == (2, 7, 64) and guess.shape == (2, 7, C)
    # the output rows are the target's embedding rows of d2t, and they stay frozen
    torch.testing.assert_close(head.decoder.lm_head.weight, target.lm_head.weight[head.d2t])
    assert not head.decoder.lm_head.weight.requires_grad
    assert head.decoder.model.norm is target.model.norm
    assert set(head.trained_state()) == {"d2t", "fc.weight"} | {
        k for k in head.state_dict() if k.startswith("decoder.model.layers.")
    }


def test_a_cached_pass_equals_an_uncached_one(target):
    head = untrained_head(target, 64)
    feats, toks = torch.randn(1, 9, target.config.n_embd), torch.randint(0, 99, (1, 9))
    whole, _ = head(feats, toks)
    cache = head.decoder.new_cache(1)
    first, _ = head(feats[:, :5], toks[:, :5], cache)
    rest, _ = head(feats[:, 5:], toks[:, 5:], cache)
    torch.testing.assert_close(torch.cat([first, rest], 1), whole, atol=1e-5, rtol=1e-4)


class OracleDrafter(EagleDrafter):
    """Runs the head (its cache, its features), then proposes a right prefix of the
    target's own greedy output followed by the head's guesses: rounds that accept some
    tokens and reject others, so the features the round hands over are checked on both."""

    def __init__(self, head, truth):
        super().__init__(head)
        self.truth = truth

    def draft(self, context, k, params, generator):
        p = super().draft(context, k, params, generator)
        if not p.tokens:
            return p
        right = self.truth[len(context) : len(context) + (len(context) % k)]
        return Proposal((right + p.tokens)[:k], None, p.draft_passes)


def test_greedy_decoding_with_an_untrained_head_equals_plain_decoding(smollm2):
    model, tok = smollm2
    head = untrained_head(model, 2048)
    params = SamplingParams(max_tokens=12)
    prompts = [
        "<|im_start|>user\nName a river in Europe.<|im_end|>\n<|im_start|>assistant\n",
        "def area(r):\n    return 3.14159 * r * r\n\n\ndef perimeter(r):\n",
    ]
    for text in prompts:
        ids = tok.encode(text)
        plain = generate(model, ids, params)
        stats = SpeculationStats()
        assert speculative_generate(model, EagleDrafter(head), ids, params, 4, stats=stats) == plain
        assert stats.draft_passes > 0
        oracle = OracleDrafter(head, ids + plain)
        assert speculative_generate(model, oracle, ids, params, 4) == plain
        # the features it was handed are the target's, position by position
        n = len(ids) + len(plain)  # features of positions 0..n-2 are known after the last round
        with torch.inference_mode():
            _, states = model(torch.tensor([ids + plain]), hidden=True)
        torch.testing.assert_close(oracle.feats[: n - 1], states[0, : n - 1], atol=1e-3, rtol=0)


class OracleTreeDrafter(EagleTreeDrafter):
    """EAGLE-2's tree with the truth written into its last branch (the root's last child,
    then each last child), so rounds accept a path that is not the tree's first branch."""

    def __init__(self, head, truth):
        super().__init__(head, width=3, budget=8)
        self.truth = truth

    def draft_tree(self, context, max_depth, params, generator):
        tree = super().draft_tree(context, max_depth, params, generator)
        tokens, node, depth = list(tree.tokens), -1, 0
        while children := tree.children(node):
            node = children[-1]
            tokens[node] = self.truth[len(context) + depth]
            depth += 1
        return TokenTree(tokens, tree.parents, None, tree.draft_passes)


def test_eagle2_trees_decode_exactly_and_hand_over_the_accepted_paths_features(target):
    head = untrained_head(target, 512)
    params = SamplingParams(max_tokens=30)
    for seed in range(2):
        ids = torch.randint(0, 4000, (12,), generator=torch.Generator().manual_seed(seed))
        ids = ids.tolist()
        plain = generate(target, ids, params)
        stats = SpeculationStats()
        tree = EagleTreeDrafter(head, width=3, budget=8)
        assert speculate(target, [tree], [ids], params, 4, stats=stats)[0] == plain
        assert stats.proposed > stats.rounds  # trees, not chains
        oracle, stats = OracleTreeDrafter(head, ids + plain), SpeculationStats()
        assert speculate(target, [oracle], [ids], params, 4, stats=stats)[0] == plain
        assert stats.accepted > 0
        n = len(ids) + len(plain)
        with torch.inference_mode():
            _, states = target(torch.tensor([ids + plain]), hidden=True)
        torch.testing.assert_close(oracle.feats[: n - 1], states[0, : n - 1], atol=1e-4, rtol=0)
    # sampled: each node carries the distribution it was drawn from, on the full vocabulary
    sampled = SamplingParams(temperature=1.0, max_tokens=30)
    tree = EagleTreeDrafter(head, width=3, budget=8)
    g = torch.Generator().manual_seed(0)
    out = speculate(target, [tree], [ids], sampled, 4, generator=g)[0]
    drawn = tree.draft_tree(ids + out, 3, sampled, g)
    assert drawn.probs.shape == (len(drawn), target.config.vocab_size)
    torch.testing.assert_close(drawn.probs.sum(-1), torch.ones(len(drawn), dtype=torch.float64))
    assert all(float(drawn.probs[i, t]) > 0 for i, t in enumerate(drawn.tokens))


def test_sampled_drafts_report_the_distribution_they_were_drawn_from_on_the_full_vocabulary(
    target,
):
    # A place where the mistake below is large (total variation 0.19 from p, computed
    # exactly): a spread-out p at temperature 1.5, and a draft vocabulary of the target's 64
    # likeliest tokens there, so that p and q overlap.
    params = SamplingParams(temperature=1.5)
    context = [300, 12, 45, 1000, 7, 64, 2000, 11]
    with torch.inference_mode():
        logits, states = target(torch.tensor([context]), hidden=True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        head = EagleHead(target, torch.topk(logits[0, -1], 64).indices).eval()
    drafter = EagleDrafter(head)
    drafter.observe(states[0, :-1], len(context))
    g = torch.Generator().manual_seed(0)
    q = None
    counts = torch.zeros(target.config.vocab_size)
    for _ in range(1500):
        p = drafter.draft(context, 1, params, g)
        q = p.probs[0] if q is None else q
        torch.testing.assert_close(p.probs[0], q, atol=1e-5, rtol=0)  # one context, one q
        counts[p.tokens[0]] += 1
    assert float(q.sum()) == pytest.approx(1.0) and int((q > 0).sum()) == 64
    assert bool((q[head.d2t] > 0).any()) and float(q[head.d2t].sum()) == pytest.approx(1.0)
    assert distribution_test(counts, q).passed  # drawn from the q it reports
    # Verified with that q, the first emitted token follows the target's p ...
    row = logits[0, -1]
    p_target = process_logits(row, params)
    good = first_tokens(sampled_rule, row, q, params, 3000, seed=1)
    count = lambda t: torch.from_numpy(np.bincount(t, minlength=len(q))).double()  # noqa: E731
    assert distribution_test(count(good), p_target).passed
    # ... and with the head's q before the temperature (not what it drew from), it does not.
    with torch.inference_mode():
        draft_logits, _ = drafter.catch_up(context)
    wrong = torch.zeros_like(q)
    wrong[head.d2t] = draft_logits.double().softmax(-1)
    bad = first_tokens(sampled_rule, row, wrong, params, 3000, seed=1, drawn_from=q)
    assert not distribution_test(count(bad), p_target).passed


def test_one_training_step_gives_finite_losses_and_gradients_only_to_the_head(target):
    head = untrained_head(target, 128).train()
    items = []
    for seed in range(3):
        g = torch.Generator().manual_seed(seed)
        tokens = torch.randint(0, 99, (20,), generator=g)
        with torch.no_grad():
            logits, states = target(tokens[None, :-1], hidden=True)
        items.append((tokens, states[0], logits[0].argmax(-1), 5, True))
    f_in, nxt, f_out, top, mask = make_batch(items, [0, 1, 2], 8, torch.Generator())
    assert f_in.shape == (3, 8, target.config.n_embd) and bool(mask.all())
    in_vocab = torch.zeros(target.config.vocab_size, dtype=torch.bool)
    in_vocab[head.d2t] = True
    out = eagle_losses(head, f_in, nxt, f_out, top, mask, in_vocab)
    (out["feature"] + out["token"]).backward()
    assert bool(torch.isfinite(out["feature"])) and bool(torch.isfinite(out["token"]))
    assert head.fc.weight.grad is not None and head.decoder.lm_head.weight.grad is None
    target.zero_grad(set_to_none=True)  # the shared final norm is the session's target's


def test_bad_input_is_refused_with_the_parameter_named(target):
    with pytest.raises(ValueError, match="target"):
        EagleHead("SmolLM2", torch.arange(8))
    for bad in (torch.tensor([1, 1]), torch.tensor([-1, 2]), torch.tensor([10**6])):
        with pytest.raises(ValueError, match="d2t"):
            check_d2t(bad, target.config.vocab_size)
    with pytest.raises(ValueError, match="size"):
        draft_vocabulary(torch.ones(10), 11)
    with pytest.raises(ValueError, match="head"):
        EagleDrafter(target)
    drafter = EagleDrafter(untrained_head(target, 16))
    with pytest.raises(ValueError, match="params"):
        drafter.draft([1, 2, 3], 2, None, None)
    with pytest.raises(ValueError, match="hidden"):
        drafter.observe(torch.zeros(5, target.config.n_embd), 3)
    with pytest.raises(ValueError, match="embeds"):
        target(torch.tensor([[1, 2]]), embeds=torch.zeros(1, 3, target.config.n_embd))
    with pytest.raises(ValueError, match="steps"):
        EagleTrainConfig(steps=0)
    assert drafter.draft([1, 2, 3], 2, SamplingParams(), None).tokens == []  # nothing observed


def test_no_measurement_prompt_shares_an_8_gram_with_the_training_prompts(smollm2):
    _, tok = smollm2
    measured = set()
    markers = {tok.encode("<|im_start|>")[0], tok.encode("<|im_end|>")[0]}
    for text in eagle_data.measurement_texts():
        ids = tok.encode(text)
        measured |= {tuple(ids[i : i + 8]) for i in range(len(ids) - 7)}
    measured = {g for g in measured if markers.isdisjoint(g)}  # the chat template aside
    prompts = eagle_data.dataset_prompts(tok)
    assert len(prompts) > 3000
    for ids in prompts:
        assert measured.isdisjoint(tuple(ids[i : i + 8]) for i in range(len(ids) - 7))
    # the check has teeth: a standard-library function the course measures on is caught
    caught = f"<|im_start|>user\nDocument this:\n{inspect.getsource(shlex.quote)}<|im_end|>\n"
    fresh = "<|im_start|>user\nWhat is a river delta?<|im_end|>\n<|im_start|>assistant\n"
    assert eagle_data.leaked([caught, fresh], tok.encode) == [0]


def test_a_short_training_run_lowers_the_loss_and_its_checkpoint_round_trips(target, tmp_path):
    params = SamplingParams(max_tokens=24)
    items = []
    for seed in range(12):  # the target's own greedy answers, as the real data
        prompt = torch.randint(5, 4000, (8,), generator=torch.Generator().manual_seed(seed))
        tokens = prompt.tolist() + generate(target, prompt.tolist(), params)
        with torch.inference_mode():
            logits, states = target(torch.tensor([tokens[:-1]]), hidden=True)
        items.append((torch.tensor(tokens), states[0], logits[0].argmax(-1), 8, True))
    cfg = EagleTrainConfig(
        draft_vocab=512,
        steps=60,
        batch=4,
        window=16,
        lr=3e-3,
        warmup=5,
        eval_every=30,
        eval_chains=6,
    )
    before = [p.requires_grad for p in target.parameters()]
    head, curve, summary = train_eagle(target, items, cfg, seconds=60, log=lambda m: None)
    assert [p.requires_grad for p in target.parameters()] == before  # left as it was found
    assert [p["step"] for p in curve] == [1, 30, 60] and summary["steps"] == 60
    assert curve[-1]["train_feature_loss"] < curve[0]["train_feature_loss"]
    assert curve[-1]["train_token_loss"] < curve[0]["train_token_loss"]
    save_eagle(head, {"gguf_sha256": "abc"}, tmp_path)
    again = load_eagle(target, "abc", tmp_path)
    for name, tensor in head.trained_state().items():
        assert torch.equal(again.trained_state()[name], tensor), name
    with pytest.raises(ValueError, match="another GGUF"):
        load_eagle(target, "def", tmp_path)
    (tmp_path / eagle_info(tmp_path)["file"]).write_bytes(b"changed")
    with pytest.raises(RuntimeError, match="SHA-256"):
        load_eagle(target, "abc", tmp_path)


def test_self_distillation_keeps_every_positions_feature_and_argmax(target):
    from specdec_lib.engine.eagle_data import _distill_batch

    prompts = [[5, 17, 42, 8, 99], [300, 12], [7, 7, 64, 2000, 11, 3, 9]]
    params = SamplingParams(max_tokens=6)
    plain = [generate(target, p, params) for p in prompts]
    stop = {plain[0][2]}  # row 0 stops at its third token
    rows = _distill_batch(target, prompts, SamplingParams(), stop, 6)
    for b, (prompt, row) in enumerate(zip(prompts, rows, strict=True)):
        tokens = row["tokens"].tolist()
        expected = plain[b][: plain[b].index(plain[0][2]) + 1] if stop & set(plain[b]) else plain[b]
        assert tokens == prompt + expected and int(row["n_prompt"]) == len(prompt)
        with torch.inference_mode():
            logits, states = target(torch.tensor([tokens[:-1]]), hidden=True)
        assert row["feats"].dtype == torch.float16 and len(row["feats"]) == len(tokens) - 1
        torch.testing.assert_close(row["feats"].float(), states[0], atol=2e-2, rtol=1e-2)
        assert row["tops"].tolist() == logits[0].argmax(-1).tolist()


def test_a_drafter_reused_for_new_prompts_never_drafts_from_another_contexts_features(target):
    drafter = EagleDrafter(untrained_head(target, 256))
    params = SamplingParams(max_tokens=8)
    for prompt in ([5, 17, 42, 8, 99], [300, 12, 45, 1000, 7]):
        stats = SpeculationStats()
        assert speculate(target, [drafter], [prompt], params, 3, stats=stats)[0] == generate(
            target, prompt, params
        )
        assert stats.log[0].proposed == [] and stats.log[1].proposed != []
    other = [1, 2, 3, 4, 5] + [9] * 8  # as long as the last context, but not it
    assert drafter.draft(other, 2, SamplingParams(), None).tokens == []


def test_the_head_or_lookup_drafter_copies_where_the_context_repeats_and_decodes_exactly(target):
    drafter = EagleOrLookupDrafter(untrained_head(target, 256), min_match=2)
    prompt = [5, 17, 42, 8, 99, 23, 7] * 3
    assert drafter.draft(prompt, 4, SamplingParams(), None).tokens == [5, 17, 42, 8]
    assert drafter.draft([1, 2, 3], 4, SamplingParams(), None).tokens == []  # no match, no state
    params, stats = SamplingParams(max_tokens=16), SpeculationStats()
    plain = generate(target, prompt, params)
    assert speculative_generate(target, drafter, prompt, params, 4, stats=stats) == plain
    assert stats.draft_passes < stats.proposed  # some rounds copied, at no draft pass
    with pytest.raises(ValueError, match="min_match"):
        EagleOrLookupDrafter(drafter.head, min_match=0)


def test_data_is_made_a_batch_a_file_and_a_stopped_run_resumes_where_it_stopped(
    target, tmp_path, monkeypatch
):
    from specdec_lib.engine import eagle_data

    prompts = [[5, 17, 42], [300, 12, 9], [7, 7, 64, 2000], [11, 3], [9, 9, 9, 9, 9]]
    monkeypatch.setattr(eagle_data, "dataset_prompts", lambda *a, **k: prompts)
    monkeypatch.setattr(eagle_data, "_measured_ngrams", lambda *a, **k: set())
    made = []
    real = eagle_data._distill_batch

    def counted(model, batch, *args):  # noqa: ANN001, ANN002, ANN202
        made.append(batch)
        return real(model, batch, *args)

    monkeypatch.setattr(eagle_data, "_distill_batch", counted)

    class Tok:
        eos_id = 1

        def encode(self, text):  # noqa: ANN001, ANN202
            return [2]

    cfg = eagle_data.DataConfig(max_new=4, batch=2)
    folder = tmp_path / "data"
    eagle_data.build_dataset(target, Tok(), cfg, 0, folder, log=lambda m: None, max_batches=2)
    first = made[:]
    assert len(first) == 2 and len(list(folder.glob("batch_*.safetensors"))) == 2
    meta = eagle_data.build_dataset(
        target, Tok(), cfg, 0, folder, log=lambda m: None, max_batches=3
    )
    assert len(made) == 3 and made[2] not in first  # only the missing batch was made now
    assert meta["batches"] == 3 and meta["sequences"] == 5
    tensors, again = eagle_data.load_dataset(folder)
    assert again == meta and int(tensors["lengths"].sum()) == len(tensors["tokens"])
    # a batch is the same whichever run made it: made afresh in one run, the files agree
    fresh = tmp_path / "fresh"
    eagle_data.build_dataset(target, Tok(), cfg, 0, fresh, log=lambda m: None, max_batches=3)
    for name in ("tokens", "tops", "greedy", "lengths"):
        assert torch.equal(eagle_data.load_dataset(fresh)[0][name], tensors[name]), name
    other = eagle_data.DataConfig(max_new=3, batch=2)
    eagle_data.build_dataset(
        target, Tok(), other, 0, tmp_path / "x", log=lambda m: None, max_batches=1
    )
    (tmp_path / "x" / "batch_0000.safetensors").rename(folder / "batch_0000.safetensors")
    with pytest.raises(ValueError, match="different recipes"):
        eagle_data.load_dataset(folder)
    with pytest.raises(ValueError, match="path must be a folder"):
        eagle_data.load_dataset(tmp_path / "empty")
