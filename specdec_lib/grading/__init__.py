"""Autograders for the exercises: the course's negative controls, aimed at student code.

Each ``check_*`` takes the student's function (or class) and returns a
:class:`Report`: ``passed``, a ``message`` a student can act on, the
:class:`Diagnosis` of the mistake it recognised, and the numbers behind the
verdict (``evidence``). A check never raises because of the student's code.

One module per check (:mod:`.ngram`, :mod:`.greedy`, :mod:`.sampled`,
:mod:`.speculative`); what they share is in :mod:`.harness` (calling student code
safely) and :mod:`.report`; the wrong implementations every check is tested on
are in :mod:`.mistakes`. Imports flow one way: report, mistakes (engine code
only), harness, the checks, this package.
"""

from .greedy import check_accept_greedy
from .harness import LOG_ENV
from .ngram import check_ngram_drafter
from .report import Diagnosis, Report
from .sampled import check_accept_sampled
from .speculative import check_speculative_generate

#: Every check, by name (the names chapters call and the grading log records).
CHECKS = {
    check.__name__: check
    for check in (
        check_ngram_drafter,
        check_accept_greedy,
        check_accept_sampled,
        check_speculative_generate,
    )
}

__all__ = [
    "CHECKS",
    "LOG_ENV",
    "Diagnosis",
    "Report",
    "check_accept_greedy",
    "check_accept_sampled",
    "check_ngram_drafter",
    "check_speculative_generate",
]
