"""Autograders for the exercises: the course's negative controls, aimed at student code.

Each ``check_*`` takes the student's function and returns a :class:`Report`; it never raises
because of the student's code. Imports flow one way: report, the mistakes (rollback,
per_pass, tree_slips, replay_slips, speculative_slips, goodput_slips, mistakes), harness,
the checks (``rerank`` holds its own mistakes, and adds them to ``mistakes``' tables).
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
from .ngram_drafter import check_ngram_drafter
from .replay import check_predict_counts
from .report import Diagnosis, Report
from .rerank import check_keep_likeliest
from .sandbox import LOG_ENV
from .slower_from import check_slower_from
from .speculative_generate import check_speculative_generate
from .trees import check_tree_mask, check_verify_children

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
