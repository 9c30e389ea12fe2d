"""Deliberately wrong implementations of the exercises: the graders' negative controls.

A grader never shown a wrong answer has not been tested. Each mistake is one plausible
slip in the exercise's own form, made of the library's code with one input, parameter or
result altered, and :data:`MISTAKES` says which diagnosis its check must give it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from specdec_lib.analysis.replication import crossover

from .cache_slips import CACHE_SLIPS, cache_reference
from .goodput_slips import GOODPUT_SLIPS, goodput_reference
from .replay_slips import REPLAY_SLIPS, counts_reference
from .report import Diagnosis as D
from .rollback import in_dict_order, in_row_order, rollback_as
from .tree_slips import CHILDREN_SLIPS, LAYOUT_SLIPS, children_reference, layout_reference

#: Correct: each row keeps its pending token and its own accepted drafts, and the blocks
#: that hold them, a partly used last block included.
_rollback_reference = rollback_as(lambda n, m, a, shared: n + 1 + a, in_row_order)


def _slower_reference(rows):
    """Correct: the smallest batch size whose speed-up interval lies wholly below 1."""
    return min(crossover(rows)["slower_at"], default=None)


def _first(rows, slower):
    return min((r["batch"] for r in rows if slower(r)), default=None)


@dataclass(frozen=True)
class Mistake:
    """One wrong implementation and the diagnosis its grader must give."""

    function: Callable
    diagnosis: D


def _table(*rows: tuple[str, Callable, D]) -> dict[str, Mistake]:
    return {label: Mistake(fn, diagnosis) for label, fn, diagnosis in rows}


def register(check: str, reference: Callable, *slips: tuple[str, Callable, D]) -> None:
    """Enter ``check``'s reference solution and its slips, ``(label, function, diagnosis)``."""
    if check in REFERENCES:
        raise ValueError(f"{check} is registered already")
    REFERENCES[check] = reference
    MISTAKES[check] = _table(*slips)


#: ``{check name: {mistake: Mistake}}``, for every check (a check whose one module holds its
#: reference and its mistakes registers its own rows when imported: :func:`register`).
MISTAKES: dict[str, dict[str, Mistake]] = {
    "check_cache_lengths": _table(*CACHE_SLIPS),
    "check_batch_rollback": _table(
        ("reset instead of crop", rollback_as(lambda n, m, a, s: 0, in_row_order), D.RESETS_CACHE),
        (
            "one rollback for the batch",
            rollback_as(lambda n, m, a, s: n + 1 + m - s, in_row_order),
            D.SHARED_ROLLBACK,
        ),
        (
            "counts of the wrong rows",
            rollback_as(lambda n, m, a, s: n + 1 + a, in_dict_order),
            D.WRONG_ROW,
        ),
        (
            "drops the pending token",
            rollback_as(lambda n, m, a, s: n + a, in_row_order),
            D.DROPS_PENDING,
        ),
        (
            "keeps the correction",
            rollback_as(lambda n, m, a, s: n + 2 + a, in_row_order),
            D.COUNTS_PENDING,
        ),
        ("no rollback", rollback_as(lambda n, m, a, s: n + 1 + m, in_row_order), D.NO_ROLLBACK),
        (
            "frees a partly used block",
            rollback_as(lambda n, m, a, s: n + 1 + a, in_row_order, lambda x, size: x // size),
            D.FREES_PARTIAL_BLOCK,
        ),
    ),
    "check_tree_mask": _table(*LAYOUT_SLIPS),
    "check_verify_children": _table(*CHILDREN_SLIPS),
    "check_predict_counts": _table(*REPLAY_SLIPS),
    "check_slower_from": _table(
        ("point estimate", lambda rows: _first(rows, lambda r: r["speedup"] < 1), D.POINT_ESTIMATE),
        ("wrong end", lambda rows: _first(rows, lambda r: r["speedup_low"] < 1), D.WRONG_END),
        (
            "assumes sorted rows",
            lambda rows: next((r["batch"] for r in rows if r["speedup_high"] < 1), None),
            D.ASSUMES_SORTED,
        ),
    ),
    "check_goodput_ks": _table(*GOODPUT_SLIPS),
}

#: ``{check name: the correct solution in the student's form}``.
REFERENCES: dict[str, Callable] = {
    "check_cache_lengths": cache_reference,
    "check_batch_rollback": _rollback_reference,
    "check_slower_from": _slower_reference,
    "check_goodput_ks": goodput_reference,
    "check_tree_mask": layout_reference,
    "check_verify_children": children_reference,
    "check_predict_counts": counts_reference,
}


def catch_rates(check: Callable, seeds: Sequence[int], **kwargs: object) -> dict[str, tuple]:
    """``{mistake: (caught, runs)}``: how often ``check`` gives each of its mistakes their
    diagnosis over ``seeds``; under ``"false alarms"``, how often the reference failed."""
    name, n = check.__name__, len(seeds)
    rates = {
        label: (sum(check(m.function, seed=s, **kwargs).diagnosis is m.diagnosis for s in seeds), n)
        for label, m in MISTAKES[name].items()
    }
    rates["false alarms"] = (sum(not check(REFERENCES[name], seed=s, **kwargs) for s in seeds), n)
    return rates
