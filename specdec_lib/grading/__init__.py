"""Autograders for the exercises: the course's negative controls, aimed at student code.

Each ``check_*`` takes the student's function and returns a :class:`Report`: ``passed``,
a ``message`` a student can act on, the :class:`Diagnosis` of the mistake it
recognised, and the numbers behind the verdict (``evidence``). A check never raises
because of the student's code. :mod:`.harness` calls student code safely; the checks
live in :mod:`.exact` (one right answer per input), :mod:`.sampled`,
:mod:`.distribution` and :mod:`.speculative`; the wrong implementations every check
is tested on are in :mod:`.mistakes`. Imports flow one way: report, mistakes,
harness, the checks, this package.
"""

from .distribution import check_distribution_test
from .exact import (
    check_accept_greedy,
    check_break_even_c,
    check_cache_lengths,
    check_decode_step_bytes,
    check_ngram_drafter,
    check_slower_from,
)
from .harness import LOG_ENV
from .report import Diagnosis, Report
from .sampled import check_accept_sampled
from .speculative import check_speculative_generate

#: Every check, by name (the names chapters call and the grading log records).
CHECKS = {
    check.__name__: check
    for check in (
        check_speculative_generate,
        check_decode_step_bytes,
        check_ngram_drafter,
        check_accept_greedy,
        check_break_even_c,
        check_accept_sampled,
        check_distribution_test,
        check_cache_lengths,
        check_slower_from,
    )
}

__all__ = ["CHECKS", "LOG_ENV", "Diagnosis", "Report", *CHECKS]
