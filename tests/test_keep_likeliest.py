"""EAGLE-2's rerank: the library's ``keep_likeliest`` (what ``EagleTreeDrafter`` verifies)
and chapter 13's check of it, ``check_keep_likeliest``.

The library's function always keeps a tree of ``min(budget, n)`` nodes, every kept node
with its parent and its elder siblings, and refuses bad arguments by name. The check
passes solutions written by hand (loops, probabilities multiplied, NumPy), gives each named
mistake its own diagnosis, and names what it sees in a wrong answer that is none of them.

The full catch-rate table is ``python -m specdec_lib.grading --checks check_keep_likeliest``.
"""

import heapq
import math
import random

import numpy as np
import pytest

from specdec_lib.engine.eagle_tree import keep_likeliest
from specdec_lib.grading import Diagnosis, check_keep_likeliest
from specdec_lib.grading import keep_likeliest as rerank
from specdec_lib.grading.mistakes import MISTAKES, REFERENCES, catch_rates

SLIPS = MISTAKES["check_keep_likeliest"]
REFERENCE = REFERENCES["check_keep_likeliest"]


def _random_tree(rng: random.Random) -> tuple[list[int], list[float], int]:
    n = rng.randint(0, 30)
    parents = [rng.randint(-1, i - 1) for i in range(n)]
    logprobs = [math.log(rng.choice((1.0, 0.5, rng.random() + 1e-9))) for _ in range(n)]
    return parents, logprobs, rng.randint(0, n + 3)


def _is_closed_tree(parents: list[int], kept: list[int]) -> bool:
    """Every kept node's parent is kept, and so is each of its elder siblings."""
    chosen = set(kept)
    for i in kept:
        p = parents[i]
        if p >= 0 and p not in chosen:
            return False
        if any(parents[j] == p and j not in chosen for j in range(i)):
            return False
    return True


# --- the library's function ----------------------------------------------------------------


def test_it_always_keeps_a_tree_of_min_budget_n_nodes_in_increasing_order():
    rng = random.Random(1)
    for _ in range(3000):
        parents, logprobs, budget = _random_tree(rng)
        kept = keep_likeliest(parents, logprobs, budget)
        assert len(kept) == min(budget, len(parents))
        assert kept == sorted(set(kept)) and all(0 <= i < len(parents) for i in kept)
        assert _is_closed_tree(parents, kept), (parents, logprobs, budget, kept)


def test_where_elder_siblings_are_the_likelier_it_keeps_the_likeliest_paths():
    # Greedy drafting draws each node's children likeliest first: then no bound binds,
    # and the kept nodes are the `budget` likeliest paths (the lower index on a tie).
    rng = random.Random(2)
    for _ in range(1000):
        n = rng.randint(1, 20)
        parents = [rng.randint(-1, i - 1) for i in range(n)]
        logprobs = [-rng.randint(0, 40) / 8 for _ in range(n)]
        for p in set(parents):  # each parent's children: likeliest first
            children = [i for i in range(n) if parents[i] == p]
            likeliest_first = sorted((logprobs[i] for i in children), reverse=True)
            for i, lp in zip(children, likeliest_first, strict=True):
                logprobs[i] = lp
        path = []
        for i, p in enumerate(parents):
            path.append((path[p] if p >= 0 else 0.0) + logprobs[i])
        budget = rng.randint(0, n)
        likeliest = sorted(range(n), key=lambda i: (-path[i], i))[:budget]
        assert keep_likeliest(parents, logprobs, budget) == sorted(likeliest)


def test_a_younger_sibling_likelier_than_its_elder_waits_for_it():
    # Sampled: the second child drawn can be the likelier; it is verified only with the
    # first, whose token was taken out of the distribution the second was drawn from.
    assert keep_likeliest([-1, -1], [-1.5, -0.25], 1) == [0]
    assert keep_likeliest([-1, -1], [-1.5, -0.25], 2) == [0, 1]
    # A child of that younger sibling waits for its parent, and so for the elder too.
    assert keep_likeliest([-1, -1, 1], [-1.0, -0.25, -0.125], 2) == [0, 1]
    assert keep_likeliest([-1, -1, 0], [-0.75, -1.0, -0.75], 2) == [0, 1]  # paths, not steps


def test_bad_arguments_are_refused_with_the_parameter_named():
    with pytest.raises(ValueError, match=r"parents\[1\] must be -1 or an earlier node"):
        keep_likeliest([-1, 1], [0.0, 0.0], 1)
    with pytest.raises(ValueError, match=r"parents\[2\] must be -1 or an earlier node"):
        keep_likeliest([-1, 0, 5], [0.0, 0.0, 0.0], 1)
    with pytest.raises(ValueError, match=r"parents\[0\] must be an integer >= -1"):
        keep_likeliest([-2], [0.0], 1)
    with pytest.raises(ValueError, match=r"parents\[0\] must be an integer"):
        keep_likeliest([0.5], [0.0], 1)
    with pytest.raises(ValueError, match="logprobs must hold one log-probability per node"):
        keep_likeliest([-1, 0], [0.0], 1)
    with pytest.raises(ValueError, match="budget must be an integer >= 0"):
        keep_likeliest([-1], [0.0], -1)
    with pytest.raises(ValueError, match="budget must be an integer >= 0"):
        keep_likeliest([-1], [0.0], True)
    assert keep_likeliest([], [], 3) == [] and keep_likeliest([-1], [-1.0], 0) == []


# --- the check -----------------------------------------------------------------------------


def keep_likeliest_loops(parents, logprobs, budget):
    """The chapter's way: paths and ranks in one pass, then the best ranks."""
    path, rank, last_child = [], [], {}
    for i, p in enumerate(parents):
        path.append((path[p] if p >= 0 else 0.0) + logprobs[i])
        bound = path[i] if p < 0 else min(path[i], rank[p])
        if p in last_child:
            bound = min(bound, rank[last_child[p]])
        last_child[p] = i
        rank.append(bound)
    return sorted(sorted(range(len(parents)), key=lambda i: (-rank[i], i))[:budget])


def keep_likeliest_products(parents, logprobs, budget):
    """Another student's: probabilities multiplied from the node up to the root, every
    elder sibling's bound taken at once, heapq for the best (stable: the first on a tie)."""
    n = len(parents)
    prob = []
    for i in range(n):
        p, node = 1.0, i
        while node >= 0:
            p *= math.exp(logprobs[node])
            node = parents[node]
        prob.append(p)
    rank = []
    for i in range(n):
        elders = [rank[j] for j in range(i) if parents[j] == parents[i]]
        above = [rank[parents[i]]] if parents[i] >= 0 else []
        rank.append(min([prob[i], *above, *elders]))
    return sorted(heapq.nlargest(budget, range(n), key=lambda i: rank[i]))


def keep_likeliest_numpy(parents, logprobs, budget):
    """A third: NumPy, float32 paths, a stable sort of the negated ranks."""
    rank = np.zeros(len(parents), dtype=np.float32)
    path = np.zeros(len(parents), dtype=np.float32)
    youngest = {}
    for i, p in enumerate(parents):
        path[i] = (path[p] if p >= 0 else 0) + np.float32(logprobs[i])
        rank[i] = min(path[i], rank[p]) if p >= 0 else path[i]
        if p in youngest:
            rank[i] = min(rank[i], rank[youngest[p]])
        youngest[p] = i
    return np.sort(np.argsort(-rank, kind="stable")[:budget])


@pytest.mark.parametrize("seed", range(10))
def test_solutions_written_by_hand_and_the_reference_pass_at_every_seed(seed):
    solutions = (keep_likeliest_loops, keep_likeliest_products, keep_likeliest_numpy)
    for solution in (*solutions, REFERENCE):
        report = check_keep_likeliest(solution, seed=seed)
        assert report.passed, report
        assert report.evidence["trees"] == 81


def test_each_named_mistake_gets_its_own_diagnosis_at_every_seed_and_the_reference_none():
    # 100 seeds: `python -m specdec_lib.grading --checks check_keep_likeliest` (each 100/100)
    rates = catch_rates(check_keep_likeliest, range(10))
    assert rates == dict.fromkeys(rates, (10, 10)) | {"false alarms": (0, 10)}, rates
    assert {m.diagnosis for m in SLIPS.values()} == {
        Diagnosis.OWN_PROBABILITY,
        Diagnosis.SKIPS_ELDER,
        Diagnosis.ORPHANS,
        Diagnosis.RANK_ORDER,
        Diagnosis.TIES_REVERSED,
        Diagnosis.BUDGET_OFF_BY_ONE,
    }
    for label, mistake in SLIPS.items():
        report = check_keep_likeliest(mistake.function)
        assert report.headline.endswith(f": {mistake.diagnosis.headline}"), (label, report)
        assert report.message.startswith(mistake.diagnosis.advice), (label, report)
        assert "expected [" in report.message and "got [" in report.message, report


def test_the_hand_made_trees_show_every_mistake_whatever_the_seed():
    # The random trees change with the seed; the hand-made ones alone part every slip from
    # the reference, and hold what the exercise names: a younger sibling likelier than its
    # elder, a certain step, budget 0, a budget past the tree, a deep chain, a wide root.
    hand = rerank.HAND_MADE
    for label, mistake in SLIPS.items():
        parts = [
            c for c in hand if list(mistake.function(*map(list, c[:2]), c[2])) != REFERENCE(*c[:3])
        ]
        assert parts, f"no hand-made tree shows '{label}'"
    assert any(c[2] == 0 for c in hand) and any(c[2] > len(c[0]) for c in hand)
    assert any(0.0 in c[1] for c in hand) and max(len(c[0]) for c in hand) >= 10
    assert any(c[0].count(-1) >= 8 for c in hand)


def test_every_case_holds_exact_log_probabilities():
    for seed in range(5):
        for parents, logprobs, budget, _ in rerank.cases(seed):
            assert all(lp <= 0 and (lp * 1024).is_integer() for lp in logprobs)
            path = []
            for i, p in enumerate(parents):
                path.append((path[p] if p >= 0 else 0.0) + logprobs[i])
            assert min(path, default=0.0) > -64 and 0 <= budget <= len(parents) + 7


def test_a_wrong_answer_that_is_no_named_mistake_is_told_which_rule_it_breaks():
    everything = check_keep_likeliest(lambda parents, logprobs, budget: list(range(len(parents))))
    assert everything.diagnosis is Diagnosis.KEEPS_WRONG_COUNT, everything
    assert "nodes kept, not min(budget, n) = " in everything.message
    least_likely = check_keep_likeliest(
        lambda parents, logprobs, budget: sorted(
            sorted(range(len(parents)), key=lambda i: logprobs[i])[:budget]
        )
    )
    assert least_likely.diagnosis in (Diagnosis.ORPHANS, Diagnosis.SKIPS_ELDER), least_likely
    assert " is kept without its " in least_likely.message
    # The first `budget` nodes always form a tree of the right size: the wrong nodes, named.
    first = check_keep_likeliest(lambda parents, logprobs, b: list(range(min(b, len(parents)))))
    assert first.diagnosis is Diagnosis.WRONG_ANSWER, first
    assert "a tree of the right size, but node " in first.message and "rank " in first.message


def test_wrong_types_a_stub_and_the_library_handed_in_are_reported():
    def stub(parents, logprobs, budget):
        raise NotImplementedError()

    assert check_keep_likeliest(stub).diagnosis is Diagnosis.NOT_IMPLEMENTED
    none = check_keep_likeliest(lambda parents, logprobs, budget: None)
    assert none.diagnosis is Diagnosis.WRONG_TYPE and "`return` missing" in none.message
    as_set = check_keep_likeliest(lambda p, lp, b: set(keep_likeliest_loops(p, lp, b)))
    assert as_set.diagnosis is Diagnosis.WRONG_TYPE, as_set
    twice = check_keep_likeliest(lambda p, lp, b: keep_likeliest_loops(p, lp, b) * 2)
    assert twice.diagnosis is Diagnosis.WRONG_TYPE and "once" in twice.message, twice
    floats = check_keep_likeliest(
        lambda p, lp, b: [float(i) for i in keep_likeliest_loops(p, lp, b)]
    )
    assert floats.diagnosis is Diagnosis.WRONG_TYPE, floats
    library = check_keep_likeliest(keep_likeliest)
    assert (
        library.diagnosis is Diagnosis.DELEGATES and "eagle_tree.keep_likeliest" in library.message
    )


def test_a_solution_that_changes_its_arguments_does_not_change_the_cases():
    def pops(parents, logprobs, budget):
        kept = keep_likeliest_loops(parents, logprobs, budget)
        parents.clear()
        logprobs.clear()
        return kept

    assert check_keep_likeliest(pops).passed
