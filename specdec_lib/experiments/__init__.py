"""One chapter's experiment per module: apparatus built from the analysis layer for a
single chapter, not a general tool (the rule that sorts the two is in
:mod:`specdec_lib.analysis`).

* chapter 1: :mod:`.batch_steps` (a batched decode timed by its parts);
* chapter 7b: :mod:`.mutants` (bugs from public trackers, as one-change mutants of the
  engine), :mod:`.mutant_battery` (the course's tests run on each of them) and
  :mod:`.tree_mutants` (the same for the token-tree walks);
* chapter 8: :mod:`.rollback_bugs` (rollback bugs from public trackers, as one-change
  mutants of the cache and the draft model, and a drafter spoiled at chosen positions);
* chapter 10b: :mod:`.goodput_policy` (each round, the draft lengths that maximise a
  server's expected tokens per second);
* chapter 11: :mod:`.hf_compare` (the course's weights in transformers, and
  transformers' drafting rules in the engine), :mod:`.generation_profile` (one
  generation's time split into parts) and :mod:`.hf_profile` (the two engines profiled
  side by side);
* chapter 12: :mod:`.sibling_draws` (several drafts at one node, drawn without
  replacement, and the exact law of what a tree walk then emits);
* chapter 13: :mod:`.exit_agreement` (how often each depth already guesses the last
  layer's token: an early exit's first draft);
* appendix A: :mod:`.attention` (attention patterns, and the score that finds an
  induction head).

Imports the analysis layer, the engine and the text package; nothing below imports from
here, and the chapters' figures of these results are drawn in ``course``.
"""
