"""Autograders for the exercises: the course's negative controls, aimed at student code.

Each graded exercise has one module, which holds its reference solution, the named
mistakes its checker must catch, and its checker ``check_*``; four shared modules hold
what every checker uses.

Each ``check_*`` takes the student's function and returns a :class:`Report`; it never raises
because of the student's code. An exercise's module is named after its check,
``check_x`` in ``x.py``, but for two names that benchmark scripts hold
(``benchmarks/tokens_per_pass.py``, ``benchmarks/distribution_test.py``, the second also
pytest's pattern for a test file). In course order:

* chapter 0: :mod:`.speculative_generate`; 1: :mod:`.decode_step_bytes`; 3:
  :mod:`.ngram_drafter`; the greedy rule, for a teacher who sets it: :mod:`.accept_greedy`;
  4: :mod:`.greedy_tokens_per_pass` (``check_tokens_per_pass``); 5: :mod:`.break_even_c`;
  6: :mod:`.accept_sampled`; 7: :mod:`.distribution_tests` (``check_distribution_test``);
  8: :mod:`.cache_lengths`, :mod:`.batch_rollback`; 9: :mod:`.bernoulli_drafter`; 10:
  :mod:`.slower_from`; 10b: :mod:`.goodput_ks`; 12: :mod:`.tree_mask`,
  :mod:`.verify_children`; 13: :mod:`.predict_counts`, :mod:`.keep_likeliest`.

The shared modules, each because more than one exercise needs it:

* :mod:`.report`: :class:`Report` and :data:`Diagnosis`, what a check says: every check's
  verdict, message and evidence look alike, and the grading log records them;
* :mod:`.mistakes`: the registry, each exercise's reference and mistakes as its module
  registers them, which the sandbox trusts and ``python -m specdec_lib.grading``
  (:func:`~.mistakes.catch_rates`) measures every check on;
* :mod:`.sandbox`: runs student code safely (exceptions, hangs, calls of the library's
  own implementation and draws from other generators become failing reports), seeds and
  restores the random state, and writes the grading log;
* :mod:`.answers`: :class:`~.answers.ExactCheck`, the check of an exercise with one right
  answer per input, which ten exercises use, and the rule that names the mistake a wrong
  answer reproduces (:func:`~.answers.closest_mistake`, :mod:`.keep_likeliest`'s too).

Imports flow one way: report, mistakes, sandbox, answers, the exercises' modules (only
:mod:`.accept_sampled` imports another: two of its slips are :mod:`.accept_greedy`'s), this
package.
"""

# ruff: noqa: F401 (the checks are imported for CHECKS and as the public names)
from .accept_greedy import check_accept_greedy
from .accept_sampled import check_accept_sampled
from .batch_rollback import check_batch_rollback
from .bernoulli_drafter import check_bernoulli_drafter
from .break_even_c import check_break_even_c
from .cache_lengths import check_cache_lengths
from .decode_step_bytes import check_decode_step_bytes
from .distribution_tests import check_distribution_test
from .goodput_ks import check_goodput_ks
from .greedy_tokens_per_pass import check_tokens_per_pass
from .keep_likeliest import check_keep_likeliest
from .ngram_drafter import check_ngram_drafter
from .predict_counts import check_predict_counts
from .report import Diagnosis, Report
from .sandbox import LOG_ENV
from .slower_from import check_slower_from
from .speculative_generate import check_speculative_generate
from .tree_mask import check_tree_mask
from .verify_children import check_verify_children

#: Every check, by name (the names chapters call and the grading log records), in course order.
CHECKS = {
    name: globals()[name]
    for name in """check_speculative_generate check_decode_step_bytes check_ngram_drafter
    check_accept_greedy check_tokens_per_pass check_break_even_c check_accept_sampled
    check_distribution_test check_cache_lengths check_batch_rollback check_bernoulli_drafter
    check_slower_from check_goodput_ks check_tree_mask check_verify_children
    check_predict_counts check_keep_likeliest""".split()
}

__all__ = ["CHECKS", "LOG_ENV", "Diagnosis", "Report", *CHECKS]
