"""Batched speculation against batched plain decoding, batch size 1 to 64: where it stops paying.

    python benchmarks/batch_sweep.py [--batch-sizes 1,2,4,8,16,32,64] [--tokens 128] [--k 4]
        [--repeats 3] [--threads 1] [--seed 2026]

For each workload and batch size B, B different prompts are decoded together,
greedy, with the n-gram drafter (``NgramDrafter``, the library's rule with a
C-speed search): plainly (``generate_batch``: one target pass per token for the
whole batch) and speculatively (``speculative_generate_batch``: one target pass
per round for the whole batch, k+1 positions per request,
per-request acceptance and rollback). Throughput is B x ``--tokens`` new tokens
over the wall time of the whole batch (prefill included in both). Outputs must
be identical or the script stops.

Timing: one untimed warm-up of each (workload, B, method), then ``--repeats``
rounds timing every configuration once in a freshly shuffled order; medians and
ranges over repeats. The crossover is the smallest batch size at which the
median speculative throughput falls below the plain one. The process's CPU time
is recorded too (steadier on a shared machine, where a run can be descheduled).
Writes benchmarks/results/batch_sweep.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
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
from specdec_lib.analysis.timing import machine_stamp
from specdec_lib.engine.batched import generate_batch, speculative_generate_batch

OUT = Path(__file__).parent / "results" / "batch_sweep.json"


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def crossover(rows: list[dict], workload: str) -> int | None:
    """Smallest batch size where speculation's median throughput falls below plain decoding's."""
    for r in sorted((r for r in rows if r["workload"] == workload), key=lambda r: r["batch"]):
        if r["speedup_median"] < 1.0:
            return r["batch"]
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-sizes", type=_ints, default=[1, 2, 4, 8, 16, 32, 64])
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    tok = Tokenizer()
    target = load_model("target")
    params = SamplingParams(max_tokens=args.tokens)
    biggest = max(args.batch_sizes)
    prompts = {
        w: [tok.encode(p) for p in workload_prompts(w, biggest, args.seed)]
        for w in ("copy", "novel")
    }

    def plain(w: str, b: int) -> list[list[int]]:
        return generate_batch(target, prompts[w][:b], params)

    def spec(w: str, b: int, stats: SpeculationStats | None = None) -> list[list[int]]:
        return speculative_generate_batch(
            target, NgramDrafter, prompts[w][:b], params, k=args.k, stats=stats
        )

    start = time.perf_counter()
    counts = {}
    for w in prompts:
        for b in args.batch_sizes:
            stats = SpeculationStats()
            if spec(w, b, stats) != plain(w, b):  # also the warm-up
                raise AssertionError(f"batched speculation changed the output ({w}, B={b})")
            counts[w, b] = stats
    print(f"warm-up and checks done in {time.perf_counter() - start:.0f} s")

    rng = random.Random(args.seed)
    times = {(w, b, m): [] for w in prompts for b in args.batch_sizes for m in ("plain", "spec")}
    cpu = {key: [] for key in times}
    for r in range(args.repeats):
        jobs = list(times)
        rng.shuffle(jobs)
        for w, b, m in jobs:
            t0, c0 = time.perf_counter(), time.process_time()
            (plain if m == "plain" else spec)(w, b)
            times[w, b, m].append(time.perf_counter() - t0)
            cpu[w, b, m].append(time.process_time() - c0)
        print(f"repeat {r + 1}/{args.repeats} done ({time.perf_counter() - start:.0f} s)")

    rows = []
    for w in prompts:
        for b in args.batch_sizes:
            tp, ts = times[w, b, "plain"], times[w, b, "spec"]
            ratios = [p / s for p, s in zip(tp, ts, strict=True)]
            cpu_ratios = [p / s for p, s in zip(cpu[w, b, "plain"], cpu[w, b, "spec"], strict=True)]
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
                    "speedup_median": statistics.median(ratios),
                    "speedup_low": min(ratios),
                    "speedup_high": max(ratios),
                    "cpu_speedup_median": statistics.median(cpu_ratios),
                    "cpu_speedup_low": min(cpu_ratios),
                    "cpu_speedup_high": max(cpu_ratios),
                    "plain_target_passes": args.tokens,
                    "spec_target_passes": stats.target_passes,
                    "spec_tokens_per_request_per_pass": stats.emitted / b / stats.target_passes,
                    "spec_positions_per_pass": (b + stats.proposed) / stats.target_passes,
                    "acceptance_rate": stats.acceptance_rate,
                }
            )

    result = {
        "machine": machine_stamp(),
        "command": (
            f"python benchmarks/batch_sweep.py --batch-sizes "
            f"{','.join(map(str, args.batch_sizes))} --tokens {args.tokens} --k {args.k} "
            f"--repeats {args.repeats} --threads {args.threads} --seed {args.seed}"
        ),
        "k": args.k,
        "drafter": NgramDrafter().name,
        "tokens_per_request": args.tokens,
        "repeats": args.repeats,
        "seed": args.seed,
        "crossover": {w: crossover(rows, w) for w in prompts},
        "seconds": round(time.perf_counter() - start, 1),
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    m = result["machine"]
    print(
        f"\n{m['cpu']}, {m['torch_threads']} thread(s), torch {m['torch']}; n-gram k={args.k}, "
        f"{args.tokens} tokens per request, median of {args.repeats} [range]"
    )
    print(
        f"{'workload':8} {'B':>3} {'plain tok/s':>11} {'spec tok/s':>10} {'speed-up':>8} "
        f"{'[range]':>13} {'spec passes':>11}"
    )
    for r in rows:
        print(
            f"{r['workload']:8} {r['batch']:3d} {r['plain_tokens_per_second']:11.0f} "
            f"{r['spec_tokens_per_second']:10.0f} {r['speedup_median']:8.2f} "
            f"[{r['speedup_low']:5.2f}, {r['speedup_high']:5.2f}] {r['spec_target_passes']:11d}"
        )
    print(f"crossover (first B where speculation is slower): {result['crossover']}")
    print(f"all outputs identical; {result['seconds']} s; wrote {args.out}")


if __name__ == "__main__":
    main()
