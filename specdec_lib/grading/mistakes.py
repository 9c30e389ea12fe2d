"""Deliberately wrong implementations of the exercises: the graders' negative controls.

A grader never shown a wrong answer has not been tested. Each mistake is one plausible
slip in the exercise's own form, made of the library's code with one input, parameter or
result altered, and :data:`MISTAKES` says which diagnosis its check must give it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .replay_slips import REPLAY_SLIPS, counts_reference
from .report import Diagnosis as D
from .tree_slips import CHILDREN_SLIPS, LAYOUT_SLIPS, children_reference, layout_reference


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
    "check_tree_mask": _table(*LAYOUT_SLIPS),
    "check_verify_children": _table(*CHILDREN_SLIPS),
    "check_predict_counts": _table(*REPLAY_SLIPS),
}

#: ``{check name: the correct solution in the student's form}``.
REFERENCES: dict[str, Callable] = {
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
