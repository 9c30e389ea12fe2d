"""Chapter 10b's check, ``check_goodput_ks``: solutions written by hand pass at every seed,
each named slip gets its own diagnosis, the cases hold what the slips need to show, and the
library's policy handed in is refused.

The full catch-rate table is ``python -m specdec_lib.grading --checks check_goodput_ks``.
"""

import numpy as np
import pytest

from specdec_lib.analysis.costs import RooflineStepCost, StepCostFit
from specdec_lib.experiments.goodput_policy import GoodputK, goodput_ks
from specdec_lib.grading import Diagnosis, check_goodput_ks
from specdec_lib.grading.goodput_ks import GOODPUT_SLIPS
from specdec_lib.grading.mistakes import MISTAKES, REFERENCES, catch_rates

SLIPS = MISTAKES["check_goodput_ks"]


def choose_ks(alphas, cost, max_k, draft_seconds=0.0):
    """The exercise written out, loops and all: for each width, each row's drafts while the
    next one pays its drafting, then the width with the most tokens per second."""
    batch = len(alphas)
    best_ks, best_rate = None, None
    for width in range(max_k + 1):
        pass_seconds = cost.predict(batch, width)
        ks = []
        for alpha in alphas:
            k = 0
            while k < width and alpha ** (k + 1) * pass_seconds / batch >= draft_seconds:
                k += 1
            ks.append(k)
        tokens = sum(sum(a**i for i in range(k + 1)) for a, k in zip(alphas, ks, strict=True))
        rate = tokens / (pass_seconds + draft_seconds * sum(ks))
        if best_rate is None or rate > best_rate:
            best_ks, best_rate = ks, rate
    return best_ks


def choose_ks_closed_form(alphas, cost, max_k, draft_seconds=0.0):
    """Another student's: NumPy, the geometric sum in closed form, the fewest seconds per
    token (argmin takes the first, the smallest width, on a tie)."""
    a = np.asarray(alphas, dtype=np.float64)
    plans, seconds_per_token = [], []
    for width in range(max_k + 1):
        pass_seconds = cost.predict(len(a), width)
        depth = np.arange(1, width + 1)
        pays = a[:, None] ** depth[None, :] >= draft_seconds * len(a) / pass_seconds
        ks = np.cumprod(pays, axis=1).sum(axis=1)  # drafts while each next one pays
        tokens = ((1 - a ** (ks + 1)) / (1 - a)).sum()
        plans.append(ks)
        seconds_per_token.append((pass_seconds + draft_seconds * ks.sum()) / tokens)
    return plans[int(np.argmin(seconds_per_token))]


@pytest.mark.parametrize("seed", range(10))
def test_solutions_written_by_hand_and_the_reference_pass_at_every_seed(seed):
    for solution in (choose_ks, choose_ks_closed_form, REFERENCES["check_goodput_ks"]):
        report = check_goodput_ks(solution, seed=seed)
        assert report.passed, report
        assert report.evidence["cases"] == 81


def test_each_slip_gets_its_own_diagnosis_at_every_seed_and_the_reference_none():
    # 100 seeds: `python -m specdec_lib.grading --checks check_goodput_ks` (each 100/100)
    rates = catch_rates(check_goodput_ks, range(10))
    assert set(rates) == {label for label, _, _ in GOODPUT_SLIPS} | {"false alarms"}
    assert rates == dict.fromkeys(rates, (10, 10)) | {"false alarms": (0, 10)}, rates
    assert {m.diagnosis for m in SLIPS.values()} == {
        Diagnosis.BATCH_MEAN,
        Diagnosis.BLIND_TO_LOAD,
        Diagnosis.NEVER_OFF,
        Diagnosis.TOKENS_OFF_BY_ONE,
        Diagnosis.IGNORES_DRAFTING,
    }


def test_the_cases_hold_every_kind_the_exercise_names_and_every_slip_parts_on_several():
    reference = REFERENCES["check_goodput_ks"]
    for seed in range(3):
        cases = check_goodput_ks.cases(seed)
        assert len(cases) == 81
        batches = [len(c[0]) for c in cases]
        assert min(batches) == 1 and max(batches) > 32 and batches[1:] == sorted(batches[1:])
        alphas = [a for c in cases for a in c[0]]
        assert 0.0 in alphas and max(alphas) >= 0.95 and max(alphas) < 1
        labels = " ".join(c[4] for c in cases)
        for kind in ("flat in k", "steep in k", "compute-bound", "RooflineStepCost"):
            assert kind in labels, (seed, kind)
        assert any(c[3] == 0 for c in cases) and any(c[3] > 0 for c in cases)
        expected = [reference(*c[:4]) for c in cases]
        assert len({tuple(e) for e in expected}) > 20  # not one answer for everything
        for label, slip, _ in GOODPUT_SLIPS:
            parted = sum(slip(*c[:4]) != e for c, e in zip(cases, expected, strict=True))
            assert parted >= 3, (seed, label, parted)


def test_the_slips_need_what_the_exercise_says_to_show():
    flat = StepCostFit((0, 8), (((1, 4e-3), (48, 8e-3)),) * 2, 0.0, 0.0)
    slip = dict((label, fn) for label, fn, _ in GOODPUT_SLIPS)
    # rows that accept nothing, on a cost flat in k: every width ties, the smallest wins
    assert goodput_ks([0.0, 0.0], flat, 4) == [0, 0]
    assert slip["never off"]([0.0, 0.0], flat, 4) == [1, 1]
    # without drafting time every row drafts the width: planning with the batch's mean
    # acceptance, or without the drafting time, changes nothing
    mixed, roofline = [0.05, 0.97, 0.5], RooflineStepCost()
    for label in ("batch mean", "ignores drafting", "ignores drafting: plans without it too"):
        assert slip[label](mixed, roofline, 6) == goodput_ks(mixed, roofline, 6)
    ds = 0.3 * roofline.predict(3, 0) / 3
    assert goodput_ks(mixed, roofline, 6, ds) == [0, 6, 1]
    assert slip["ignores drafting: plans without it too"](mixed, roofline, 6, ds) == [6, 6, 6]
    assert len(set(goodput_ks(mixed, roofline, 6, ds))) > 1  # each row its own length
    assert len(set(slip["batch mean"](mixed, roofline, 6, ds))) == 1


def test_a_failing_report_names_the_slip_and_shows_the_smallest_case_it_fails():
    report = check_goodput_ks(SLIPS["never off"].function)
    assert not report and report.message.startswith(Diagnosis.NEVER_OFF.advice)
    assert str(report).startswith("FAILED check_goodput_ks(choose_ks): never turns speculation")
    assert "the first: alphas = [0.0, 0.0, 0.0] (3 rows), max_k = 4" in report.message
    assert "expected [0, 0, 0], got [1, 1, 1]." in report.message
    off = check_goodput_ks(SLIPS["off by one: no last term"].function)
    assert off.diagnosis is Diagnosis.TOKENS_OFF_BY_ONE and "1 + alpha + ..." in off.message


def test_wrong_types_a_stub_and_the_library_handed_in_are_reported():
    def stub(alphas, cost, max_k, draft_seconds=0.0):
        raise NotImplementedError()

    assert check_goodput_ks(stub).diagnosis is Diagnosis.NOT_IMPLEMENTED
    one_k = check_goodput_ks(lambda alphas, cost, max_k, draft_seconds=0.0: max_k)
    assert one_k.diagnosis is Diagnosis.WRONG_TYPE and "one draft length per row" in one_k.message
    floats = check_goodput_ks(lambda alphas, cost, max_k, draft_seconds=0.0: [1.0] * len(alphas))
    assert floats.diagnosis is Diagnosis.WRONG_TYPE
    array = check_goodput_ks(lambda *args: np.array(choose_ks(*args)))
    assert array.passed, array
    assert check_goodput_ks(goodput_ks).diagnosis is Diagnosis.DELEGATES

    def through_the_policy(alphas, cost, max_k, draft_seconds=0.0):
        GoodputK(cost, max_k, draft_seconds)
        return choose_ks(alphas, cost, max_k, draft_seconds)

    report = check_goodput_ks(through_the_policy)
    assert report.diagnosis is Diagnosis.DELEGATES and "GoodputK" in report.message, report
