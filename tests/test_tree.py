"""Token trees: the layout scores every node as its own chain would be, the kept path's cache
equals decoding it, greedy tree speculation equals plain decoding, and the multi-draft rule
is exact by enumeration (its two plausible bugs are not)."""

import functools
import random

import numpy as np
import pytest
import torch

from specdec_lib import ModelConfig, SamplingParams, SpeculationStats, TinyGPT, generate
from specdec_lib.analysis.hypothesis import distribution_test
from specdec_lib.engine import tree as tree_module
from specdec_lib.engine.model import Layout
from specdec_lib.engine.sampling import process_logits
from specdec_lib.engine.tree import (
    TokenTree,
    ancestor_mask,
    chain,
    keep_path,
    node_depths,
    tree_layout,
    typical_walk,
    walk_greedy,
    walk_sampled,
)
from specdec_lib.engine.tree_decode import (
    DraftModelTreeDrafter,
    NgramTreeDrafter,
    TreeShape,
    tree_speculate,
    tree_speculative_generate,
)
from specdec_lib.experiments.mutants import CORRECT
from specdec_lib.experiments.sibling_draws import (
    exact_first_token,
    sampled_first_tokens,
    sibling_draws,
)
from specdec_lib.experiments.tree_mutants import TREE_MUTANTS, TinyTreeSetup, tree_end_to_end_test

V = 40
# node: 0 1 2 3 4 5
PARENTS = [-1, -1, 0, 0, 2, 1]  # two root children; node 0 has two children; depth up to 3


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(1)
    config = ModelConfig(
        block_size=64, vocab_size=V, n_layer=2, n_head=4, n_kv_head=2, n_embd=32, n_hidden=48
    )
    m = TinyGPT(config).eval()
    with torch.no_grad():
        for layer in m.model.layers:
            layer.self_attn.k_smear.normal_(0, 2)  # the smear must follow parents, not slots
    return m


def test_mask_and_depths_of_a_small_tree():
    assert node_depths(PARENTS) == [0, 0, 1, 1, 2, 1]
    mask = ancestor_mask(PARENTS)
    assert mask[4].nonzero().flatten().tolist() == [0, 2, 4]
    assert mask[3].nonzero().flatten().tolist() == [0, 3]  # not its sibling 2
    assert mask[5].nonzero().flatten().tolist() == [1, 5]  # not its cousin's branch
    tree = TokenTree([5, 6, 7, 8, 9, 10], PARENTS)
    assert tree.children(-1) == [0, 1] and tree.children(0) == [2, 3] and tree.path(4) == [0, 2, 4]


def test_bad_trees_and_layouts_are_refused():
    with pytest.raises(ValueError, match=r"parents\[1\]"):
        TokenTree([1, 2], [-1, 1])  # a node cannot be its own parent
    with pytest.raises(ValueError, match="as long"):
        TokenTree([1, 2], [-1])
    with pytest.raises(ValueError, match="at least|>= 1 token"):
        tree_layout([0], [2], [[-1, 0]])  # nothing before the tree
    layout = tree_layout([3], [4], [[-1, 0, 0]])
    with pytest.raises(ValueError, match="layout shapes"):
        Layout(layout.positions, layout.mask, layout.before).check(1, 5, 7)
    with pytest.raises(ValueError, match="rank|parent|sibling"):
        TreeShape(((1,),))  # a second choice without a first


@torch.inference_mode()
def test_every_node_is_scored_as_its_own_chain(model):
    context = [3, 17, 4, 9, 22, 31, 8]
    tokens = [11, 12, 13, 14, 15, 16]
    cache = model.new_cache(1)
    model(torch.tensor([context[:-2]]), cache)  # cached: all but the last two
    fed = context[-2:] + tokens
    layout = tree_layout([len(context) - 2], [len(fed)], [PARENTS])
    logits = model(torch.tensor([fed]), cache, layout=layout)[0]
    tree = TokenTree(tokens, PARENTS)
    for node in range(-1, len(tokens)):
        path = [] if node < 0 else [tokens[i] for i in tree.path(node)]
        expected = model(torch.tensor([context + path]))[0, -1]  # uncached, a plain chain
        torch.testing.assert_close(logits[1 + 1 + node], expected, atol=1e-5, rtol=1e-5)


@torch.inference_mode()
def test_a_chain_laid_out_as_a_tree_is_the_plain_pass(model):
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    plain = model(ids, model.new_cache(1))
    cache = model.new_cache(1)
    laid = model(ids, cache, layout=tree_layout([0], [5], [chain([7, 8, 9]).parents]))
    torch.testing.assert_close(laid, plain)


@torch.inference_mode()
def test_kept_path_leaves_the_cache_as_decoding_would(model):
    context = [3, 17, 4, 9, 22]
    tokens = [11, 12, 13, 14, 15, 16]
    tree = TokenTree(tokens, PARENTS)
    cache = model.new_cache(1)
    model(torch.tensor([context[:-1]]), cache)
    start = len(context)
    model(
        torch.tensor([context[-1:] + tokens]),
        cache,
        layout=tree_layout([start - 1], [1 + len(tokens)], [PARENTS]),
    )
    path = tree.path(4)
    keep_path(cache, 0, start, path)
    cache.crop(start + len(path))
    nxt = model(torch.tensor([[21]]), cache)[0, -1]
    expected = model(torch.tensor([context + [tokens[i] for i in path] + [21]]))[0, -1]
    torch.testing.assert_close(nxt, expected, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="path"):
        keep_path(cache, 0, start, [2, 0])


def test_greedy_walk_follows_the_target_and_adds_its_token():
    tree = TokenTree([5, 6, 7, 8, 9, 10], PARENTS)
    logits = torch.full((7, V), -1.0)
    for row, best in ((0, 5), (1, 8), (4, 30)):  # root -> 5, node 0 -> 8, node 3 -> 30
        logits[row, best] = 1.0
    assert walk_greedy(logits, tree) == ([0, 3], [5, 8, 30])
    logits[0] = -1.0
    logits[0, 33] = 1.0  # no root child matches: the target's own token
    assert walk_greedy(logits, tree) == ([], [33])


@pytest.mark.parametrize("workload", ["copy", "novel"])
def test_greedy_tree_speculation_is_plain_greedy_with_the_shipped_models(workload):
    from specdec_lib import Tokenizer, load_model, workload_prompts

    target, draft = load_model("target"), load_model("draft")
    params = SamplingParams(temperature=0, max_tokens=24)
    prompts = [Tokenizer().encode(p) for p in workload_prompts(workload, 3, seed=99)]
    drafters = [
        lambda: NgramTreeDrafter(max_nodes=7),
        lambda: DraftModelTreeDrafter(draft, TreeShape.branching([2, 2, 1])),
        lambda: DraftModelTreeDrafter(draft, TreeShape.chain(4)),
    ]
    for make in drafters:
        for prompt in prompts:
            assert tree_speculative_generate(target, make(), prompt, params) == generate(
                target, prompt, params
            )
        # batched: rows of different lengths and trees, each its own plain output
        outs = tree_speculate(target, [make() for _ in prompts], prompts, params, k=5)
        assert outs == [generate(target, p, params) for p in prompts]


@pytest.fixture(scope="module")
def small_case():
    g = torch.Generator().manual_seed(3)
    logits = torch.full((4, V), -30.0)
    logits[:, :5] = torch.randn(4, 5, generator=g) * 1.5
    q = torch.zeros(V, dtype=torch.float64)
    q[:5] = torch.softmax(torch.randn(5, generator=g, dtype=torch.float64) * 1.5, 0)
    return logits, q, SamplingParams(temperature=1.0)


def test_multi_draft_rule_is_exact_by_enumeration(small_case):
    logits, q, params = small_case
    p = process_logits(logits[0], params)
    assert sum(prob for prob, _ in sibling_draws(q, 2)) == pytest.approx(1.0)
    for m in (1, 2, 3):
        got = exact_first_token(walk_sampled, logits, sibling_draws(q, m), params)
        torch.testing.assert_close(got, p, atol=1e-12, rtol=0)
    # deterministic candidates (top-2 of q, probability 1 each): exact too
    top = TokenTree(torch.topk(q, 2).indices.tolist(), [-1, -1])
    got = exact_first_token(walk_sampled, logits, [(1.0, top)], params)
    torch.testing.assert_close(got, p, atol=1e-12, rtol=0)


def test_the_plausible_multi_draft_bugs_are_biased_and_the_test_sees_it(small_case):
    logits, q, params = small_case
    p = process_logits(logits[0], params)
    stale_walk = functools.partial(walk_sampled, update_residual=False)
    wrong = {
        "with-replacement rule": (walk_sampled, "parent"),
        "residual not updated": (stale_walk, "drawn"),
        "typical acceptance": (typical_walk, "drawn"),
    }
    for name, (walk, recorded) in wrong.items():
        biased = exact_first_token(walk, logits, sibling_draws(q, 2, recorded), params)
        assert float((biased - p).abs().sum()) > 1e-3, name
        assert float(biased.sum()) == pytest.approx(1.0)
    # sampled rounds of the exact rule agree with p; the stale residual's do not
    n = 4000
    good = sampled_first_tokens(walk_sampled, logits, q, 2, params, n, seed=5)
    bad = sampled_first_tokens(stale_walk, logits, q, 2, params, n, seed=5)
    count = lambda t: torch.from_numpy(np.bincount(t, minlength=V))  # noqa: E731
    assert distribution_test(count(good), p).passed
    assert not distribution_test(count(bad), p).passed


def test_untrained_heads_are_the_targets_own_guess_and_decode_exactly(model):
    from specdec_lib.engine.heads import HeadsTreeDrafter, MedusaHeads
    from specdec_lib.engine.train_heads import head_losses

    heads = MedusaHeads(model, 3)
    hidden = torch.randn(5, model.config.n_embd)
    for guess in heads(hidden):  # zero-initialised blocks: every head is lm_head
        torch.testing.assert_close(guess, model.lm_head(hidden))
    ids = torch.randint(0, V, (2, 9))
    _, h = model(ids[:, :-1], hidden=True)
    losses = head_losses(heads, h, ids)
    assert losses.shape == (3,) and bool(torch.isfinite(losses).all())
    with torch.no_grad():  # a nonzero head, so the tree's levels differ
        for block in heads.blocks:
            block.weight.normal_(0, 0.5)
    prompt = [3, 17, 4, 9, 22, 31, 8, 3, 17]
    params = SamplingParams(temperature=0, max_tokens=20)
    drafter = HeadsTreeDrafter(heads, TreeShape.branching([2, 2, 1]))
    assert len(drafter.draft_tree(prompt, 3, params, None)) == 0  # no hidden state yet
    stats = SpeculationStats()
    out = tree_speculative_generate(model, drafter, prompt, params, stats=stats)
    assert out == generate(model, prompt, params)
    assert stats.proposed > 0 and stats.target_passes <= 20
    sampled = drafter.draft_tree(prompt + out, 3, SamplingParams(temperature=1.0), None)
    assert len(sampled) == 2 + 4 + 4
    torch.testing.assert_close(sampled.probs.sum(-1), torch.ones(len(sampled), dtype=torch.float64))
    with pytest.raises(ValueError, match="deep"):
        HeadsTreeDrafter(heads, TreeShape.chain(4))


def test_one_path_ngram_tree_is_the_courses_ngram_chain():
    from specdec_lib import NgramDrafter

    context = [5, 6, 7, 1, 5, 6, 8, 2, 5, 6, 7, 3, 9, 5, 6]
    params = SamplingParams(temperature=0)
    for k in (1, 3, 7):
        tree = NgramTreeDrafter(max_nodes=k, max_paths=1).draft_tree(context, k, params, None)
        assert tree.tokens == NgramDrafter().propose(context, k).tokens
        assert tree.parents == list(range(-1, len(tree) - 1))
    # several matches: " 5 6" was followed by 7, 8 and 7 again; the trie shares the 7
    full = NgramTreeDrafter(max_nodes=7).draft_tree(context, 2, params, None)
    assert full.children(-1) == [0, 2] and [full.tokens[i] for i in (0, 2)] == [7, 8]


def test_sampled_tree_speculation_runs_seeded_and_counts_its_rounds():
    from specdec_lib import Tokenizer, load_model, workload_prompts

    target, draft = load_model("target"), load_model("draft")
    prompt = Tokenizer().encode(workload_prompts("edit", 1, seed=99)[0])
    params = SamplingParams(temperature=1.0, top_k=50, max_tokens=24)
    outs = []
    for _ in range(2):
        stats = SpeculationStats()
        drafter = DraftModelTreeDrafter(draft, TreeShape.branching([2, 1, 1]))
        g = torch.Generator().manual_seed(4)
        outs.append(
            tree_speculative_generate(target, drafter, prompt, params, generator=g, stats=stats)
        )
        assert len(outs[-1]) == 24 == stats.emitted
        assert stats.target_passes == stats.rounds < 24
        assert stats.rounds < stats.draft_passes <= 3 * stats.rounds  # a level a pass
    assert outs[0] == outs[1]


def test_heads_training_runs_deterministically_and_writes_checksummed_weights(tmp_path):
    import json

    from specdec_lib import load_model
    from specdec_lib.engine.heads import heads_info
    from specdec_lib.engine.train_heads import HeadsConfig, train_heads

    target = load_model("target")
    cfg = HeadsConfig(n_heads=2, steps=2, batch_size=2, window=32, probe_every=2)
    runs = [train_heads(target, cfg, progress=False, probe=False) for _ in range(2)]
    for (a, _, _), (b, _, _) in [runs]:
        for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True):
            assert torch.equal(x, y)
    heads, curve, seconds = runs[0]
    assert [p["step"] for p in curve] == [0, 2] and curve[0]["loss"] is None
    assert len(curve[-1]["loss"]) == 2
    with pytest.raises(ValueError, match="stride"):
        HeadsConfig(stride=0)
    with pytest.raises(FileNotFoundError):
        heads_info(tmp_path)
    assert json.loads(json.dumps(curve)) == curve


def test_a_drafters_tree_is_checked_like_any_input(model):
    class Bad:
        name = "bad"

        def __init__(self, tree):
            self.tree = tree

        def draft_tree(self, context, max_depth, params, generator):
            return self.tree

    params = SamplingParams(temperature=0, max_tokens=6)
    prompt = [3, 17, 4, 9]
    for tree, match in (
        (TokenTree([V + 3], [-1]), "tokens"),  # an id outside the vocabulary
        (TokenTree([1] * 9, [-1] * 9), "max_nodes"),  # more nodes than allowed
        (chain([1] * 7), "depth"),  # deeper than the tokens left allow
    ):
        with pytest.raises(ValueError, match=match):
            tree_speculate(model, [Bad(tree)], [prompt], params, max_nodes=8)
    with pytest.raises(ValueError, match="max_nodes must be <="):
        tree_speculate(model, [Bad(chain([1]))], [prompt], params, max_nodes=60)
    with pytest.raises(ValueError, match="at least one rank path"):
        TreeShape(())


@torch.inference_mode()
def test_a_tree_grown_level_by_level_in_the_cache_scores_as_one_pass(model):
    context = [3, 17, 4, 9, 22]
    tokens = [11, 12, 13, 14, 15, 16]
    cache = model.new_cache(1)
    model(torch.tensor([context]), cache)  # all of the context cached, as a drafter does
    whole = model(torch.tensor([tokens]), cache, layout=tree_layout([5], [6], [PARENTS]))[0]
    cache.crop(5)
    levels = [[0, 1], [2, 3, 4], [5]]  # consecutive groups, each fed after the last
    done, parts = 0, []
    for level in levels:
        new = len(level)
        layout = tree_layout([5 + done], [new], [PARENTS[: done + new]], kept=[done])
        parts.append(model(torch.tensor([tokens[done : done + new]]), cache, layout=layout)[0])
        done += new
    torch.testing.assert_close(torch.cat(parts), whole, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="kept"):
        tree_layout([5], [2], [PARENTS], kept=[3])  # kept nodes must be fed alone


def test_ranked_orders_like_a_stable_sort_ties_to_the_lower_id():
    from specdec_lib.engine.tree import ranked

    row = torch.tensor([0.5, 2.0, 1.0, 2.0, -1.0])
    order = torch.argsort(row, descending=True, stable=True).tolist()
    assert [ranked(row, r) for r in range(5)] == order == [1, 3, 2, 0, 4]


def test_whole_sampled_tree_generations_follow_the_joint_law_and_a_stale_residual_does_not():
    # Two tiny models, the draft model's tree of 3 sampled children with a child each, 3
    # tokens per generation: the first two tokens of 1,000 whole generations (drafts,
    # layout, walk, kept cache) against the target's exact joint law, at alpha = 1e-3.
    setup = TinyTreeSetup()
    stale = next(m for m in TREE_MUTANTS if m.name == "stale residual")
    with torch.inference_mode():
        row = setup.target(torch.tensor([setup.context]))[0, -1]
        q = process_logits(setup.draft(torch.tensor([setup.context]))[0, -1], setup.params)
    p = process_logits(row, setup.params)
    draws = sibling_draws(q, 3)
    with stale.active():  # the bias the test must see: exact, on the first token alone
        biased = exact_first_token(tree_module.walk_sampled, row.repeat(4, 1), draws, setup.params)
    assert 0.5 * float((biased - p).abs().sum()) > 0.1
    n = 1000
    assert setup.joint.sum() == pytest.approx(1.0)
    assert not tree_end_to_end_test(CORRECT, setup, n, seed=0)
    assert tree_end_to_end_test(stale, setup, n, seed=0)


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(temperature=1.0, top_k=3, max_tokens=24),
        SamplingParams(temperature=1.0, top_p=0.3, max_tokens=24),
    ],
    ids=["top-k 3", "top-p 0.3"],
)
def test_tree_drafters_leave_out_children_a_restrictive_filter_cannot_give(params):
    """A node asks for 5 children (Medusa's root asks for 10) but top-k 3 or a small top-p
    leaves fewer tokens: the missing children and their subtrees are left out, the tree stays
    valid, every node is a distinct token the drafter's filter allows, and decoding runs."""
    from specdec_lib import Tokenizer, load_model, workload_prompts
    from specdec_lib.engine.heads import HeadsTreeDrafter, load_heads

    target, draft = load_model("target"), load_model("draft")
    ids = Tokenizer().encode(workload_prompts("novel", 1, seed=3)[0])
    shape = TreeShape.branching([5, 3, 2])  # 5 + 15 + 30 = 50 nodes asked for
    g = torch.Generator().manual_seed(0)
    tree = DraftModelTreeDrafter(draft, shape).draft_tree(ids, 4, params, g)
    assert 0 < len(tree) < len(shape.paths)
    with torch.no_grad():
        allowed = process_logits(draft(torch.tensor([ids]))[0, -1], params) > 0
    roots = tree.children(-1)
    assert len(roots) == len({tree.tokens[i] for i in roots}) <= int(allowed.sum())
    assert all(bool(allowed[tree.tokens[i]]) for i in roots)
    assert torch.allclose(tree.probs.sum(-1), torch.ones(len(tree), dtype=tree.probs.dtype))

    heads = HeadsTreeDrafter(load_heads(target), shape)
    with torch.no_grad():
        _, hidden = target(torch.tensor([ids]), hidden=True)
    heads.observe(hidden[0, -1], len(ids))
    htree = heads.draft_tree(ids, 4, params, g)
    assert 0 < len(htree) < len(shape.paths)
    assert len(htree.children(-1)) == len({htree.tokens[i] for i in htree.children(-1)})

    for drafter in (DraftModelTreeDrafter(draft, shape), HeadsTreeDrafter(heads.heads, shape)):
        stats = SpeculationStats()
        out = tree_speculative_generate(
            target,
            drafter,
            ids,
            params,
            k=4,
            generator=torch.Generator().manual_seed(1),
            stats=stats,
            max_nodes=50,
        )
        assert len(out) == params.max_tokens == stats.emitted
    # the multi-draft walk stays exact when a node asks for more children than q can give
    g2 = torch.Generator().manual_seed(3)
    logits = torch.full((4, V), -30.0)
    logits[:, :5] = torch.randn(4, 5, generator=g2)
    q = torch.zeros(V, dtype=torch.float64)
    q[:3] = torch.softmax(torch.randn(3, generator=g2, dtype=torch.float64), 0)  # 3 tokens
    sampled = SamplingParams(temperature=1.0)
    got = exact_first_token(walk_sampled, logits, sibling_draws(q, 5), sampled)
    torch.testing.assert_close(got, process_logits(logits[0], sampled), atol=1e-12, rtol=0)


def test_medusas_63_node_tree_runs_through_tree_speculative_generate():
    from specdec_lib import Tokenizer, load_model, workload_prompts

    target, draft = load_model("target"), load_model("draft")
    ids = Tokenizer().encode(workload_prompts("copy", 1, seed=2)[0])
    shape = TreeShape.branching([3, 2, 2, 2, 2])  # 3 + 6 + 12 + 24 + 48 > 63 asked
    params = SamplingParams(temperature=0, max_tokens=16)
    drafter = DraftModelTreeDrafter(draft, shape)
    with pytest.raises(ValueError, match="max_nodes"):
        tree_speculative_generate(target, drafter, ids, params, k=5)  # 93 nodes > 32
    out = tree_speculative_generate(target, drafter, ids, params, k=5, max_nodes=93)
    assert out == generate(target, ids, params)


def test_the_tries_search_finds_every_earlier_occurrence_longest_and_latest_first():
    def brute(context, length, max_n=4):  # every window, compared token by token
        out = []
        for n in range(min(max_n, len(context) - 1), 0, -1):
            for s in range(len(context) - n - 1, -1, -1):
                if context[s : s + n] == context[len(context) - n :]:
                    out.append(context[s + n : s + n + length])
        return out

    rng = random.Random(0)
    for _ in range(500):
        vocab = rng.choice([2, 3, 50, 70000])  # ids past 2**16 take every byte of a C int
        context = [rng.randrange(vocab) for _ in range(rng.randint(1, 40))]
        assert NgramTreeDrafter().continuations(context, 5) == brute(context, 5)
