"""One chapter's experiment per module: apparatus built from the analysis layer for a
single chapter, not a general tool.

* chapter 7b: :mod:`.mutants` (bugs from public trackers, as one-change mutants of the
  engine) and :mod:`.mutant_battery` (the course's tests run on each of them);
* chapter 8: :mod:`.rollback_bugs` (rollback bugs from public trackers, as one-change
  mutants of the cache and the draft model, and a drafter spoiled at chosen positions);
* chapter 10b: :mod:`.goodput_policy` (each round, the draft lengths that maximise a
  server's expected tokens per second);
* chapter 11: :mod:`.hf_compare` (the course's weights in transformers, and
  transformers' drafting rules in the engine), :mod:`.generation_profile` (one
  generation's time split into parts) and :mod:`.hf_profile` (the two engines profiled
  side by side);
* chapter 12: :mod:`.sibling_draws` (several drafts at one node, drawn without
  replacement, and the exact law of what a tree walk then emits).

Imports the analysis layer, the engine and the text package; nothing below imports from
here, and the chapters' figures of these results are drawn in ``course``.
"""
