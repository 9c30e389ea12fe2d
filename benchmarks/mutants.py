"""Bugs from the wild: every mutant of specdec_lib.experiments.mutants through every test.

    OMP_NUM_THREADS=1 python benchmarks/mutants.py [--exact-runs 500] [--exact-round-runs 100]
        [--real-seeds 5]
        [--rounds 1500] [--seed-requests 500] [--e2e-runs 150] [--e2e-seeds 4]

For each mutant (and the correct engine, whose catch rate is the false-alarm rate):

* the theory: the exact output law the tests see (the mutated code enumerated on every
  branch of its draws, or the analytic law where the enumeration cannot follow it), its
  total-variation distance from the target, and the rounds each sampled test needs for
  99% power (the noncentral chi-square of specdec_lib.analysis.hypothesis);
* the first-token and all-position tests at ``--rounds`` rounds: ``--exact-runs``
  (``--exact-round-runs``) seed-runs drawn from that law, and ``--real-seeds``
  seed-runs of the real mutated functions as a cross-check;
* the across-seeds test (``--seed-requests`` one-round requests per run) and the
  end-to-end test (``--e2e-runs`` whole generations per run), real functions only;
* greedy identity (trained models, copy and novel prompts, both drafters, k = 4) and the
  tie test: deterministic, every run listed.

Every rate carries a Wilson 95% interval. Writes specdec_lib/results/mutants.json.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import torch

from specdec_lib.analysis.hypothesis import ALPHA
from specdec_lib.analysis.power import chi_square_power
from specdec_lib.experiments.mutant_battery import (
    E2E_K,
    GREEDY_K,
    GREEDY_PROMPTS,
    GREEDY_TOKENS,
    RoundLaw,
    Setup,
    across_seeds_test,
    all_position_test,
    end_to_end_test,
    first_token_distribution,
    first_token_test,
    greedy_identity,
    position_counts,
    positions_fail,
    round_law,
    rounds_for_power,
    tie_test,
    total_variation,
)
from specdec_lib.experiments.mutants import CORRECT, MUTANTS, Mutant

from harness import Benchmark, failed_draws, rate


def sampled_rounds(law: RoundLaw, setup: Setup, n: int, runs: int) -> list[bool]:
    """Seed-runs of ``n`` two-token rounds drawn from ``law``, through the all-position test."""
    rng = np.random.default_rng([19, n])
    v, d = setup.vocab_size, setup.drafted
    finals = [(f / f.sum()).numpy() for f in law.final]
    out = []
    for _ in range(runs):
        j = rng.choice(3, size=n, p=np.asarray(law.accepted) / sum(law.accepted))
        tokens = np.empty(n, dtype=np.int64)
        for a in range(3):
            tokens[j == a] = rng.choice(v, size=int((j == a).sum()), p=finals[a])
        outs = [d[:a] + [int(y)] for a, y in zip(j, tokens, strict=True)]
        counts = position_counts(outs, d, v, setup.position_caps(n))
        out.append(positions_fail(counts, setup.round_p))
    return out


def power_rounds(m: Mutant, setup: Setup, dist: torch.Tensor, law: RoundLaw) -> dict:
    """Rounds for 99% power: first token, and the most affected position of the round
    alone at level alpha / 3, on as many rounds as the test looks at there (so a lower
    bound on the all-position test's power)."""
    first = (
        rounds_for_power(lambda n: chi_square_power(setup.p, dist, n))
        if total_variation(dist, setup.p) > 1e-9
        else None
    )
    best = None
    for i in range(3):
        reach, cond = law.position(i, setup.drafted)
        if reach <= 0 or total_variation(cond, setup.round_p[i]) <= 1e-9:
            continue

        def power(n: int, i: int = i, reach: float = reach, cond: torch.Tensor = cond) -> float:
            try:
                tested = min(int(reach * n), setup.position_caps(n)[i])  # as the test caps it
                return chi_square_power(setup.round_p[i], cond, max(1, tested), ALPHA / 3)
            except ValueError:  # too few rounds reach it for one degree of freedom
                return 0.0

        r = rounds_for_power(power)
        best = r if best is None or (r is not None and r < best) else best
    return {"first_token": first, "all_position": best}


def main(argv: list[str] | None = None) -> int:
    small = dict(exact_runs=4, exact_round_runs=4, real_seeds=1, rounds=200, seed_requests=20)
    small |= dict(seed_runs=2, e2e_seeds=1)  # fewer e2e runs leave no cells to pool
    bench = Benchmark("mutants", __doc__, small=small)
    numbers = {"exact-runs": 500, "exact-round-runs": 100, "real-seeds": 5, "rounds": 1500}
    numbers |= {"seed-requests": 500, "seed-runs": 10, "e2e-runs": 150, "e2e-seeds": 4}
    for name, default in (numbers | {"greedy-seed": 100}).items():
        bench.add(f"--{name}", type=int, default=default)
    args = bench.parse(argv)
    setup = Setup()
    n = args.rounds
    rows = []
    for m in (CORRECT, *MUTANTS):
        t0 = time.perf_counter()
        dist = first_token_distribution(m, setup)
        law = round_law(m, setup)
        real = range(1000, 1000 + args.real_seeds)
        greedy = greedy_identity(m, args.greedy_seed)
        row = {
            "mutant": m.name,
            "thread": m.thread,
            "url": m.url,
            "fix": m.fix,
            "description": m.description,
            "law": m.law,
            "theory": {
                "first_token_tv": total_variation(dist, setup.p),
                "position_tv": [
                    total_variation(law.position(i, setup.drafted)[1], setup.round_p[i])
                    for i in range(3)
                ],
                "rounds_for_99_power": power_rounds(m, setup, dist, law),
            },
            "tests": {
                "greedy_identity": rate(greedy),
                "first_token": rate(failed_draws(dist, setup.p, n, args.exact_runs, 17)),
                "first_token_real": rate([first_token_test(m, setup, n, s) for s in real]),
                "all_position": rate(sampled_rounds(law, setup, n, args.exact_round_runs)),
                "all_position_real": rate([all_position_test(m, setup, n, s) for s in real]),
                "end_to_end": rate(
                    [end_to_end_test(m, setup, args.e2e_runs, s) for s in range(args.e2e_seeds)]
                ),
                "across_seeds": rate(
                    [
                        across_seeds_test(m, setup, args.seed_requests, s)
                        for s in range(args.seed_runs)
                    ]
                ),
                "tie": rate(tie_test(m)),
            },
        }
        rows.append(row)
        t = row["tests"]
        print(
            f"{m.name:22s} "
            + " ".join(f"{name}={v['caught']}/{v['runs']}" for name, v in t.items())
            + f"  99%: {row['theory']['rounds_for_99_power']}  {time.perf_counter() - t0:.0f} s",
            flush=True,
        )

    def caught_by_some(r: dict) -> bool:
        t = r["tests"]
        return any(t[k]["interval"][0] > 0.5 for k in t)

    correct = rows[0]["tests"]
    checks = {
        "correct_engine_never_caught_deterministically": correct["greedy_identity"]["caught"] == 0
        and correct["tie"]["caught"] == 0,
        "correct_engine_false_alarms_consistent_with_alpha": all(
            v["interval"][0] <= ALPHA for v in correct.values()
        ),
        "every_mutant_caught_by_some_test": all(caught_by_some(r) for r in rows[1:]),
    }
    result = {
        "description": "one-change mutants of the engine through the course's tests",
        "setup": {
            "sampled_tests": "untrained target and draft model after chapter 7's context",
            "context": setup.context,
            "temperature": setup.params.temperature,
            "top_k": setup.params.top_k,
            "alpha": ALPHA,
            "rounds": n,
            "exact_runs": args.exact_runs,
            "exact_round_runs": args.exact_round_runs,
            "real_seeds": args.real_seeds,
            "seed_requests": args.seed_requests,
            "seed_runs": args.seed_runs,
            "e2e_runs": args.e2e_runs,
            "e2e_seeds": args.e2e_seeds,
            "e2e_k": E2E_K,
            "first_token_drafter": "untrained draft model, k = 1",
            "all_position_drafter": "one-hot, the target's favourite at each of 2 positions",
            "drafted": setup.drafted,
            "p_drafted": [float(setup.round_p[i, d]) for i, d in enumerate(setup.drafted)],
            "greedy": f"trained target; {GREEDY_PROMPTS} copy and {GREEDY_PROMPTS} novel prompts "
            f"(seed {args.greedy_seed}) x n-gram and draft-model drafters, k = {GREEDY_K}, "
            f"{GREEDY_TOKENS} tokens",
            "interval": "Wilson 95%",
        },
        "rows": rows,
        "checks": checks,
    }
    return bench.verdict(result)


if __name__ == "__main__":
    sys.exit(main())
