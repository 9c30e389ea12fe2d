"""The graders, tested: correct solutions pass, every named mistake gets its diagnosis.

Catch rates here use a few seeds to stay fast; ``python -m specdec_lib.grading
--seeds 100`` prints the full table (every mistake over 100 seeds, and the false
alarms of the correct reference over the same seeds). The checks that run models
run on untrained ones, which need no shipped weights.
"""

import ast
import importlib
import json
import random
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from specdec_lib import (
    NgramDrafter,
    Proposal,
    accept_greedy,
    accept_sampled,
    load_model,
    speculative_generate,
)
from specdec_lib import grading as G
from specdec_lib.analysis.replication import crossover
from specdec_lib.engine.drafters import one_hot_probs
from specdec_lib.grading import Diagnosis
from specdec_lib.grading.answers import ExactCheck
from specdec_lib.grading.cache_lengths import _draft_runs
from specdec_lib.grading.distribution_tests import binomial_tail, dist_reference
from specdec_lib.grading.mistakes import MISTAKES, REFERENCES, Mistake, catch_rates
from specdec_lib.grading.sandbox import (
    Abort,
    as_int,
    as_tokens,
    as_verification,
    call_student,
    run_check,
)

SEEDS = {
    "check_ngram_drafter": range(5),
    "check_accept_greedy": range(5),
    "check_accept_sampled": range(10),
    "check_decode_step_bytes": range(2),
    "check_break_even_c": range(5),
    "check_distribution_test": range(3),
    "check_cache_lengths": range(2),
    "check_batch_rollback": range(5),
    "check_bernoulli_drafter": range(5),
    "check_slower_from": range(5),
    "check_goodput_ks": range(5),
    "check_tokens_per_pass": range(5),
    "check_tree_mask": range(5),
    "check_predict_counts": range(5),
    "check_verify_children": range(3),
    "check_keep_likeliest": range(5),
}


@pytest.mark.parametrize(
    ("check", "mistake"), [(check, mistake) for check in SEEDS for mistake in MISTAKES[check]]
)
def test_each_named_mistake_is_caught_with_its_diagnosis(
    check, mistake, untrained_target, untrained_draft
):
    wrong = MISTAKES[check][mistake]
    models = {"target": untrained_target, "draft": untrained_draft}
    kwargs = models if check == "check_cache_lengths" else {}
    reports = [G.CHECKS[check](wrong.function, seed=s, **kwargs) for s in SEEDS[check]]
    diagnoses = [report.diagnosis for report in reports]
    caught = sum(d is wrong.diagnosis for d in diagnoses)
    assert caught == len(diagnoses), (
        f"{check} gave '{mistake}' its diagnosis in {caught}/{len(diagnoses)} seeds: "
        f"{dict(Counter(diagnoses))}"
    )
    # every failing message starts with the advice of its diagnosis, then the evidence
    for report in reports:
        assert report.message.startswith(report.diagnosis.advice), report


def written_accept_greedy(target_logits, proposed):
    """The greedy rule in a student's hand: the matching prefix, then the target's token."""
    best = target_logits.argmax(-1).tolist()
    n = 0
    while n < len(proposed) and proposed[n] == best[n]:
        n += 1
    return list(proposed[:n]) + [best[n]], n


#: The residual rule as the grader's reference runs it (the engine's own ``accept_sampled``
#: handed in as a solution is refused: it is the library's implementation).
REFERENCE_RULE = REFERENCES["check_accept_sampled"]


@pytest.mark.parametrize("first", range(0, 100, 25))
def test_the_residual_rule_check_raises_no_false_alarm_on_the_correct_rule_over_100_seeds(first):
    # 100 seeds, in four groups of 25 so that the workers share them. Not one may fail: a
    # check that failed the correct rule at 3% of seeds would pass all 100 with probability
    # 0.97**100 < 5%. (Its thresholds, |z| > 4 and p < 1e-4, are far stricter than that.)
    seeds = range(first, first + 25)
    failed = [s for s in seeds if not G.check_accept_sampled(REFERENCE_RULE, seed=s)]
    assert failed == [], f"false alarms at seeds {failed}"


def test_a_rule_verifying_against_the_unfiltered_target_is_named_and_the_correct_one_is_not():
    # Temperature 0.8 and top-k 5 change p; a rule that verifies against softmax(logits)
    # is exact for the wrong p, so only the filtered probe can see it, and it says so.
    probe = "temperature 0.8, top-k 5: chi-square p (position 2)"
    wrong = MISTAKES["check_accept_sampled"]["sampling parameters not applied"].function
    for seed in range(3):
        report = G.check_accept_sampled(wrong, seed=seed)
        assert report.diagnosis is Diagnosis.IGNORES_PARAMS, report
        assert report.evidence[probe] < 1e-4 and "raw: " in report.message
        correct = G.check_accept_sampled(REFERENCE_RULE, seed=seed)
        assert correct.passed and correct.evidence[probe] >= 1e-4, correct


def test_the_distribution_test_check_raises_no_false_alarm_on_a_correct_test():
    # Its own false-alarm rate is bounded by TAIL_LIMIT = 1e-3 per call on a test of level
    # alpha (and far less for a slightly conservative one); 8 seeds of 200 test runs each.
    failed = [s for s in range(8) if not G.check_distribution_test(dist_reference, seed=s)]
    assert failed == []


def test_the_distribution_test_check_states_its_rates_and_refuses_a_bad_alpha():
    report = G.check_distribution_test(dist_reference, alpha=0.05)
    assert report.passed and report.evidence["rule calls per test"] == 60
    assert "caught the biased rule at" in report.message
    with pytest.raises(ValueError, match="alpha"):
        G.check_distribution_test(dist_reference, alpha=0.0)


def test_the_library_functions_handed_in_or_called_are_refused_as_its_own_implementation():
    # (One delegating solution per check, and the chapters' solutions, are in
    # test_grading_delegation.py.)
    for check, library in (
        (G.check_accept_sampled, accept_sampled),
        (G.check_accept_greedy, accept_greedy),
    ):
        report = check(library)
        assert report.diagnosis is Diagnosis.DELEGATES, report
        assert (
            f"`{library.__name__}` is `specdec_lib.engine.verify.{library.__name__}`"
            in report.message
        )

    def propose(context, k, max_n=8, min_n=3):
        return NgramDrafter(max_n, min_n, vocab_size=256).propose(context, k).tokens

    report = G.check_ngram_drafter(propose)
    assert report.diagnosis is Diagnosis.DELEGATES and "NgramDrafter.draft" in report.message

    def slower_from(rows):
        return min(crossover(rows)["slower_at"], default=None)

    report = G.check_slower_from(slower_from)
    assert report.diagnosis is Diagnosis.DELEGATES and "crossover" in report.message
    assert str(report).startswith("FAILED check_slower_from(slower_from): calls the library's own")


@pytest.mark.parametrize(
    "check",
    [
        "check_ngram_drafter",
        "check_accept_greedy",
        "check_decode_step_bytes",
        "check_break_even_c",
        "check_slower_from",
        "check_goodput_ks",
    ],
)
def test_the_deterministic_checks_never_fail_a_correct_solution(check):
    # One right answer per input, so a correct solution cannot fail; 20 seeds confirm it.
    for seed in range(20):
        report = G.CHECKS[check](REFERENCES[check], seed=seed)
        assert report.passed, report
    assert report.evidence["cases"] >= 16


def test_the_cache_lengths_check_passes_both_caches_written_out(untrained_target, untrained_draft):
    """A student's solution: the target's invariant, and the draft's cache replayed token
    by token (what it fed, compared with the new context), not counted."""

    def expected_cache_lengths(n_prompt, log):
        pairs, context, cached = [], [0] * n_prompt, []
        for r in log:
            if r.proposed:  # it fed the context and every draft but the last
                cached = context + list(r.proposed[:-1])
            context = context + list(r.emitted)
            kept = 0
            while kept < min(len(cached), len(context) - 1) and cached[kept] == context[kept]:
                kept += 1
            pairs.append((len(context) - 1, kept))
        return pairs

    for seed in range(2):
        models = {"target": untrained_target, "draft": untrained_draft}
        report = G.check_cache_lengths(expected_cache_lengths, seed=seed, **models)
        assert report.passed, report


def test_the_draft_cache_record_is_what_the_reference_formula_says(untrained_target):
    """The check's expected answers are the engine's own record of both caches; the
    grader's reference in the student's form (a formula) must agree with it everywhere."""
    draft = load_model("draft", trained=False)
    runs = _draft_runs(0, target=untrained_target, draft=draft)
    for n_prompt, log, record in runs:
        assert REFERENCES["check_cache_lengths"](n_prompt, log) == record
    rounds = [(len(r.proposed), r.n_accepted) for _, log, _ in runs for r in log]
    # the cases hold every kind of round the exercise turns on
    assert any(m == n > 0 for m, n in rounds) and any(n < m - 1 for m, n in rounds)
    assert any(m == 0 for m, n in rounds)


@pytest.fixture(scope="module")
def untrained_draft():
    return load_model("draft", trained=False)


def test_speculative_generate_check_passes_correct_versions_and_names_each_mistake(
    untrained_target, untrained_draft
):
    target, draft = untrained_target, untrained_draft
    report = G.check_speculative_generate(
        REFERENCES["check_speculative_generate"], target=target, draft=draft
    )
    assert report.passed, report
    library = G.check_speculative_generate(speculative_generate, target=target, draft=draft)
    assert library.diagnosis is Diagnosis.DELEGATES, library
    for label, wrong in MISTAKES["check_speculative_generate"].items():
        report = G.check_speculative_generate(
            wrong.function, target=target, draft=draft, timeout=30
        )
        assert report.diagnosis is wrong.diagnosis, f"{label}: {report}"
        assert report.message.startswith(report.diagnosis.advice), report


def _stubs():
    def propose(context, k, max_n=8, min_n=3):
        raise NotImplementedError()

    def accept_greedy(target_logits, proposed):
        raise NotImplementedError()

    def accept_sampled(target_logits, draft_probs, proposed, params, generator=None):
        raise NotImplementedError()

    def speculative_generate(target, drafter, prompt_token_ids, params, k):
        raise NotImplementedError()

    def decode_step_bytes(model, context_len):
        raise NotImplementedError()

    def break_even_c(stats):
        raise NotImplementedError()

    def distribution_test(rule, seed):
        raise NotImplementedError()

    def expected_cache_lengths(n_prompt, log):
        raise NotImplementedError()

    def slower_from(rows):
        raise NotImplementedError()

    def tokens_per_pass(rates, k):
        raise NotImplementedError()

    def choose_ks(alphas, cost, max_k, draft_seconds=0.0):
        raise NotImplementedError()

    def rollback_batch(rows, lengths, proposed, accepted, block_size):
        raise NotImplementedError()

    class BernoulliDrafter:
        def __init__(self, n_prompt, reference, alpha, seed):
            self.alpha = alpha

        def propose(self, context, k, params, generator=None):
            raise NotImplementedError()

    def tree_mask_and_positions(parents, n_context):
        raise NotImplementedError()

    def verify_children(p, q, children, generator=None):
        raise NotImplementedError()

    def predict_counts(prompt, output, k):
        raise NotImplementedError()

    def keep_likeliest(parents, logprobs, budget):
        raise NotImplementedError()

    stubs = [speculative_generate, decode_step_bytes, propose, accept_greedy, tokens_per_pass]
    stubs += [break_even_c]
    stubs += [accept_sampled, distribution_test, expected_cache_lengths, rollback_batch]
    stubs += [BernoulliDrafter]
    stubs += [slower_from, choose_ks, tree_mask_and_positions, verify_children]
    stubs += [predict_counts, keep_likeliest]  # CHECKS order
    return dict(zip(G.CHECKS.values(), stubs, strict=True))


def test_every_check_reports_a_stub_as_not_attempted_without_raising(
    untrained_target, untrained_draft, monkeypatch
):
    models = {"target": untrained_target, "draft": untrained_draft}
    for check, stub in _stubs().items():
        wants = {
            "check_speculative_generate": models,
            "check_cache_lengths": models,
        }
        report = check(stub, **wants.get(check.__name__, {}))
        assert not report.passed and report.diagnosis is Diagnosis.NOT_IMPLEMENTED, report
        assert not report.attempted and "not implemented yet" in str(report)
        assert str(report).startswith(f"TO DO {check.__name__}(")
        assert "not attempted yet (NotImplementedError)" in report.headline
        # Run All goes on to the next exercise; nbgrader's autograder scores it nothing.
        monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
        assert report.raise_if_failed() is report
        monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
        with pytest.raises(NotImplementedError):
            report.raise_if_failed()
        monkeypatch.delenv("NBGRADER_EXECUTION")


def test_code_that_raises_is_reported_with_the_failing_line():
    def accept_greedy(target_logits, proposed):
        return proposed[len(proposed)], 0

    report = G.check_accept_greedy(accept_greedy)
    assert report.diagnosis is Diagnosis.RAISED
    assert "IndexError" in report.message and "return proposed[len(proposed)], 0" in report.message
    with pytest.raises(AssertionError):
        report.raise_if_failed()


def test_wrong_types_and_signatures_are_reported():
    argmax = G.check_accept_greedy(lambda logits, proposed: logits.argmax(-1))
    assert argmax.diagnosis is Diagnosis.WRONG_TYPE
    floats = G.check_accept_greedy(lambda logits, proposed: ([1.5], 0))
    assert floats.diagnosis is Diagnosis.WRONG_TYPE
    two_args = G.check_accept_sampled(lambda logits, proposed: ([], 0))
    assert two_args.diagnosis is Diagnosis.RAISED and "positional argument" in two_args.message
    none = G.check_ngram_drafter(lambda context, k, max_n=8, min_n=3: None)
    assert none.diagnosis is Diagnosis.WRONG_TYPE and "return [] for nothing" in none.message
    assert G.check_ngram_drafter(None).diagnosis is Diagnosis.NOT_A_FUNCTION
    assert G.check_ngram_drafter([1, 2]).diagnosis is Diagnosis.NOT_A_FUNCTION
    boolean = G.check_distribution_test(lambda rule, seed: True)
    assert boolean.diagnosis is Diagnosis.WRONG_TYPE and "p-value" in boolean.message
    assert G.check_break_even_c(lambda stats: "1").diagnosis is Diagnosis.WRONG_TYPE


def test_tensors_of_token_ids_are_accepted():
    def accept_greedy_tensors(target_logits, proposed):
        emitted, n = written_accept_greedy(target_logits, proposed)
        return torch.tensor(emitted), torch.tensor(n)

    assert G.check_accept_greedy(accept_greedy_tensors).passed


def test_code_that_hangs_is_stopped_even_if_it_catches_exceptions():
    def accept_sampled(target_logits, draft_probs, proposed, params, generator=None):
        while True:
            try:
                sum(range(1000))
            except Exception:
                pass

    start = time.perf_counter()
    report = G.check_accept_sampled(accept_sampled, timeout=0.5)
    assert report.diagnosis is Diagnosis.TIMEOUT and time.perf_counter() - start < 5


def test_a_check_leaves_random_state_and_threads_as_it_found_them():
    threads = torch.get_num_threads()
    torch.manual_seed(7)
    random.seed(7)
    np.random.seed(7)
    expected = (torch.rand(3), random.random(), np.random.rand())
    torch.manual_seed(7)
    random.seed(7)
    np.random.seed(7)
    G.check_accept_sampled(REFERENCE_RULE)
    assert torch.equal(torch.rand(3), expected[0])
    assert random.random() == expected[1] and np.random.rand() == expected[2]
    assert torch.get_num_threads() == threads


def test_a_passing_report_says_passed_and_what_it_checked():
    def accept_greedy(target_logits, proposed):
        return written_accept_greedy(target_logits, proposed)

    report = G.check_accept_greedy(accept_greedy)
    assert str(report).startswith("PASSED check_accept_greedy(accept_greedy)\n\nCorrect on all")
    assert "PASSED check_accept_greedy" in report._repr_html_() and report.diagnosis is None


def test_reports_are_reproducible_and_render_as_text_and_html():
    wrong = MISTAKES["check_accept_sampled"]["resample from p_target"].function
    first, second = G.check_accept_sampled(wrong), G.check_accept_sampled(wrong)
    assert str(first) == str(second) and first._repr_html_() == second._repr_html_()
    assert str(first).startswith("FAILED check_accept_sampled(accept_sampled_): resampling from p")
    assert "z = " in first.message and "p(2 - p) = 0.75" in first.message
    assert "<details>" in first._repr_html_() and not bool(first)
    assert json.dumps(first.as_dict())


def test_reports_go_to_the_grading_log_when_one_is_set(tmp_path, monkeypatch):
    log = tmp_path / "log.jsonl"
    monkeypatch.setenv(G.LOG_ENV, str(log))
    G.check_accept_greedy(written_accept_greedy)
    G.check_accept_greedy(_stubs()[G.check_accept_greedy])
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(e["passed"], e["diagnosis"]) for e in entries] == [
        (True, ""),
        (False, "not_implemented"),
    ]


def test_a_wrong_drafter_is_not_headlined_as_a_wrong_decoding_loop():
    def propose(context, k, max_n=8, min_n=3):
        return list(context[-1:]) * min(k, 1)  # neither prompt lookup nor a known mistake

    report = G.check_ngram_drafter(propose)
    assert report.diagnosis is Diagnosis.WRONG_ANSWER
    assert "library's answer" in report.headline and "greedy decoding" not in report.headline
    assert "the first: context = " in report.message


def test_every_diagnosis_has_a_headline_of_its_own_advice_and_a_key_for_the_csv():
    headlines = [d.headline for d in Diagnosis]
    assert len(set(headlines)) == len(headlines)
    assert all(d.advice.endswith(".") for d in Diagnosis if d is not Diagnosis.NOTEBOOK_ERROR)
    assert Diagnosis.NOT_IMPLEMENTED.key == "not_implemented"
    assert Diagnosis.NOTEBOOK_ERROR in Diagnosis


def test_catch_rates_count_each_mistake_and_the_false_alarms_of_the_reference():
    rates = catch_rates(G.check_accept_greedy, range(2))
    assert set(rates) == set(MISTAKES["check_accept_greedy"]) | {"false alarms"}
    assert all(caught == 2 for label, (caught, _) in rates.items() if label != "false alarms")
    assert rates["false alarms"] == (0, 2)


#: The modules every exercise's module may import, in their own import order.
SHARED = ["report", "mistakes", "sandbox", "answers"]


def test_grading_is_one_module_per_exercise_over_four_shared_modules_importing_one_way():
    """Each exercise's module holds one check (with its reference and mistakes) and imports
    only the shared modules, which import one way (accept_sampled also reuses two slips of
    accept_greedy's); no private name crosses modules, nothing imports inside a function."""
    package = Path(G.__file__).parent
    modules = {p.stem for p in package.glob("*.py")} - {"__init__", "__main__"}
    assert set(SHARED) <= modules
    exercises = sorted(modules - set(SHARED))
    checks = {
        stem: [
            n for n in vars(importlib.import_module(f"{G.__name__}.{stem}")) if n[:6] == "check_"
        ]
        for stem in exercises
    }
    assert all(len(names) == 1 for names in checks.values()), checks
    assert sorted(name for (name,) in checks.values()) == sorted(G.CHECKS)
    allowed = {stem: SHARED[:rank] for rank, stem in enumerate(SHARED)}
    allowed |= {stem: SHARED for stem in exercises} | {"__main__": SHARED}
    allowed["accept_sampled"] = [*SHARED, "accept_greedy"]
    allowed["__init__"] = sorted(modules)
    for stem, may_import in allowed.items():
        tree = ast.parse((package / f"{stem}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                inner = [n for n in ast.walk(node) if isinstance(n, ast.Import | ast.ImportFrom)]
                assert not inner, f"{stem}.{node.name} imports inside a function"
            if isinstance(node, ast.ImportFrom) and node.level:
                assert not any(a.name.startswith("_") for a in node.names), (stem, node.module)
                if node.level == 1 and node.module:
                    assert node.module in may_import, f"{stem} imports {node.module}"


def test_no_grading_module_shares_its_name_with_a_module_elsewhere():
    """``grading.x`` is not confused with ``analysis.x``, ``experiments.x`` or a benchmark."""
    grading = Path(G.__file__).parent
    library, root = grading.parent, grading.parent.parent
    elsewhere = {p.stem for p in library.rglob("*.py") if grading not in p.parents}
    elsewhere |= {p.stem for p in (root / "benchmarks").glob("*.py")}
    clashes = {p.stem for p in grading.glob("*.py")} & elsewhere - {"__init__", "__main__"}
    assert not clashes


def test_the_harness_turns_what_student_code_does_into_plain_data_or_a_failing_report():
    with pytest.raises(Abort) as raised:
        call_student(lambda x: 1 / x, "f", 0)
    assert raised.value.diagnosis is Diagnosis.RAISED and "ZeroDivisionError" in str(raised.value)
    assert as_tokens(torch.tensor([1, 2]), "x") == [1, 2] and as_int(np.int64(3), "n") == 3
    assert as_verification(([1], torch.tensor(0)), "f") == ([1], 0)

    def body(name):
        raise Abort(Diagnosis.WRONG_TYPE, "Got a string.")

    report = run_check("check_example", lambda: None, body, seed=0, timeout=None)
    assert not report and report.diagnosis is Diagnosis.WRONG_TYPE
    assert report.message == f"{Diagnosis.WRONG_TYPE.advice} Got a string."
    assert isinstance(G.check_ngram_drafter, ExactCheck)
    assert all(isinstance(m, Mistake) for table in MISTAKES.values() for m in table.values())


def test_the_binomial_tail_behind_the_false_alarm_verdict():
    assert binomial_tail(0, 10, 0.1) == pytest.approx(1.0)
    assert binomial_tail(10, 10, 0.5) == pytest.approx(0.5**10)
    assert binomial_tail(14, 100, 0.05) < 1e-3 < binomial_tail(13, 100, 0.05)


def test_the_bernoulli_drafter_check_passes_the_chapter_9_drafter_over_20_seeds():
    class BernoulliDrafter:  # chapter 9's solution, returning a Proposal
        def __init__(self, n_prompt, reference, alpha, seed):
            self.n_prompt, self.reference, self.alpha = n_prompt, reference, alpha
            self.rng = torch.Generator().manual_seed(seed)

        def propose(self, context, k, params, generator=None):
            done = len(context) - self.n_prompt
            tokens = list(self.reference[done : done + k])
            for i in range(len(tokens)):
                if float(torch.rand((), generator=self.rng)) >= self.alpha:
                    tokens[i] = (tokens[i] + 1) % 4253
            return Proposal(tokens, one_hot_probs(tokens, 4253))

    failed = [s for s in range(20) if not G.check_bernoulli_drafter(BernoulliDrafter, seed=s)]
    assert failed == []


def _written_tree_mask(parents, n_context):
    """Chapter 12's solution: every context slot, then each node's path up to the root."""
    n = len(parents)
    mask = torch.zeros(n, n_context + n, dtype=torch.bool)
    mask[:, :n_context] = True
    depths = []
    for i, parent in enumerate(parents):
        node = i
        while node >= 0:
            mask[i, n_context + node] = True
            node = parents[node]
        depths.append(0 if parent < 0 else depths[parent] + 1)
    return mask, [n_context + d for d in depths]


def _written_children(q_of, p_in_test):
    """Chapter 12's multi-draft rule in a student's hand (float32 uniforms), with the
    distribution each child is divided by, and the one it is tested against, swappable."""

    def verify_children(p, q, children, generator=None):
        r, left = p.clone(), q.clone()
        for x in children:
            drawn_from = q_of(q, left)
            if torch.rand((), generator=generator) < p_in_test(p, r)[x] / drawn_from[x]:
                return x
            r = torch.clamp(p_in_test(p, r) - drawn_from, min=0)
            r = r / r.sum()
            left[x] = 0
        return int(torch.multinomial(r, 1, generator=generator))

    return verify_children


def test_the_tree_checks_pass_written_solutions_and_name_the_slips_written_by_hand():
    without = lambda q, left: left / left.sum()  # noqa: E731
    current = lambda p, r: r  # noqa: E731
    for seed in range(20):
        report = G.check_tree_mask(_written_tree_mask, seed=seed)
        assert report.passed and report.evidence["trees"] >= 40, report
    for seed in range(3):
        assert G.check_verify_children(_written_children(without, current), seed=seed).passed

    def by_slot(parents, n_context):
        mask, _ = _written_tree_mask(parents, n_context)
        return mask, torch.arange(n_context, n_context + len(parents))  # a tensor is fine

    def sees_elder_siblings(parents, n_context):
        mask, positions = _written_tree_mask(parents, n_context)
        for i, parent in enumerate(parents):
            for j in range(i):
                if parents[j] == parent:
                    mask[i, n_context + j] = True
        return mask.int().tolist(), positions  # 0/1 lists are fine too

    assert G.check_tree_mask(by_slot).diagnosis is Diagnosis.POSITIONS_BY_INDEX

    def depth_from_one(parents, n_context):  # the pending token's children at depth 1
        mask, positions = _written_tree_mask(parents, n_context)
        return mask, [p + 1 for p in positions]

    report = G.check_tree_mask(depth_from_one)
    assert report.diagnosis is Diagnosis.WRONG_ANSWER
    assert "a child of -1 at n_context = 1" in report.message
    assert "all 1 too high" in report.message and "depth 0, at n_context" in report.message
    assert G.check_tree_mask(sees_elder_siblings).diagnosis is Diagnosis.SEES_NON_ANCESTOR
    stale = _written_children(without, lambda p, r: p)
    with_replacement = _written_children(lambda q, left: q, current)
    assert G.check_verify_children(stale).diagnosis is Diagnosis.STALE_RESIDUAL
    assert G.check_verify_children(with_replacement).diagnosis is Diagnosis.DIVIDES_BY_Q
    shape = G.check_tree_mask(lambda parents, n_context: (torch.ones(2, 2), [0]))
    assert shape.diagnosis is Diagnosis.WRONG_TYPE and "shape" in shape.message
