"""Batched speculation against batched plain decoding, batch size 1 to 64: where it stops paying.

    python benchmarks/batch_sweep.py [--batch-sizes 1,2,4,8,16,32,64] [--tokens 64] [--k 4]
        [--repeats 7] [--threads 1] [--seed 2026] [--strict]

For each scenario ("copy" and "novel" greedy, "novel T=1" sampled at temperature 1,
where nothing repeats) and batch size B, B different prompts are decoded together,
with the n-gram drafter (``NgramDrafter``): plainly (``generate_batch``: one target
pass per token for the whole batch) and speculatively (``speculative_generate_batch``:
one target pass per round for the whole batch, k+1 positions per request, per-request
acceptance and rollback). Throughput is B x ``--tokens`` new tokens
over the wall time of the whole batch (prefill included in both). Outputs must
be identical (greedy) or the script stops.

Timing (:func:`~specdec_lib.analysis.timing.interleaved`): one untimed warm-up of each
(workload, B, method), then ``--repeats`` rounds timing every configuration once in a
freshly shuffled order. The speed-up at each B is the median of the per-repeat ratios
plain / speculative (paired: measured side by side), with a bootstrap 95% interval over
repeats. The crossover is reported only where the intervals resolve it: the largest B
at which speculation is faster with its whole interval above 1 and the smallest B at
which it is slower with its whole interval below 1; where no interval lies below 1 the
result is "no crossover within the range". Stamped with machine, commit and weights,
and checked for load (``--strict`` refuses a busy run).
Writes benchmarks/results/batch_sweep.json (every per-repeat timing included, under
``times``) and prints a table. Two runs are compared, verdict by verdict, by
``benchmarks/compare_runs.py``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

from specdec_lib import (
    NgramDrafter,
    SamplingParams,
    SpeculationStats,
    Tokenizer,
    load_model,
    workload_prompts,
)
from specdec_lib.analysis.provenance import busy_report, run_stamp
from specdec_lib.analysis.replication import crossover
from specdec_lib.analysis.results import save_result
from specdec_lib.analysis.timing import bootstrap_interval, interleaved
from specdec_lib.engine.batched import generate_batch, speculative_generate_batch

OUT = Path(__file__).parent / "results" / "batch_sweep.json"
# Greedy "novel" output falls into a loop on this model; sampled at T = 1 nothing repeats.
SCENARIOS = {"copy": ("copy", 0.0), "novel": ("novel", 0.0), "novel T=1": ("novel", 1.0)}


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def crossover_of(rows: list[dict], workload: str) -> dict:
    """Where speculation stops paying, as far as this run's intervals can tell."""
    return crossover([r for r in rows if r["workload"] == workload])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-sizes", type=_ints, default=[1, 2, 4, 8, 16, 32, 64])
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--strict", action="store_true", help="refuse to write if busy")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    stamp = run_stamp()
    tok = Tokenizer()
    target = load_model("target")
    biggest = max(args.batch_sizes)
    encoded = {
        w: [tok.encode(p) for p in workload_prompts(w, biggest, args.seed)]
        for w in ("copy", "novel")
    }
    prompts = {name: encoded[w] for name, (w, _) in SCENARIOS.items()}
    settings = {
        name: SamplingParams(temperature=t, max_tokens=args.tokens)
        for name, (_, t) in SCENARIOS.items()
    }

    def seeded(w: str) -> torch.Generator | None:
        return None if settings[w].greedy else torch.Generator().manual_seed(args.seed)

    def plain(w: str, b: int) -> list[list[int]]:
        return generate_batch(target, prompts[w][:b], settings[w], seeded(w))

    def spec(w: str, b: int, stats: SpeculationStats | None = None) -> list[list[int]]:
        return speculative_generate_batch(
            target,
            NgramDrafter,
            prompts[w][:b],
            settings[w],
            k=args.k,
            generator=seeded(w),
            stats=stats,
        )

    start = time.perf_counter()
    counts = {}
    for w in prompts:
        for b in args.batch_sizes:
            stats = SpeculationStats()
            if spec(w, b, stats) != plain(w, b) and settings[w].greedy:  # also the warm-up
                raise AssertionError(f"batched speculation changed the output ({w}, B={b})")
            counts[w, b] = stats
    print(f"warm-up and checks done in {time.perf_counter() - start:.0f} s")

    jobs = {
        (w, b, m): (lambda w=w, b=b, m=m: (plain if m == "plain" else spec)(w, b))
        for w in prompts
        for b in args.batch_sizes
        for m in ("plain", "spec")
    }
    timed = interleaved(
        jobs,
        args.repeats,
        seed=args.seed,
        warmup=0,  # the output check above was the warm-up
        progress=lambda r: print(
            f"repeat {r}/{args.repeats} ({time.perf_counter() - start:.0f} s)"
        ),
    )
    times = {key: wall for key, (wall, _) in timed.items()}
    cpu = {key: c for key, (_, c) in timed.items()}
    load = busy_report(
        [x for t in times.values() for x in t], [x for c in cpu.values() for x in c], args.threads
    )

    rows = []
    for w in prompts:
        for b in args.batch_sizes:
            tp, ts = times[w, b, "plain"], times[w, b, "spec"]
            ratios = [p / s for p, s in zip(tp, ts, strict=True)]
            speed = bootstrap_interval(ratios, seed=args.seed)
            stats = counts[w, b]
            n = b * args.tokens
            rows.append(
                {
                    "workload": w,
                    "batch": b,
                    "plain_tokens_per_second": n / statistics.median(tp),
                    "plain_tps_low": n / max(tp),
                    "plain_tps_high": n / min(tp),
                    "spec_tokens_per_second": n / statistics.median(ts),
                    "spec_tps_low": n / max(ts),
                    "spec_tps_high": n / min(ts),
                    "speedup_median": speed.value,
                    "speedup_low": speed.low,
                    "speedup_high": speed.high,
                    "plain_target_passes": args.tokens,
                    "spec_target_passes": stats.target_passes,
                    "spec_tokens_per_request_per_pass": stats.emitted / b / stats.target_passes,
                    "spec_positions_per_pass": (b + stats.proposed) / stats.target_passes,
                    "acceptance_rate": stats.acceptance_rate,
                }
            )

    result = {
        "stamp": stamp,
        "load": load,
        "command": " ".join(["python benchmarks/batch_sweep.py", *sys.argv[1:]]),
        "interval": "bootstrap 95% over repeats of the paired ratio",
        "threads": args.threads,
        "k": args.k,
        "drafter": NgramDrafter().name,
        "tokens_per_request": args.tokens,
        "repeats": args.repeats,
        "seed": args.seed,
        "crossover": {w: crossover_of(rows, w) for w in prompts},
        "seconds": round(time.perf_counter() - start, 1),
        "rows": rows,
        # every timing (workload -> B -> method -> repeats, in the order they ran), so that
        # intervals can be rebuilt from blocks of repeats or from two runs pooled
        "times": {
            w: {str(b): {m: times[w, b, m] for m in ("plain", "spec")} for b in args.batch_sizes}
            for w in prompts
        },
    }
    m = result["stamp"]
    print(
        f"\n{m['cpu']}, {args.threads} thread(s), torch {m['torch']}, commit {m['commit']}; "
        f"n-gram k={args.k}, {args.tokens} tokens per request, median of {args.repeats} "
        f"[bootstrap 95%]"
    )
    print(
        f"{'workload':8} {'B':>3} {'plain tok/s':>11} {'spec tok/s':>10} {'speed-up':>8} "
        f"{'[95%]':>13} {'accepted':>8} {'spec passes':>11}"
    )
    for r in rows:
        print(
            f"{r['workload']:8} {r['batch']:3d} {r['plain_tokens_per_second']:11.0f} "
            f"{r['spec_tokens_per_second']:10.0f} {r['speedup_median']:8.2f} "
            f"[{r['speedup_low']:5.2f}, {r['speedup_high']:5.2f}] {r['acceptance_rate']:8.2f} "
            f"{r['spec_target_passes']:11d}"
        )
    for w, c in result["crossover"].items():
        print(f"crossover, {w}: {c['verdict']}")
    save_result(args.out, result, args.strict)
    print(f"all outputs identical; {result['seconds']} s; wrote {args.out}")


if __name__ == "__main__":
    main()
