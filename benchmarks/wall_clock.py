"""Wall-clock speed-up of KV-cached speculative decoding over KV-cached plain decoding, with
paired 95% intervals, and the cost model's prediction beside every measurement.

    python benchmarks/wall_clock.py [--prompts 12] [--tokens 64] [--repeats 8] [--blocks 8]
        [--ngram-ks 1,2,3,4,7,8,12,16] [--draft-ks 1,2,3,4,6,8] [--threads 1] [--seed 2026]
        [--strict] [--out specdec_lib/results/wall_clock.json]
    python benchmarks/wall_clock.py --counts-only   # untimed: round logs only
    python benchmarks/wall_clock.py --small --out /tmp/wall.json   # a one-minute check

Batch one, CPU; scenarios "copy", "edit", "answer" and "novel" greedy, "novel T=1"
sampled (seeded per prompt). Every :class:`Method` (plain; each drafter at fixed k, +2/-1
from k = 4, and ``CostAwareK`` from k = 16) decodes the same prompts, one request per timed
unit; greedy outputs must equal plain decoding's or the script stops.

Timing (:func:`~specdec_lib.analysis.timing.interleaved`): a warm-up, then ``--repeats``
rounds each running every (prompt, method) once in a freshly shuffled order, so rounds are
spread over the run. Every comparison is a paired interval
(:func:`~specdec_lib.analysis.intervals.paired_speedup`, prompts and ``--blocks`` blocks of
rounds resampled): each method against plain (rows), each fixed k and adaptive policy
against the best fixed k (``summary``), the n-gram drafter's best against the draft
model's (``ngram_over_draft``); each row's ``rerun_low``/``rerun_high`` is where a rerun
should land (:func:`run_summaries.paired_rerun_interval`). The unit costs
(:func:`measures.measure_unit_costs`, ``unit_costs``) predict each row
from its round logs. Every timing (``times``: scenario -> method -> prompt -> repeats) and
round log (``request_logs``) is stored; ``--counts-only`` writes the fixed-k and +2/-1
round logs to wall_clock_counts.json.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import torch
from measures import measure_unit_costs
from run_summaries import best_fixed_k, drafter_comparison, paired_rerun_interval

from specdec_lib import DraftModelDrafter, NgramDrafter, Tokenizer, load_model, workload_prompts
from specdec_lib.analysis.costs import UnitCosts, predicted_speedup, request_log
from specdec_lib.analysis.intervals import paired_speedup
from specdec_lib.analysis.theory import CostAwareK, estimate_alpha, expected_speedup
from specdec_lib.analysis.timing import interleaved
from specdec_lib.engine.generate import AdaptiveK, SpeculationStats, generate, speculative_generate
from specdec_lib.engine.sampling import SamplingParams

from harness import SCENARIOS, Benchmark, ints

MAX_K, HF_START = 16, 4
ADAPTIVE = {p: {"start": k, "min_k": 1, "max_k": MAX_K} for p, k in (("+2/-1", HF_START),)}
ADAPTIVE["cost-aware"] = {"start": MAX_K, "min_k": 1, "max_k": MAX_K}
SMALL = {"prompts": 3, "tokens": 16, "repeats": 4, "blocks": 4, "ngram_ks": [1, 4], "draft_ks": [2]}


@dataclass(frozen=True)
class Method:
    """One way to decode a request: ``drafter`` is "none" (plain), "ngram" or "draft";
    ``k`` the fixed or first draft length; ``policy`` the adaptive-k policy, if any."""

    name: str
    drafter: str
    k: int | None = None
    policy: object | None = None

    @property
    def adaptive(self) -> bool:
        return self.policy is not None

    def run(self, models, ids, params, seed, stats=None) -> list[int]:
        """One request; a sampled one draws from a generator seeded by ``seed``."""
        gen = None if params.greedy else torch.Generator().manual_seed(seed)
        target, draft = models
        if self.drafter == "none":
            return generate(target, ids, params, gen)
        drafter = NgramDrafter() if self.drafter == "ngram" else DraftModelDrafter(draft)
        options = {"generator": gen, "stats": stats, "adaptive_k": self.policy}
        return speculative_generate(target, drafter, ids, params, k=self.k, **options)


def make_methods(ngram_ks, draft_ks, costs: UnitCosts | None) -> list[Method]:
    """Plain, every fixed k, +2/-1 and (given measured ``costs``) cost-aware, per drafter."""
    out = [Method("plain", "none")]
    for d, ks in (("ngram", ngram_ks), ("draft", draft_ks)):
        out += [Method(f"{d} k={k}", d, k) for k in ks]
        out.append(Method(f"{d} +2/-1", d, HF_START, AdaptiveK(1, MAX_K)))
        if costs is not None:
            c, lookup = (0.0, costs.c_lookup) if d == "ngram" else (costs.c_draft, 0.0)
            policy = CostAwareK(c=c, verify_cost=costs.verify_cost, lookup=lookup, max_k=MAX_K)
            out.append(Method(f"{d} cost-aware", d, MAX_K, policy))
    return out


def scenarios(prompts_of: dict, tokens: int) -> dict[str, tuple[list, SamplingParams]]:
    """Each scenario's prompts and sampling parameters."""
    return {
        w: (prompts_of[src], SamplingParams(temperature=t, max_tokens=tokens))
        for w, (src, t) in SCENARIOS.items()
    }


def decode_all(models, methods, prompts_of, tokens, seed):
    """Every scenario's requests with every method, untimed: greedy outputs checked against
    plain decoding's. Returns, per (scenario, method), one :class:`SpeculationStats` pooling
    all its requests (the engine pools what is passed to every call) with each request's
    round log; and the number of distinct plain continuations per scenario."""
    counted, distinct = {}, {}
    for w, (prompts, params) in scenarios(prompts_of, tokens).items():
        plain = [methods[0].run(models, ids, params, seed + i) for i, ids in enumerate(prompts)]
        distinct[w] = len({tuple(c) for c in plain})
        for m in methods[1:]:
            s, logs = SpeculationStats(), []
            for i, ids in enumerate(prompts):
                before = (len(s.log), s.draft_passes, s.emitted)
                if m.run(models, ids, params, seed + i, s) != plain[i] and params.greedy:
                    raise AssertionError(f"{m.name} changed the output on {w} prompt {i}")
                done = (s.log[before[0] :], s.draft_passes - before[1], s.emitted - before[2])
                logs.append(request_log(*done))
            counted[w, m.name] = s, logs
    return counted, distinct


def run_header(args) -> dict:
    """What both result files record of the settings."""
    return dict(prompts_per_workload=args.prompts, tokens_per_prompt=args.tokens, seed=args.seed)


def write_counts(bench, args, models, prompts_of) -> None:
    """``--counts-only``: the round logs of every method whose counts do not depend on
    measured unit costs (fixed k, +2/-1), untimed, with prompt lengths and continuations."""
    methods = make_methods(args.ngram_ks, args.draft_ks, None)
    counted, distinct = decode_all(models, methods, prompts_of, args.tokens, args.seed)
    out = run_header(args)
    out["scenarios"] = {
        w: {
            "prompt_lengths": [len(p) for p in prompts_of[source]],
            "distinct_prompts": len({tuple(p) for p in prompts_of[source]}),
            "distinct_continuations": distinct[w],
            "requests": {m.name: counted[w, m.name][1] for m in methods[1:]},
        }
        for w, (source, _) in SCENARIOS.items()
    }
    bench.save(out)


def method_row(m: Method, w: str, times, costs: UnitCosts, prompts, args, counted=None) -> dict:
    """A method's row in one scenario: measured speed-up over plain decoding (paired
    interval) and the cost model's prediction; for speculation, ``counted`` = (the pooled
    :class:`SpeculationStats`, the requests' round logs) gives the counts."""
    speed = paired_speedup(times["plain"], times[m.name], seed=args.seed, blocks=args.blocks)
    total = sum(statistics.median(t) for t in times[m.name])
    row = {"workload": w, "method": m.name, "drafter": m.drafter, "k": m.k, "adaptive": m.adaptive}
    row.update(seconds=total, tokens_per_second=args.tokens * len(prompts) / total)
    row.update(speedup=speed.value, speedup_low=speed.low, speedup_high=speed.high)
    rerun = paired_rerun_interval(times["plain"], times[m.name], args.blocks)
    row.update(rerun_low=rerun.low, rerun_high=rerun.high)
    plain = sum(costs.plain_request(len(p), args.tokens) for p in prompts)
    if counted is None:  # plain decoding
        return row | {"predicted_seconds": plain}
    s, logs = counted
    row.update(rounds=s.rounds, emitted=s.emitted, tokens_per_pass=s.tokens_per_pass)
    row.update(alpha=estimate_alpha(s), mean_k=statistics.fmean(r.k for r in s.log))
    row.update(
        mean_proposal_length=s.proposed / s.rounds,
        rounds_without_proposal=sum(1 for r in s.log if not r.proposed),
        acceptance_per_position=s.acceptance_per_position,
    )
    lengths = [len(p) for p in prompts]
    row["predicted_speedup"] = predicted_speedup(costs, lengths, args.tokens, logs, m.drafter)
    row["predicted_seconds"] = plain / row["predicted_speedup"]
    if not m.adaptive and s.proposed > 0:  # α is defined once anything was proposed
        c, lookup = (0.0, costs.c_lookup) if m.drafter == "ngram" else (costs.c_draft, 0.0)
        verify = costs.verify_cost(m.k)
        row["textbook_speedup"] = expected_speedup(row["alpha"], m.k, c, verify, lookup)
    return row


def summarise(result: dict) -> dict:
    """Best fixed k per scenario and drafter, by paired intervals
    (:func:`run_summaries.best_fixed_k`), and the course's goals."""
    out = best_fixed_k(result["rows"], result["times"], result["blocks"])
    k7 = [r for r in result["rows"] if r["method"] == "ngram k=7" and r["workload"] == "copy"]
    novel = [
        max(out[f"{w} {d}"]["speedup"] for d in ("ngram", "draft")) for w in ("novel", "novel T=1")
    ]
    shares = [v["cost-aware"]["share_of_best"] for v in out.values() if "cost-aware" in v]
    out["goals"] = {
        "copy n-gram k=7 >= 6x plain greedy": bool(k7) and k7[0]["speedup"] >= 6.0,
        "novel (greedy and T=1): the better drafter's best fixed k >= 1.0x": min(novel) >= 1.0,
        "cost-aware adaptive k within 10% of best fixed k, every workload and drafter": (
            min(shares, default=0.0) >= 0.9
        ),
    }
    return out


def print_tables(result: dict) -> None:
    s = result["stamp"]
    print(f"\n{s['cpu']}, commit {s['commit']}, {result['repeats']} repeats [paired 95%]")
    for r in result["rows"]:
        interval = f"{r['speedup']:6.2f} [{r['speedup_low']:5.2f}, {r['speedup_high']:5.2f}]"
        model = f"model {r['predicted_speedup']:5.2f}" if "predicted_speedup" in r else ""
        print(f"{r['workload']:9} {r['method']:16} {interval} {model}")
    for key, v in result["summary"].items():
        print(key, v if key == "goals" else (v["best_k"], v["ks_not_resolved_from_best"]))
    for w, e in result["ngram_over_draft"].items():
        print(f"{w}: n-gram over draft model {e['value']:.2f} [{e['low']:.2f}, {e['high']:.2f}]")


def benchmark() -> Benchmark:
    """The command line: the harness's options and the benchmark's own."""
    options = dict(small=SMALL, threads=True, seed=2026, repeats=8, blocks=True, strict=True)
    bench = Benchmark("wall_clock", __doc__, **options)
    bench.add("--prompts", type=int, default=12)
    bench.add("--tokens", type=int, default=64)
    bench.add("--ngram-ks", type=ints, default=[1, 2, 3, 4, 7, 8, 12, 16])
    bench.add("--draft-ks", type=ints, default=[1, 2, 3, 4, 6, 8])
    bench.add("--counts-only", action="store_true", help="time nothing: write round logs")
    return bench


def parse(bench: Benchmark, argv=None):
    """The options, checked; ``--counts-only`` writes wall_clock_counts.json by default."""
    args = bench.parse(argv, out=lambda a: "wall_clock_counts" if a.counts_only else "wall_clock")
    if any(not 1 <= k <= MAX_K for k in args.ngram_ks + args.draft_ks):
        bench.error(f"--ngram-ks and --draft-ks must lie in [1, {MAX_K}]")
    return args


def main(argv=None) -> None:
    bench = benchmark()
    args, tok = parse(bench, argv), Tokenizer()
    models = load_model("target"), load_model("draft")
    prompts_of = {
        w: [tok.encode(p) for p in workload_prompts(w, args.prompts, args.seed)]
        for w in {w for w, _ in SCENARIOS.values()}
    }
    if args.counts_only:
        return write_counts(bench, args, models, prompts_of)
    both = prompts_of["copy"] + prompts_of["novel"]
    costs, extra_units = measure_unit_costs(*models, both, args.tokens, max_k=MAX_K)
    methods = make_methods(args.ngram_ks, args.draft_ks, costs)
    print(f"unit costs measured ({bench.seconds():.0f} s)", flush=True)
    counted, distinct = decode_all(models, methods, prompts_of, args.tokens, args.seed)
    print(f"outputs checked, counts taken ({bench.seconds():.0f} s)", flush=True)
    inputs = scenarios(prompts_of, args.tokens)
    prompts = {w: p for w, (p, _) in inputs.items()}

    def job(w: str, i: int, m: Method):
        return lambda: m.run(models, inputs[w][0][i], inputs[w][1], args.seed + i)

    every = [(w, i, m) for w in SCENARIOS for i in range(args.prompts) for m in methods]
    jobs = {(w, i, m.name): job(w, i, m) for w, i, m in every}
    timed = interleaved(jobs, args.repeats, args.seed, progress=bench.progress(args.repeats))
    load = bench.load(timed)
    times = {
        w: {m.name: [timed[w, i, m.name].wall for i in range(args.prompts)] for m in methods}
        for w in SCENARIOS
    }
    rows = [
        method_row(m, w, times[w], costs, prompts[w], args, counted.get((w, m.name)))
        for w in SCENARIOS
        for m in methods
    ]
    result = run_header(args) | {"stamp": bench.stamp, "load": load, "repeats": args.repeats}
    result.update(blocks=args.blocks, threads=args.threads, adaptive=ADAPTIVE, rows=rows)
    result["interval"] = "paired bootstrap 95%, prompts and blocks of repeats resampled together"
    result["unit_costs"] = costs.to_result(MAX_K) | extra_units
    result.update(times=times, distinct_continuations=distinct)
    result["seconds"] = bench.seconds()
    logs = {w: {m.name: counted[w, m.name][1] for m in methods[1:]} for w in SCENARIOS}
    result["request_logs"] = logs
    result["summary"] = summarise(result)
    result["ngram_over_draft"] = drafter_comparison(result["summary"], times, args.blocks)
    print_tables(result)
    print("greedy outputs identical to plain decoding")
    bench.save(result)


if __name__ == "__main__":
    main()
