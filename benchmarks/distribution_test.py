"""The distribution test, tested: false-alarm and miss rates over 200 seeds.

    python benchmarks/distribution_test.py [--seeds 200] [--first-seed 100]
        [--sizes 100,200,300,500,750,1000,1500] [--workers 1]

The set-up of chapter 7's "testing the test": the UNTRAINED target after a fixed
context (CONTEXT below, so the result does not depend on the workload generator),
sharpened to temperature 0.3 so that its most likely token has a moderate
probability (about 0.22; at temperature 1 it is below 0.01 and the chi-square
test would need many times more rounds), and a one-hot drafter proposing
that token. For every seed, each
rule (the residual rule ``accept_sampled`` and the plausible bug
``accept_sampled_biased``) is run for the largest sample size; the chi-square
distribution test (alpha = 1e-3, sparse bins pooled) is applied to the first
emitted token at every size, on prefixes of the same run. The correct rule must
pass at least 99% of the seeds and the biased rule fail at least 99%, at the
largest size. Writes benchmarks/results/distribution_test.json.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch

from specdec_lib import (
    SamplingParams,
    Tokenizer,
    accept_sampled,
    accept_sampled_biased,
    load_model,
    process_logits,
)
from specdec_lib.analysis.exact import exact_output_distribution
from specdec_lib.analysis.hypothesis import ALPHA, chi_square_power, run_distribution_tests
from specdec_lib.analysis.provenance import run_stamp
from specdec_lib.analysis.results import save_result
from specdec_lib.engine.drafters import one_hot_probs

OUT = Path(__file__).parent / "results" / "distribution_test.json"
RULES = {"correct": accept_sampled, "biased": accept_sampled_biased}
CONTEXT = "A drafter proposes, the target decides. Which token comes next? "
PARAMS = SamplingParams(temperature=0.3)
BAR = 0.99


def setup() -> tuple[torch.Tensor, int, torch.Tensor]:
    """Untrained target's next-token logits after the prompt, the drafted token, its q."""
    torch.set_num_threads(1)
    target = load_model("target", trained=False)
    ids = Tokenizer().encode(CONTEXT)
    with torch.inference_mode():
        logits = target(torch.tensor([ids]))[0, -1]  # (V,)
    drafted = int(process_logits(logits, PARAMS).argmax())
    return logits, drafted, one_hot_probs([drafted], logits.shape[-1])[0]


def _run(job: tuple[str, list[int], list[int]]) -> tuple[str, dict[int, list[float]]]:
    name, sizes, seeds = job
    logits, _, q = setup()
    runs = run_distribution_tests(RULES[name], logits, q, PARAMS, sizes, seeds, ALPHA)
    return name, {n: [t.chi_square.p_value for t in tests] for n, tests in runs.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--first-seed", type=int, default=100)
    parser.add_argument("--sizes", default="100,200,300,500,750,1000,1500")
    parser.add_argument("--workers", type=int, default=1, help="processes (the machine is shared)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))

    logits, drafted, q = setup()
    p = process_logits(logits, PARAMS)
    biased = exact_output_distribution(accept_sampled_biased, logits, q, PARAMS)
    chunks = [seeds[i :: args.workers] for i in range(args.workers)]
    jobs = [(name, sizes, chunk) for name in RULES for chunk in chunks]
    start = time.perf_counter()
    p_values: dict[str, dict[int, list[float]]] = {name: {n: [] for n in sizes} for name in RULES}
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        for name, result in pool.map(_run, jobs):
            for n, values in result.items():
                p_values[name][n].extend(values)
    seconds = time.perf_counter() - start

    rows = []
    print(f"{'samples':>7} {'false alarms':>12} {'misses':>7} {'predicted power':>15}")
    for n in sizes:
        false_alarms = sum(v < ALPHA for v in p_values["correct"][n])
        misses = sum(v >= ALPHA for v in p_values["biased"][n])
        power = chi_square_power(p, biased, n, ALPHA)
        rows.append(
            dict(
                samples=n,
                seeds=len(seeds),
                false_alarms=false_alarms,
                misses=misses,
                false_alarm_rate=false_alarms / len(seeds),
                miss_rate=misses / len(seeds),
                predicted_power=power,
            )
        )
        print(f"{n:7d} {false_alarms:8d}/{len(seeds)} {misses:3d}/{len(seeds)} {power:15.5f}")
    top = rows[-1]
    passed = 1 - top["false_alarm_rate"] >= BAR and 1 - top["miss_rate"] >= BAR
    result = {
        "description": "chi-square distribution test of the first emitted token, over seeds",
        "command": "python benchmarks/distribution_test.py " + " ".join(argv or sys.argv[1:]),
        "setup": {
            "model": "target, trained=False",
            "context": CONTEXT,
            "temperature": PARAMS.temperature,
            "drafter": "one-hot, proposing the target's most likely token",
            "drafted_token": drafted,
            "p_target_drafted": float(p[drafted]),
            "p_biased_drafted": float(biased[drafted]),
            "alpha": ALPHA,
            "seeds": [seeds[0], seeds[-1]],
        },
        "rows": rows,
        "p_values_at_largest": {name: p_values[name][sizes[-1]] for name in RULES},
        "bar": BAR,
        "passed": passed,
        "seconds": round(seconds, 1),
        "workers": args.workers,
        "stamp": run_stamp(),
    }
    save_result(args.out, result)
    verdict = "PASS" if passed else "FAIL"
    print(
        f"{verdict} at {top['samples']} samples x {len(seeds)} seeds: correct rule passed "
        f"{1 - top['false_alarm_rate']:.1%}, biased rule failed {1 - top['miss_rate']:.1%} "
        f"(bar {BAR:.0%}); {result['seconds']} s; wrote {args.out}"
    )
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
