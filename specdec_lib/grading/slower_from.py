"""Chapter 10's exercise, the batch size from which speculation is slower, in one module:
the answer in the student's form, its slips, and the check.

``slower_from(rows) -> int | None``: each row is a batch size's measured speed-up with its
interval (``batch``, ``speedup``, ``speedup_low``, ``speedup_high``); the answer is the
smallest batch size whose interval lies wholly below 1 (``speedup_high < 1``), or None.
The slips are the three ways of reading such a sweep wrongly: the point estimate instead
of the interval, the interval's wrong end, and the first such row taken as the smallest
batch size (rows assumed sorted). The cases are 60 random sweeps of batch sizes 1 to 32,
every other one shuffled, with intervals above 1, below it, or straddling it on either
side of the point estimate.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from specdec_lib.analysis.replication import crossover

from .answers import ExactCheck
from .mistakes import register
from .report import Diagnosis as D
from .sandbox import as_int, call_student, forbidden

# --- the answer, and its slips ---------------------------------------------------------


def _slower_reference(rows):
    """Correct: the smallest batch size whose speed-up interval lies wholly below 1."""
    return min(crossover(rows)["slower_at"], default=None)


def _first(rows, slower):
    return min((r["batch"] for r in rows if slower(r)), default=None)


register(
    "check_slower_from",
    _slower_reference,
    ("point estimate", lambda rows: _first(rows, lambda r: r["speedup"] < 1), D.POINT_ESTIMATE),
    ("wrong end", lambda rows: _first(rows, lambda r: r["speedup_low"] < 1), D.WRONG_END),
    (
        "assumes sorted rows",
        lambda rows: next((r["batch"] for r in rows if r["speedup_high"] < 1), None),
        D.ASSUMES_SORTED,
    ),
)


# --- the check -------------------------------------------------------------------------


def _sweeps(seed: int) -> list[list[dict]]:
    """60 sweeps of batch sizes 1 to 32 (every other one shuffled), speed-ups with
    intervals above 1, below it, or straddling it on either side of the point estimate."""
    rng, sweeps = random.Random(f"slower/{seed}"), []
    for i in range(60):
        rows = []
        for batch in (1, 2, 4, 8, 16, 32)[: rng.randint(1, 6)]:
            value = rng.uniform(0.6, 1.4)
            low, high = value - rng.uniform(0, 0.3), value + rng.uniform(0, 0.3)
            rows.append(dict(batch=batch, speedup=value, speedup_low=low, speedup_high=high))
        if i % 2:
            rng.shuffle(rows)
        sweeps.append(rows)
    return sweeps


def _batch(fn: Callable, rows: list[dict]) -> int | None:
    got = call_student(fn, "slower_from", [dict(r) for r in rows])
    return None if got is None else as_int(got, "the batch size")


check_slower_from = ExactCheck(
    "check_slower_from",
    _sweeps,
    _batch,
    lambda rows: (
        f"(batch, speedup, low, high) = {[tuple(round(v, 2) for v in r.values()) for r in rows]}"
    ),
    """Check ``slower_from(rows) -> int | None`` against the library's ``crossover`` on 60
    random sweeps of batch sizes, in any order.""",
    forbidden(crossover),
)
