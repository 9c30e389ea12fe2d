from collections import Counter

import pytest

from specdec_lib import grading as G
from specdec_lib.grading import Diagnosis
from specdec_lib.grading.mistakes import MISTAKES, REFERENCES


def rollback_batch(rows, lengths, proposed, accepted, block_size):
    """The exercise written out: keep the pending token and the accepted drafts."""
    new = [n + 1 + accepted[r] for r, n in zip(rows, lengths, strict=True)]
    wrote = [n + 1 + m for n, m in zip(lengths, proposed, strict=True)]
    blocks = [-(-x // block_size) for x in wrote]
    return new, [b - -(-x // block_size) for b, x in zip(blocks, new, strict=True)]


@pytest.mark.parametrize("seed", range(10))
def test_a_correct_batch_rollback_passes_at_every_seed(seed):
    assert G.check_batch_rollback(rollback_batch, seed=seed).passed
    assert G.check_batch_rollback(REFERENCES["check_batch_rollback"], seed=seed).passed


@pytest.mark.parametrize("mistake", list(MISTAKES["check_batch_rollback"]))
def test_each_shipped_rollback_slip_gets_its_own_diagnosis(mistake):
    wrong = MISTAKES["check_batch_rollback"][mistake]
    diagnoses = [G.check_batch_rollback(wrong.function, seed=s).diagnosis for s in range(5)]
    assert all(d is wrong.diagnosis for d in diagnoses), Counter(diagnoses)


def test_the_diagnoses_of_the_slips_are_all_different():
    diagnoses = [m.diagnosis for m in MISTAKES["check_batch_rollback"].values()]
    assert len(set(diagnoses)) == len(diagnoses)


def test_the_worked_boundary_cases_hold():
    # 30 cached, pending + 4 drafts written (35: five blocks of 8), 1 accepted: keep 32,
    # exactly four full blocks, so the fifth is freed; 0 accepted from 31 keeps 32 too.
    assert rollback_batch(["a"], [30], [4], {"a": 1}, 8) == ([32], [1])
    assert rollback_batch(["a"], [31], [4], {"a": 0}, 8) == ([32], [1])
    # 33 kept of 8-blocks: the fifth block holds one kept entry and stays
    assert rollback_batch(["a"], [31], [4], {"a": 1}, 8) == ([33], [0])


@pytest.mark.parametrize(
    "returned",
    [None, [1, 2], ([1], [0]), ([1.0, 2.0], [0, 0]), "no"],
)
def test_a_malformed_answer_is_reported_as_the_wrong_type(returned):
    report = G.check_batch_rollback(lambda *args: returned)
    assert report.diagnosis is Diagnosis.WRONG_TYPE, report


def test_a_stub_is_reported_as_not_implemented():
    def stub(rows, lengths, proposed, accepted, block_size):
        raise NotImplementedError()

    assert G.check_batch_rollback(stub).diagnosis is Diagnosis.NOT_IMPLEMENTED
