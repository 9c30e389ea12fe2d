"""Batched speculation against batched plain decoding, batch size 1 to 256: where it stops paying.

    python benchmarks/batch_sweep.py [--batch-sizes 1,2,4,8,16,32,64,128,256] [--tokens 64]
        [--k 4] [--single 12] [--repeats 8] [--blocks 8] [--threads 1] [--seed 2026]
        [--strict] [--out PATH]
    python benchmarks/batch_sweep.py --small --out /tmp/sweep.json   # a one-minute check
    python benchmarks/batch_sweep.py --scenarios edit --batch-sizes 32,64,128,256   # one workload

For each scenario ("copy", "edit", "answer" and "novel" greedy, "novel T=1" sampled at
temperature 1) and batch size B, B different prompts are decoded together,
with the n-gram drafter (``NgramDrafter``): plainly (``generate_batch``: one target
pass per token for the whole batch) and speculatively (``speculative_generate_batch``:
one target pass per round for the whole batch, k+1 positions per request, per-request
acceptance and rollback). Throughput is B x ``--tokens`` new tokens over the wall time of
the whole batch (prefill included in both). Batch one decodes ``--single`` requests one
after another (the first 12 prompts of the seed: the requests chapter 9 times), so its
point rests on as many requests as chapter 9's, not on one. Outputs must be identical
(greedy) or the script stops.

Timing (:func:`~specdec_lib.analysis.timing.interleaved`): the output check is the
warm-up, then ``--repeats`` rounds timing every configuration once in a freshly shuffled
order; each round runs the whole job list, so the rounds are spread over the run. The
speed-up at each B is the paired ratio of plain's median time to speculation's
(:func:`~specdec_lib.analysis.intervals.paired_speedup`), with a bootstrap 95% interval that
resamples ``--blocks`` contiguous blocks of rounds, so the machine's drift between
stretches of the run is in it. Each B's verdict (faster, slower, not resolved) and the
crossover are read off those paired intervals
(:func:`~specdec_lib.analysis.replication.crossover`). Stamped with machine, commit and
weights, and checked for load (``--strict`` refuses a busy run). Every per-round timing is
stored (``times``); two runs are compared, row by row and verdict by verdict, by
``benchmarks/compare_runs.py``.
"""

from __future__ import annotations

import statistics

import torch
from run_summaries import paired_rerun_interval

from specdec_lib import (
    NgramDrafter,
    SamplingParams,
    SpeculationStats,
    Tokenizer,
    load_model,
    workload_prompts,
)
from specdec_lib.analysis.intervals import paired_speedup
from specdec_lib.analysis.replication import crossover
from specdec_lib.analysis.timing import interleaved
from specdec_lib.engine.batched import generate_batch, speculative_generate_batch

from harness import SCENARIOS, Benchmark, ints

SMALL = {"batch_sizes": [1, 4], "tokens": 16, "repeats": 4, "blocks": 4, "single": 2}


def benchmark() -> Benchmark:
    """The command line: the harness's options and the sweep's own."""
    options = dict(small=SMALL, threads=True, seed=2026, repeats=8, blocks=True, strict=True)
    bench = Benchmark("batch_sweep", __doc__, **options)
    bench.add("--batch-sizes", type=ints, default=[1, 2, 4, 8, 16, 32, 64, 128, 256])
    bench.add("--single", type=int, default=12, help="requests decoded at B = 1")
    bench.add("--scenarios", type=lambda t: t.split(","), default=list(SCENARIOS), help="a subset")
    bench.add("--tokens", type=int, default=64)
    bench.add("--k", type=int, default=4)
    return bench


def sweep_row(
    w: str, b: int, requests: int, tokens: int, plain: list[float], spec: list[float], blocks, stats
):
    """One (scenario, B) row: throughputs, the paired speed-up and the speculation counts.
    ``requests``: how many requests the timed unit decodes (B, or ``--single`` at B = 1)."""
    n = requests * tokens
    speed = paired_speedup([plain], [spec], blocks=blocks)
    rerun = paired_rerun_interval([plain], [spec], blocks)
    return {
        "workload": w,
        "batch": b,
        "requests": requests,
        "plain_tokens_per_second": n / statistics.median(plain),
        "plain_tps_range": [n / max(plain), n / min(plain)],
        "spec_tokens_per_second": n / statistics.median(spec),
        "spec_tps_range": [n / max(spec), n / min(spec)],
        "speedup": speed.value,
        "speedup_low": speed.low,
        "speedup_high": speed.high,
        "rerun_low": rerun.low,
        "rerun_high": rerun.high,
        "plain_target_passes": tokens,
        "spec_target_passes": stats.target_passes,
        "spec_tokens_per_request_per_pass": stats.emitted / b / stats.target_passes,
        "spec_positions_per_pass": (b + stats.proposed) / stats.target_passes,
        "acceptance_rate": stats.acceptance_rate,
    }


def main(argv: list[str] | None = None) -> None:
    bench = benchmark()
    args = bench.parse(argv)
    tok = Tokenizer()
    target = load_model("target")
    biggest = max(*args.batch_sizes, args.single)
    encoded = {
        w: [tok.encode(p) for p in workload_prompts(w, biggest, args.seed)]
        for w in {w for w, _ in SCENARIOS.values()}
    }
    unknown = set(args.scenarios) - set(SCENARIOS)
    if unknown:
        raise SystemExit(f"--scenarios must name some of {list(SCENARIOS)}, got {sorted(unknown)}")
    prompts = {name: encoded[w] for name, (w, _) in SCENARIOS.items() if name in args.scenarios}
    settings = {
        name: SamplingParams(temperature=t, max_tokens=args.tokens)
        for name, (_, t) in SCENARIOS.items()
        if name in args.scenarios
    }

    def seeded(w: str) -> torch.Generator | None:
        return None if settings[w].greedy else torch.Generator().manual_seed(args.seed)

    def batches(w: str, b: int) -> list[list[list[int]]]:
        """The timed unit's batches: one of B prompts, or ``--single`` batches of one."""
        return [[p] for p in prompts[w][: args.single]] if b == 1 else [prompts[w][:b]]

    def plain(w: str, b: int) -> list[list[int]]:
        gen = seeded(w)
        return [
            o for batch in batches(w, b) for o in generate_batch(target, batch, settings[w], gen)
        ]

    def spec(w: str, b: int, stats: SpeculationStats | None = None) -> list[list[int]]:
        gen = seeded(w)
        return [
            o
            for batch in batches(w, b)
            for o in speculative_generate_batch(
                target, NgramDrafter, batch, settings[w], k=args.k, generator=gen, stats=stats
            )
        ]

    counts = {}
    for w in prompts:
        for b in args.batch_sizes:
            stats = SpeculationStats()
            if spec(w, b, stats) != plain(w, b) and settings[w].greedy:  # also the warm-up
                raise AssertionError(f"batched speculation changed the output ({w}, B={b})")
            counts[w, b] = stats
    print(f"warm-up and checks done in {bench.seconds():.0f} s")

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
        progress=bench.progress(args.repeats),
    )
    load = bench.load(timed)
    rows = []
    for w in prompts:
        for b in args.batch_sizes:
            tp, ts = timed[w, b, "plain"].wall, timed[w, b, "spec"].wall
            n = args.single if b == 1 else b
            rows.append(sweep_row(w, b, n, args.tokens, tp, ts, args.blocks, counts[w, b]))

    result = {
        "stamp": bench.stamp,
        "load": load,
        "interval": (
            "paired bootstrap 95% of plain / speculative median time, resampling blocks of repeats"
        ),
        "threads": args.threads,
        "k": args.k,
        "single": args.single,
        "drafter": NgramDrafter().name,
        "tokens_per_request": args.tokens,
        "repeats": args.repeats,
        "blocks": args.blocks,
        "seed": args.seed,
        "crossover": {w: crossover([r for r in rows if r["workload"] == w]) for w in prompts},
        "seconds": bench.seconds(),
        "rows": rows,
        # every timing (workload -> B -> method -> repeats, in the order they ran)
        "times": {
            w: {
                str(b): {m: timed[w, b, m].wall for m in ("plain", "spec")}
                for b in args.batch_sizes
            }
            for w in prompts
        },
    }
    print_table(result)
    print("all outputs identical")
    bench.save(result)


def print_table(result: dict) -> None:
    m = result["stamp"]
    print(
        f"\n{m['cpu']}, {result['threads']} thread(s), torch {m['torch']}, commit {m['commit']}; "
        f"n-gram k={result['k']}, {result['tokens_per_request']} tokens per request, "
        f"{result['repeats']} repeats in {result['blocks']} blocks [paired bootstrap 95%]"
    )
    print(
        f"{'workload':9} {'B':>3} {'plain tok/s':>11} {'spec tok/s':>10} {'speed-up':>8} "
        f"{'[95%]':>13} {'accepted':>8} {'spec passes':>11}"
    )
    for r in result["rows"]:
        print(
            f"{r['workload']:9} {r['batch']:3d} {r['plain_tokens_per_second']:11.0f} "
            f"{r['spec_tokens_per_second']:10.0f} {r['speedup']:8.2f} "
            f"[{r['speedup_low']:5.2f}, {r['speedup_high']:5.2f}] {r['acceptance_rate']:8.2f} "
            f"{r['spec_target_passes']:11d}"
        )
    for w, c in result["crossover"].items():
        print(f"crossover, {w}: {c['verdict']}")


if __name__ == "__main__":
    main()
