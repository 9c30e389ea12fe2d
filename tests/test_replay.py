"""Greedy prompt lookup predicted before it runs: the replay against the engine's own counts,
and the checker of the exercise that asks students for the same prediction."""

import pytest

from specdec_lib import (
    DraftModelDrafter,
    NgramDrafter,
    SamplingParams,
    SpeculationStats,
    generate,
    speculative_generate,
    workload_prompts,
)
from specdec_lib.analysis.greedy_replay import common_prefix, replay_greedy
from specdec_lib.grading import Diagnosis
from specdec_lib.grading.mistakes import MISTAKES, catch_rates
from specdec_lib.grading.predict_counts import REPLAY_SLIPS, check_predict_counts, counts_reference
from specdec_lib.text.language import WORKLOADS

KS = (1, 2, 4, 7)
BUDGETS = (64, 29, 13)


def _run(target, drafter, prompt, budget, k):
    stats = SpeculationStats()
    params = SamplingParams(max_tokens=budget)
    return speculative_generate(target, drafter, prompt, params, k=k, stats=stats), stats


def test_the_replay_counts_what_greedy_prompt_lookup_counts_on_every_workload_k_and_budget(
    target, tok
):
    assert set(WORKLOADS) >= {"copy", "novel"} and len(WORKLOADS) > 2  # and the in-between ones
    pooled, replayed, capped = SpeculationStats(), SpeculationStats(), 0
    for workload in WORKLOADS:
        prompt = tok.encode(workload_prompts(workload, 1, seed=11)[0])
        written = generate(target, prompt, SamplingParams(max_tokens=max(BUDGETS)))
        for k in KS:
            for budget in BUDGETS:
                output, stats = _run(target, NgramDrafter(), prompt, budget, k)
                assert output == written[:budget]  # greedy speculation writes greedy's output
                replay = replay_greedy(prompt, output, k)
                where = (workload, k, budget)
                assert (replay.rounds, replay.target_passes) == (stats.rounds, stats.target_passes)
                assert (replay.proposed, replay.accepted) == (stats.proposed, stats.accepted), where
                assert (replay.emitted, replay.draft_passes) == (budget, stats.draft_passes), where
                assert replay.position_proposed == stats.position_proposed, where
                assert replay.position_accepted == stats.position_accepted, where
                assert replay == stats, where  # every round record too, cache lengths included
                replay_greedy(prompt, output, k, stats=replayed)
                for record in stats.log:
                    pooled.record(record, 0)  # n-gram drafting runs no model
                capped += len(stats.log[-1].emitted) - 1 < k  # the budget cut the last draft
    assert replayed == pooled and replayed.tokens_per_pass > 1
    assert capped >= len(WORKLOADS) * len(KS)  # budgets ending mid-round, on every workload


def test_a_budget_of_one_token_is_one_pass_that_drafts_nothing(target, tok):
    prompt = tok.encode(workload_prompts("copy", 1, seed=3)[0])
    output, stats = _run(target, NgramDrafter(), prompt, 1, 7)
    replay = replay_greedy(prompt, output, 7)
    assert replay == stats and (replay.target_passes, replay.proposed) == (1, 0)


def test_the_replay_of_a_draft_model_drafter_counts_its_draft_passes_too(target, draft, tok):
    for workload in ("edit", "novel"):
        prompt = tok.encode(workload_prompts(workload, 1, seed=5)[0])
        output, stats = _run(target, DraftModelDrafter(draft), prompt, 24, 4)
        replay = replay_greedy(prompt, output, 4, DraftModelDrafter(draft))
        assert replay == stats and replay.draft_passes == stats.draft_passes > 0


def test_the_accepted_drafts_are_the_common_prefix_of_proposal_and_output():
    assert common_prefix([1, 2, 3], [1, 2, 4, 5]) == 2
    assert common_prefix([1, 2], [1]) == 1 and common_prefix([], [1]) == 0


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (([], [1], 2), "prompt"),
        (([1], [], 2), "output"),
        (([1, 2], [1], 0), "k"),
        (([1, 2], [1], 1.5), "k"),
        (("ab", [1], 1), "prompt"),
        (([1, -1], [1], 1), "prompt"),
        (([1], [10**6], 1), "output"),
        (([1], [1.0], 1), "output"),
        (([1], [1], 1, object()), "drafter"),
        (([1], [1], 1, None, []), "stats"),
    ],
)
def test_bad_input_is_refused_with_a_value_error_naming_the_parameter(args, named):
    with pytest.raises(ValueError, match=rf"^{named}\b"):
        replay_greedy(*args)


def test_the_checker_passes_the_reference_and_names_each_slip_every_time_over_20_seeds():
    # 100 seeds: `python -m specdec_lib.grading --seeds 100` (each slip 100/100, no false alarm)
    rates = catch_rates(check_predict_counts, range(20))
    assert set(rates) == {label for label, _, _ in REPLAY_SLIPS} | {"false alarms"}
    assert rates == dict.fromkeys(rates, (20, 20)) | {"false alarms": (0, 20)}, rates
    diagnoses = {m.diagnosis for m in MISTAKES["check_predict_counts"].values()}
    assert diagnoses == {
        Diagnosis.NO_TARGET_TOKEN,
        Diagnosis.SEES_THE_FUTURE,
        Diagnosis.DRAFTS_PAST_THE_END,
        Diagnosis.LAGGING_CONTEXT,
    }


def test_an_uncapped_draft_predicts_the_right_passes_so_the_answer_counts_drafts_too():
    uncapped = dict((label, fn) for label, fn, _ in REPLAY_SLIPS)["draft not capped"]
    cases = check_predict_counts.cases(0)
    prompts = [(list(p.encode()), list(o.encode()), k) for p, o, k in cases]
    assert all(uncapped(*c)[0] == counts_reference(*c)[0] for c in prompts)
    assert any(uncapped(*c) != counts_reference(*c) for c in prompts)


def test_the_checker_reports_a_stub_wrong_types_and_a_failing_case_in_words():
    def predict_counts(prompt, output, k):
        raise NotImplementedError()

    assert check_predict_counts(predict_counts).diagnosis is Diagnosis.NOT_IMPLEMENTED
    passes_only = check_predict_counts(lambda prompt, output, k: len(output))
    assert passes_only.diagnosis is Diagnosis.WRONG_TYPE and "three ints" in passes_only.message
    report = check_predict_counts(MISTAKES["check_predict_counts"]["no target token"].function)
    assert report.message.startswith(Diagnosis.NO_TARGET_TOKEN.advice)
    assert "the first: prompt = " in report.message and not report
