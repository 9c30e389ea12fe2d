"""Chapter 5's exercise, the break-even cost of a draft pass, in one module: the answer in
the student's form, its slips, and the check.

``break_even_c(stats) -> float``: with T target passes, D draft passes and E emitted
tokens, a draft pass costing c target passes makes speculation cost ``(T + c D) / E`` per
token, so it pays while that is below 1: the break-even is ``c = (E - T) / D``. The slips
are the three ways that solve goes wrong: the ratio upside down, the target passes left
out (``E / D``), and a division by the emitted tokens instead of the draft passes. The
check solves the library's own cost per token (linear in c) on 40 random counts and
compares to nine decimals.
"""

from __future__ import annotations

import random

from specdec_lib.analysis.costs import cost_per_token, stats_cost_per_token
from specdec_lib.engine.generate import SpeculationStats

from .answers import ExactCheck
from .mistakes import register
from .report import Diagnosis as D
from .sandbox import as_number, call_student, forbidden

# --- the answer, and its slips ---------------------------------------------------------


def _break_even_reference(stats):
    """Correct: the c at which the library's cost per token is 1 (it is linear in c)."""
    at_zero = stats_cost_per_token(stats, 0.0)
    return (1 - at_zero) / (stats_cost_per_token(stats, 1.0) - at_zero)


register(
    "check_break_even_c",
    _break_even_reference,
    ("inverted", lambda s: s.draft_passes / (s.emitted - s.target_passes), D.INVERTED_RATIO),
    ("target passes free", lambda s: s.emitted / s.draft_passes, D.TARGET_PASSES_FREE),
    ("per emitted token", lambda s: (s.emitted - s.target_passes) / s.emitted, D.PER_TOKEN),
)


# --- the check -------------------------------------------------------------------------


def _counts(seed: int) -> list[SpeculationStats]:
    rng, out = random.Random(f"break-even/{seed}"), []
    for _ in range(40):
        passes, drafts, extra = (rng.randint(1, 60), rng.randint(1, 300), rng.randint(1, 200))
        out.append(SpeculationStats(passes, passes, drafts, emitted=passes + extra))
    return out


check_break_even_c = ExactCheck(
    "check_break_even_c",
    _counts,
    lambda fn, s: as_number(call_student(fn, "break_even_c", s), "break_even_c"),
    lambda s: f"T = {s.target_passes}, D = {s.draft_passes}, E = {s.emitted}",
    """Check ``break_even_c(stats) -> float``: at the c it returns, ``stats_cost_per_token``
    must be 1 (to nine decimals), on 40 random counts T, D and E.""",
    forbidden(stats_cost_per_token, cost_per_token),
)
