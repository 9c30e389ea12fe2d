"""Measuring the engine: general tools, one idea per module.

The rule: a module lives here when two or more chapters use it as a tool, or a chapter and
the engine, the grading or the benchmarks do, in a general way. One chapter's apparatus
lives in :mod:`specdec_lib.experiments`; what only the benchmarks call lives with them, in
``benchmarks/`` (``harness.py``, ``measures.py``, ``run_summaries.py``). By that rule:

* Theory: :mod:`.theory` (the textbook model and the cost-aware policy; chapters 4, 5, 9)
  and :mod:`.ceiling` (the most tokens per pass a run can reach; chapters 4, 11).
* Is the output right? :mod:`.exact_distributions` (exact output distributions, by
  :mod:`.enumeration` of a rule's random draws; chapters 6, 7, 11, 13),
  :mod:`.greedy_replay` (greedy speculation's counts, replayed from what it writes;
  chapters 10, 13), :mod:`.hypothesis` (seeded samples and the chi-square test; chapters
  6, 7, 7b, 12, 13) and :mod:`.power` (how many samples that test needs; 7, 12, 13).
* How fast, and why: :mod:`.timing` (the one timing loop), :mod:`.intervals` (the one
  bootstrap, over prompts and repeats), :mod:`.costs` (every cost model, one section per
  chapter that prices speculation), :mod:`.pass_profile` (a pass by its operators;
  chapter 1, appendix B), :mod:`.crossover` (where a measured batch sweep stops paying;
  chapter 10, and the sweeps' benchmarks).
* Runs and their records: :mod:`.runs` (pooled speculation, copy accuracy),
  :mod:`.novelty` (what a workload's continuation is; chapters 2, 3, 8, 10),
  :mod:`.replication` (what two runs agree on; chapters 9, 10, 12, 13),
  :mod:`.provenance` and :mod:`.results` (the machine a measurement ran on, and the
  committed result files).

Imports the engine and the text package; nothing in the engine imports from here.
"""
