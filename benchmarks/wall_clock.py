"""Wall-clock speed-up of KV-cached speculative decoding over KV-cached plain greedy decoding.

    python benchmarks/wall_clock.py [--prompts 4] [--tokens 64] [--repeats 5] [--threads 1]
        [--ngram-ks 1,2,4,8,12,16] [--draft-ks 1,2,4] [--seed 2026]

Batch one, CPU, greedy, both workloads. Every method decodes the same prompts;
one timed unit is one request (prefill plus ``--tokens`` new tokens), and each
method's output must equal plain greedy decoding's or the script stops.

Honest timing: one untimed warm-up run of every method on every prompt first;
then ``--repeats`` rounds, each timing every (prompt, method) pair once in a
freshly shuffled order, so slow phases of a shared machine hit all methods alike.
A method's time for a repeat is its total over the prompts; reported are the
median over repeats and the range, and the speed-up as the median (and range) of
the per-repeat ratios plain / method, which are paired and so robust to drift.
The process's CPU time is recorded beside the wall time: on a machine shared
with other work (where a process can be descheduled mid-run) it is the steadier
of the two; on a quiet machine with one thread they agree.

PyTorch runs on ``--threads`` threads (default 1): TinyGPT's matrices are too
small for threading to pay, and one thread makes the measurement less sensitive
to other work on the machine.

Besides timings the script records, untimed, each method's speculation counts
(tokens per pass, fitted α, acceptance per draft position) and the cost ratios
the theory needs: c (a draft-model pass, or an n-gram proposal, in target
passes) and the cost of a (k+1)-position verification pass in target passes.
Writes benchmarks/results/wall_clock.json and prints tables.
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
    DraftModelDrafter,
    NgramDrafter,
    SamplingParams,
    SpeculationStats,
    Tokenizer,
    generate,
    load_model,
    speculative_generate,
    workload_prompts,
)
from specdec_lib.analysis.costs import fit_pass_cost
from specdec_lib.analysis.theory import (
    conditional_acceptance,
    estimate_alpha,
    expected_speedup,
    expected_tokens_per_pass,
    expected_tokens_per_pass_given_lengths,
)
from specdec_lib.analysis.timing import machine_stamp, time_median, time_passes
from specdec_lib.engine.generate import AdaptiveK

OUT = Path(__file__).parent / "results" / "wall_clock.json"
ADAPTIVE = AdaptiveK(min_k=1, max_k=16)
ADAPTIVE_START = 4


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def make_methods(target, draft, ngram_ks, draft_ks) -> dict[str, dict]:
    """name -> how to run it (drafter factory, k, adaptive policy)."""
    methods: dict[str, dict] = {"plain": {"drafter": None}}
    for k in ngram_ks:
        methods[f"ngram k={k}"] = {"drafter": "ngram", "make": NgramDrafter, "k": k}
    methods["ngram adaptive"] = {
        "drafter": "ngram",
        "make": NgramDrafter,
        "k": ADAPTIVE_START,
        "adaptive": ADAPTIVE,
    }
    for k in draft_ks:
        methods[f"draft k={k}"] = {
            "drafter": "draft",
            "make": lambda: DraftModelDrafter(draft),
            "k": k,
        }
    methods["draft adaptive"] = {
        "drafter": "draft",
        "make": lambda: DraftModelDrafter(draft),
        "k": ADAPTIVE_START,
        "adaptive": ADAPTIVE,
    }
    return methods


def run(target, method: dict, ids: list[int], params, stats=None) -> list[int]:
    if method["drafter"] is None:
        return generate(target, ids, params)
    return speculative_generate(
        target,
        method["make"](),
        ids,
        params,
        k=method["k"],
        stats=stats,
        adaptive_k=method.get("adaptive"),
    )


def cost_ratios(target, draft, prompt: list[int], ks: list[int], repeats: int) -> dict:
    """Median cost of one draft pass, one n-gram proposal and one (k+1)-position
    verification pass, each in single-position target passes, at this prompt's length."""

    def pass_time(model, n_new: int) -> float:
        cache = model.new_cache(1)
        with torch.inference_mode():
            model(torch.tensor([prompt]), cache)
            x = torch.tensor([prompt[-n_new:]])

            def step():
                cache.crop(len(prompt))
                model(x, cache)

            return time_median(step, repeats=repeats, warmup=5).median

    one = pass_time(target, 1)
    ngram = NgramDrafter()
    # a proposal after the prompt: the drafter's per-round cost
    t_ngram = time_median(lambda: ngram.propose(prompt, 8), repeats=repeats, warmup=5).median
    # Verification passes of every size, interleaved (time_passes), then read off the robust
    # line through them: one noisy size cannot make v_k fall as k grows.
    sizes = sorted({1} | {k + 1 for k in ks})
    fit = fit_pass_cost(time_passes(target, sizes, len(prompt), repeats=10 * repeats))
    return {
        "target_pass_ms": 1e3 * one,
        "c_draft": pass_time(draft, 1) / one,
        "c_ngram": t_ngram / one,
        "verify_cost": {str(k): fit.ratio(k + 1) for k in ks},
    }


def summarise(stats: SpeculationStats, k: int) -> dict:
    alpha = estimate_alpha(stats)
    lengths = [len(r.proposed) for r in stats.log]
    return {
        "rounds": stats.rounds,
        "target_passes": stats.target_passes,
        "emitted": stats.emitted,
        "tokens_per_pass": stats.tokens_per_pass,
        "acceptance_rate": stats.acceptance_rate,
        "alpha": alpha,
        "E_theory_full_k": expected_tokens_per_pass(alpha, k) if alpha == alpha else None,
        "E_theory_given_lengths": (
            expected_tokens_per_pass_given_lengths(alpha, lengths) if alpha == alpha else None
        ),
        "rounds_without_proposal": sum(1 for m in lengths if m == 0),
        "mean_proposal_length": statistics.fmean(lengths),
        "acceptance_per_position": stats.acceptance_per_position,
        "conditional_acceptance": conditional_acceptance(stats),
        "mean_k": statistics.fmean(r.k for r in stats.log),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=4, help="prompts per workload")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--ngram-ks", type=_ints, default=[1, 2, 4, 8, 12, 16])
    parser.add_argument("--draft-ks", type=_ints, default=[1, 2, 4])
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    tok = Tokenizer()
    target, draft = load_model("target"), load_model("draft")
    params = SamplingParams(max_tokens=args.tokens)
    methods = make_methods(target, draft, args.ngram_ks, args.draft_ks)
    workloads = {
        w: [tok.encode(p) for p in workload_prompts(w, args.prompts, args.seed)]
        for w in ("copy", "novel")
    }
    start = time.perf_counter()

    # Reference outputs, counts (untimed) and warm-up: every method on every prompt once.
    reference: dict[tuple[str, int], list[int]] = {}
    counts: dict[tuple[str, str], dict] = {}
    for w, prompts in workloads.items():
        for i, ids in enumerate(prompts):
            reference[w, i] = generate(target, ids, params)
        for name, method in methods.items():
            if method["drafter"] is None:
                continue
            stats = SpeculationStats()
            for i, ids in enumerate(prompts):
                out = run(target, method, ids, params, stats)
                if out != reference[w, i]:
                    raise AssertionError(f"{name} changed the output on {w} prompt {i}")
            counts[w, name] = summarise(stats, method["k"])
    print(f"warm-up and counts done in {time.perf_counter() - start:.0f} s")

    rng = random.Random(args.seed)
    times: dict[tuple[str, str], list[float]] = {
        (w, name): [0.0] * args.repeats for w in workloads for name in methods
    }
    cpu: dict[tuple[str, str], list[float]] = {key: [0.0] * args.repeats for key in times}
    for r in range(args.repeats):
        jobs = [(w, i, name) for w in workloads for i in range(args.prompts) for name in methods]
        rng.shuffle(jobs)
        for w, i, name in jobs:
            t0, c0 = time.perf_counter(), time.process_time()
            out = run(target, methods[name], workloads[w][i], params)
            times[w, name][r] += time.perf_counter() - t0
            cpu[w, name][r] += time.process_time() - c0
            if out != reference[w, i]:
                raise AssertionError(f"{name} changed the output on {w} prompt {i}")
        print(f"repeat {r + 1}/{args.repeats} done ({time.perf_counter() - start:.0f} s)")

    all_ks = sorted({m["k"] for m in methods.values() if m["drafter"]} | set(args.ngram_ks))
    ratios = cost_ratios(target, draft, workloads["copy"][0], all_ks, repeats=51)

    rows = []
    for w in workloads:
        plain = times[w, "plain"]
        n_tokens = args.tokens * args.prompts
        for name, method in methods.items():
            t = times[w, name]
            speedups = [p / m for p, m in zip(plain, t, strict=True)]
            cpu_speedups = [p / m for p, m in zip(cpu[w, "plain"], cpu[w, name], strict=True)]
            row = {
                "workload": w,
                "method": name,
                "drafter": method["drafter"] or "none",
                "k": method.get("k"),
                "adaptive": "adaptive" in method,
                "seconds_median": statistics.median(t),
                "seconds_low": min(t),
                "seconds_high": max(t),
                "tokens_per_second": n_tokens / statistics.median(t),
                "speedup_median": statistics.median(speedups),
                "speedup_low": min(speedups),
                "speedup_high": max(speedups),
                "cpu_seconds_median": statistics.median(cpu[w, name]),
                "cpu_speedup_median": statistics.median(cpu_speedups),
                "cpu_speedup_low": min(cpu_speedups),
                "cpu_speedup_high": max(cpu_speedups),
            }
            if method["drafter"] is not None:
                row.update(counts[w, name])
                # A draft pass per drafted token; one n-gram lookup per round.
                draft = method["drafter"] == "draft"
                c = ratios["c_draft"] if draft else 0.0
                lookup = 0.0 if draft else ratios["c_ngram"]
                if not row["adaptive"] and row["alpha"] == row["alpha"]:
                    k = method["k"]
                    verify = ratios["verify_cost"][str(k)]
                    row["speedup_theory"] = expected_speedup(row["alpha"], k, c, verify, lookup)
                    row["speedup_theory_given_lengths"] = row["E_theory_given_lengths"] / (
                        k * c + lookup + verify
                    )
            rows.append(row)

    result = {
        "machine": machine_stamp(),
        "command": "python benchmarks/wall_clock.py "
        + " ".join(
            f"--{k.replace('_', '-')} {','.join(map(str, v)) if isinstance(v, list) else v}"
            for k, v in vars(args).items()
            if k != "out"
        ),
        "prompts_per_workload": args.prompts,
        "tokens_per_prompt": args.tokens,
        "repeats": args.repeats,
        "seed": args.seed,
        "adaptive_k": {
            "start": ADAPTIVE_START,
            "min_k": ADAPTIVE.min_k,
            "max_k": ADAPTIVE.max_k,
            "grow": ADAPTIVE.grow,
            "shrink": ADAPTIVE.shrink,
        },
        "cost_ratios": ratios,
        "seconds": round(time.perf_counter() - start, 1),
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print_tables(result)
    print(
        f"all outputs identical to plain greedy decoding; {result['seconds']} s; wrote {args.out}"
    )


def print_tables(result: dict) -> None:
    m = result["machine"]
    print(
        f"\n{m['cpu']}, {m['torch_threads']} thread(s), torch {m['torch']}, "
        f"{result['prompts_per_workload']} prompts x {result['tokens_per_prompt']} tokens, "
        f"median of {result['repeats']} repeats [range]"
    )
    print(
        f"c (draft model) = {result['cost_ratios']['c_draft']:.3f}, "
        f"c (n-gram) = {result['cost_ratios']['c_ngram']:.3f} target passes"
    )
    print(
        f"{'workload':8} {'method':15} {'tok/s':>7} {'speed-up':>8} {'[range]':>13} {'cpu s-u':>7} "
        f"{'tok/pass':>8} {'alpha':>6} {'E(a,k)':>6} {'theory S':>8}"
    )
    for r in result["rows"]:
        extra = ""
        if r["drafter"] != "none":
            theory = r.get("speedup_theory")
            extra = (
                f"{r['tokens_per_pass']:8.2f} {r['alpha']:6.3f} "
                f"{(r['E_theory_full_k'] or float('nan')):6.2f} "
                f"{theory if theory is not None else float('nan'):8.2f}"
            )
        print(
            f"{r['workload']:8} {r['method']:15} {r['tokens_per_second']:7.0f} "
            f"{r['speedup_median']:8.2f} [{r['speedup_low']:5.2f}, {r['speedup_high']:5.2f}] "
            f"{r['cpu_speedup_median']:7.2f} {extra}"
        )
    for w in ("copy", "novel"):
        for d in ("ngram", "draft"):
            fixed = [
                r
                for r in result["rows"]
                if r["workload"] == w and r["drafter"] == d and not r["adaptive"]
            ]
            best = max(fixed, key=lambda r: r["speedup_median"])
            print(
                f"best fixed k, {w}, {d}: k={best['k']} speed-up {best['speedup_median']:.2f} "
                f"[{best['speedup_low']:.2f}, {best['speedup_high']:.2f}]"
            )


if __name__ == "__main__":
    main()
