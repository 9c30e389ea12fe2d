"""Graders refuse a solution that hands the work to the library, and one that draws its
random numbers elsewhere than from the generator it was given; the chapters' own solutions
do neither.

Each delegating solution below is what a student could write instead of the exercise: a
call of the library's implementation (or of the grader's reference), directly or through
another library function. Every one must fail with ``Diagnosis.DELEGATES``, naming what it
called.
"""

import ast
import math
import random
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch

from specdec_lib import (
    NgramDrafter,
    Tokenizer,
    accept_greedy,
    accept_sampled,
    load_model,
    process_logits,
    speculative_generate,
)
from specdec_lib import grading as G
from specdec_lib.analysis.costs import kv_cache_bytes_per_token, stats_cost_per_token, weight_bytes
from specdec_lib.analysis.greedy_replay import replay_greedy
from specdec_lib.analysis.replication import crossover
from specdec_lib.analysis.theory import expected_tokens_per_pass_from_rates
from specdec_lib.engine.eagle_tree import keep_likeliest
from specdec_lib.engine.sampling import SamplingParams
from specdec_lib.engine.tree import TokenTree, ancestor_mask, node_depths, walk_sampled
from specdec_lib.engine.tree_decode import NgramTreeDrafter
from specdec_lib.experiments.goodput_policy import goodput_ks
from specdec_lib.grading import Diagnosis
from specdec_lib.grading.batch_rollback import in_row_order, rollback_as
from specdec_lib.grading.mistakes import REFERENCES

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
sys.path.insert(0, str(SCRIPTS))

import student_notebooks as S  # noqa: E402

CHAPTERS = SCRIPTS.parent / "chapters"


@pytest.fixture(scope="module")
def untrained_draft():
    return load_model("draft", trained=False)


def _speculative_generate(target, drafter, prompt_token_ids, params, k):
    return speculative_generate(target, drafter, prompt_token_ids, params, k)


def _decode_step_bytes(model, context_len):
    return weight_bytes(model) + kv_cache_bytes_per_token(model.config) * context_len


def _propose(context, k, max_n=8, min_n=3):
    return NgramDrafter(max_n, min_n, vocab_size=256).propose(context, k).tokens


def _accept_greedy(target_logits, proposed):
    return accept_greedy(target_logits, proposed)


def _tokens_per_pass(rates, k):
    return expected_tokens_per_pass_from_rates([math.prod(rates[: i + 1]) for i in range(k)], k)


def _break_even_c(stats):
    at_zero = stats_cost_per_token(stats, 0.0)
    return (1 - at_zero) / (stats_cost_per_token(stats, 1.0) - at_zero)


def _accept_sampled(target_logits, draft_probs, proposed, params, generator=None):
    return accept_sampled(target_logits, draft_probs, proposed, params, generator)


def _distribution_test(rule, seed):
    return REFERENCES["check_distribution_test"](rule, seed)  # the grader's own test


def _expected_cache_lengths(n_prompt, log):
    return REFERENCES["check_cache_lengths"](n_prompt, log)  # the grader's own answer


def _rollback_batch(rows, lengths, proposed, accepted, block_size):
    rollback = rollback_as(lambda n, m, a, shared: n + 1 + a, in_row_order)
    return rollback(rows, lengths, proposed, accepted, block_size)


class _BernoulliDrafter(REFERENCES["check_bernoulli_drafter"]):
    """The grader's drafter, subclassed."""


def _slower_from(rows):
    return min(crossover(rows)["slower_at"], default=None)


def _choose_ks(alphas, cost, max_k, draft_seconds=0.0):
    return goodput_ks(alphas, cost, max_k, draft_seconds)


def _tree_mask_and_positions(parents, n_context):
    mask = torch.ones(len(parents), n_context + len(parents), dtype=torch.bool)
    mask[:, n_context:] = ancestor_mask(parents)
    return mask, [n_context + d for d in node_depths(parents)]


def _verify_children(p, q, children, generator=None):
    tree = TokenTree(list(children), [-1] * len(children))  # no probs: walk_sampled runs
    logits = torch.where(p > 0, p.log(), torch.full_like(p, -1e4)).repeat(len(children) + 1, 1)
    return walk_sampled(logits, tree, SamplingParams(temperature=1.0), generator)[1][0]


def _predict_counts(prompt, output, k):
    stats = replay_greedy(prompt, output, k)
    return stats.target_passes, stats.proposed, stats.accepted


def _keep_likeliest(parents, logprobs, budget):
    return keep_likeliest(parents, logprobs, budget)


#: ``{check: (delegating solution, what the report must name)}``: one per check.
DELEGATING = {
    "check_speculative_generate": (_speculative_generate, "speculative_generate"),
    "check_decode_step_bytes": (_decode_step_bytes, "weight_bytes"),
    "check_ngram_drafter": (_propose, "NgramDrafter.draft"),
    "check_accept_greedy": (_accept_greedy, "verify.accept_greedy"),
    "check_tokens_per_pass": (_tokens_per_pass, "expected_tokens_per_pass_from_rates"),
    "check_break_even_c": (_break_even_c, "stats_cost_per_token"),
    "check_accept_sampled": (_accept_sampled, "verify.accept_sampled"),
    "check_distribution_test": (_distribution_test, "the grader's reference solution"),
    "check_cache_lengths": (_expected_cache_lengths, "the grader's reference solution"),
    "check_batch_rollback": (_rollback_batch, "the grader's reference solution"),
    "check_bernoulli_drafter": (_BernoulliDrafter, "the grader's reference solution"),
    "check_slower_from": (_slower_from, "replication.crossover"),
    "check_goodput_ks": (_choose_ks, "goodput_policy.goodput_ks"),
    "check_tree_mask": (_tree_mask_and_positions, "tree.ancestor_mask"),
    "check_verify_children": (_verify_children, "tree.walk_sampled"),
    "check_predict_counts": (_predict_counts, "replay.replay_greedy"),
    "check_keep_likeliest": (_keep_likeliest, "eagle_tree.keep_likeliest"),
}


def test_every_check_has_a_delegating_solution_here():
    assert set(DELEGATING) == set(G.CHECKS)


@pytest.mark.parametrize("check", list(DELEGATING))
def test_a_solution_that_calls_the_library_is_refused_by_name(
    check, untrained_target, untrained_draft
):
    solution, named = DELEGATING[check]
    models = {"target": untrained_target, "draft": untrained_draft}
    kwargs = {
        "check_speculative_generate": models,
        "check_cache_lengths": models,
    }
    report = G.CHECKS[check](solution, **kwargs.get(check, {}))
    assert report.diagnosis is Diagnosis.DELEGATES, report
    assert report.headline.endswith(": calls the library's own implementation"), report
    assert named in report.message and report.evidence["called"], report
    assert report.message.startswith(Diagnosis.DELEGATES.advice)


def test_the_forbidden_functions_work_as_usual_outside_a_check_and_for_the_check_itself():
    # The reference computation of check_accept_greedy calls the engine's rule while the
    # check runs; only the student's code is watched.
    assert G.check_accept_greedy(REFERENCES["check_accept_greedy"]).passed
    logits = torch.tensor([[0.0, 1.0], [1.0, 0.0]])
    assert accept_greedy(logits, [1]) == ([1, 0], 1)
    assert G.check_accept_greedy(_accept_greedy).diagnosis is Diagnosis.DELEGATES
    assert accept_greedy(logits, [1]) == ([1, 0], 1)  # and after it
    assert sys.getprofile() is None


def test_a_delegation_inside_a_method_or_a_subclass_or_an_alias_is_seen():
    class Mine(NgramDrafter):
        def propose_list(self, context, k):
            return super().find_match(context)  # noqa: F841 (only the call matters)

    def propose(context, k, max_n=8, min_n=3):
        Mine(max_n, min_n, 256).propose_list(context, k)
        return []

    assert G.check_ngram_drafter(propose).diagnosis is Diagnosis.DELEGATES

    def through_the_trie(context, k, max_n=8, min_n=3):  # the one-path trie is the chain
        trie = NgramTreeDrafter(max_nodes=k, max_n=max_n, min_n=min_n, max_paths=1)
        return trie.draft_tree(list(context), k, SamplingParams(temperature=0), None).tokens

    assert G.check_ngram_drafter(through_the_trie).diagnosis is Diagnosis.DELEGATES
    alias = accept_greedy
    assert G.check_accept_greedy(alias).diagnosis is Diagnosis.DELEGATES


def test_reading_the_engines_record_of_cache_lengths_gets_nothing(
    untrained_target, untrained_draft
):
    def expected_cache_lengths(n_prompt, log):
        # the records the exercise says not to read
        return [(r.cache_length, r.cache_length) for r in log]

    models = {"target": untrained_target, "draft": untrained_draft}
    report = G.check_cache_lengths(expected_cache_lengths, **models)
    assert not report.passed and report.diagnosis is Diagnosis.WRONG_TYPE, report


# --- the chapters' own solutions --------------------------------------------------------


def _chapter_solutions():
    """``(chapter, check call, the chapter's solution)`` for every graded exercise whose
    solution can be defined on its own (chapter 7's reads the chapter's computed state)."""
    out = []
    for path in S.chapter_notebooks(CHAPTERS):
        chapter = nbformat.read(path, as_version=4)
        solved = set(S.solution_cells(chapter))  # the functions written there: exercises
        exercises = {
            node.name
            for cell in chapter.cells
            if cell.id in solved
            for node in ast.parse(S._python_only(cell.source)).body
            if isinstance(node, ast.FunctionDef | ast.ClassDef)
        }
        namespace = {"tok": Tokenizer(), "math": math, "torch": torch, "np": np}
        for cell in chapter.cells:
            if cell.cell_type != "code":
                continue
            kinds = ast.Import | ast.ImportFrom | ast.FunctionDef | ast.ClassDef
            for node in ast.parse(S._python_only(cell.source)).body:
                if isinstance(node, kinds):
                    module = ast.Module(body=[node], type_ignores=[])
                    try:
                        exec(compile(module, path.name, "exec"), namespace)
                    except NameError:  # a default value computed earlier in the chapter
                        continue
        for call in S.check_calls(chapter):
            if call.subject in exercises and call.check != "check_distribution_test":
                out.append((path.name, call, namespace[call.subject]))
    return out


def test_the_chapters_solutions_pass_their_checks(untrained_target, untrained_draft):
    """None calls what its check forbids, nor draws from another generator; each passes
    (the models untrained: the checks compare with the same models' plain decoding)."""
    models = {"target": untrained_target, "draft": untrained_draft}
    kwargs = {
        "check_speculative_generate": models,
        "check_cache_lengths": models,
    }
    solutions = _chapter_solutions()
    assert len(solutions) >= 12
    for name, call, solution in solutions:
        report = G.CHECKS[call.check](solution, **{**kwargs.get(call.check, {}), **call.kwargs})
        assert report.passed, (name, call.check, report)


# --- the generator handed in ------------------------------------------------------------


def _rule(draw_uniform, draw_token):
    """Chapter 6's residual rule with its two kinds of draw swappable."""

    def my_accept_sampled(target_logits, draft_probs, proposed, params, generator=None):
        p = process_logits(target_logits, params)
        q = draft_probs.to(torch.float64)
        for i, x in enumerate(proposed):
            if draw_uniform(generator) < min(1.0, float(p[i, x] / q[i, x])):
                continue
            shortfall = (p[i] - q[i]).clamp(min=0)
            return list(proposed[:i]) + [draw_token(shortfall / shortfall.sum(), generator)], i
        return list(proposed) + [draw_token(p[len(proposed)], generator)], len(proposed)

    return my_accept_sampled


def _children(draw_uniform, draw_token):
    """Chapter 12's multi-draft rule with its two kinds of draw swappable."""

    def verify_children(p, q, children, generator=None):
        r, left = p.clone(), q.clone()
        for x in children:
            drawn_from = left / left.sum()
            if draw_uniform(generator) < float(r[x] / drawn_from[x]):
                return x
            r = torch.clamp(r - drawn_from, min=0)
            r = r / r.sum()
            left[x] = 0
        return draw_token(r, generator)

    return verify_children


def _torch_uniform(g):
    return float(torch.rand((), generator=g, dtype=torch.float64))


def _torch_token(weights, g):
    return int(torch.multinomial(weights, 1, generator=g))


SOURCES = {
    "torch without the generator": (
        lambda g: float(torch.rand((), dtype=torch.float64)),
        lambda w, g: int(torch.multinomial(w, 1)),
        "torch's global generator",
    ),
    "Python's random": (
        lambda g: random.random(),
        lambda w, g: random.choices(range(len(w)), weights=w.tolist())[0],
        "Python's random module",
    ),
    "NumPy's global generator": (
        lambda g: float(np.random.rand()),
        lambda w, g: int(np.random.choice(len(w), p=(w / w.sum()).numpy())),
        "NumPy's global generator",
    ),
}


@pytest.mark.parametrize("source", list(SOURCES))
@pytest.mark.parametrize("check", ["check_accept_sampled", "check_verify_children"])
def test_a_correct_rule_drawing_elsewhere_than_from_its_generator_is_told_so(check, source):
    uniform, token, named = SOURCES[source]
    make = _rule if check == "check_accept_sampled" else _children
    for rule in (make(uniform, _torch_token), make(_torch_uniform, token)):
        report = G.CHECKS[check](rule)
        assert report.diagnosis is Diagnosis.IGNORES_GENERATOR, (source, report)
        assert report.message.startswith(Diagnosis.IGNORES_GENERATOR.advice), report
        if check == "check_accept_sampled" or source != "torch without the generator":
            assert named in report.message, report
        else:  # the enumerator refuses the draw before it is made
            assert "without the generator it was given" in report.message, report
    assert G.CHECKS[check](make(_torch_uniform, _torch_token)).passed
