"""Measuring the engine: general tools any chapter may use, one idea per module.

* Theory: :mod:`.theory` (the textbook model and the cost-aware policy), :mod:`.ceiling`
  (the most tokens per pass a run can reach).
* Is the output right? :mod:`.exact_distributions` (exact output distributions, by
  :mod:`.enumeration` of a rule's random draws), :mod:`.greedy_replay` (greedy
  speculation's counts, replayed from what it writes), :mod:`.hypothesis` (seeded
  samples and the chi-square test), :mod:`.power` (how many samples that test needs).
* How fast, and why: :mod:`.timing` (the one timing loop), :mod:`.intervals` (bootstrap
  intervals over prompts and repeats), :mod:`.costs` (the cost model),
  :mod:`.predictions` (runs predicted from measured costs), :mod:`.pass_profile` and
  :mod:`.batch_steps` (a pass and a batched decode, by their parts).
* Runs and their records: :mod:`.runs` (pooled speculation, copy accuracy),
  :mod:`.novelty` (what a workload's continuation is), :mod:`.attention` (the induction
  head), :mod:`.replication` (what two runs agree on), :mod:`.crossover` (the batch size
  where speculation stops paying, measured and predicted), :mod:`.provenance` and
  :mod:`.results` (stamps and committed result files).

Imports the engine and the text package; nothing in the engine imports from here. One
chapter's own apparatus lives in :mod:`specdec_lib.experiments`.
"""
