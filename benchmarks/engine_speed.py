"""Greedy copy at k = 7, batch one: speculative decoding against plain decoding, by wall
clock, the host's own work per round (time outside the target's forward passes), and
the passes' own times: a prefill, a plain step, a round's pass of k + 1 positions, and
the speed-up the passes alone allow (the bound no host-side work can beat), and the
speed-up no round could beat on this core (``peak_bound``: extra positions at the
arithmetic peak of a matrix product, host work free).

    OMP_NUM_THREADS=1 python benchmarks/engine_speed.py [--prompts 12] [--repeats 15] [--out F]
    PYTHONPATH=/path/to/other/checkout python benchmarks/engine_speed.py   # another engine

It calls only the engine's public API and :func:`specdec_lib.analysis.timing.interleaved`
and ``time_inside`` (both present, with these signatures, in earlier versions of the
library too), so the same script measures the engine before and after a change: point
``PYTHONPATH`` at the other checkout. (Its harness, ``benchmarks/harness.py``, imports a
few more library names, ``analysis.results.RESULTS_DIR`` among them, so the other
checkout must be one from 2026-12-07 or later; for an older one, run that checkout's own
copy of this script.) It prints the result and writes it to ``--out`` (default
specdec_lib/results/engine_speed.json); the speed-up is the total over prompts of each
prompt's median time, plain / speculative, with a bootstrap 95% interval over prompts and
repeats. That bootstrap is computed here, the same way as
:func:`specdec_lib.analysis.intervals.paired_speedup` with one block per repeat, because
older checkouts' ``paired_speedup`` took other arguments.
"""

from __future__ import annotations

import random
import statistics
import time

import torch

import specdec_lib
from specdec_lib import NgramDrafter, SamplingParams, SpeculationStats, Tokenizer, load_model
from specdec_lib.analysis.timing import interleaved, time_inside
from specdec_lib.engine.generate import generate, speculative_generate
from specdec_lib.text.language import workload_prompts

from harness import Benchmark


def _speedup(base: list[list[float]], spec: list[list[float]], seed: int) -> dict[str, float]:
    def ratio(prompts: list[int], reps: list[int]) -> float:
        b = sum(statistics.median(base[p][r] for r in reps) for p in prompts)
        return b / sum(statistics.median(spec[p][r] for r in reps) for p in prompts)

    n_p, n_r = len(base), len(base[0])
    rng = random.Random(seed)
    boot = sorted(
        ratio([rng.randrange(n_p) for _ in range(n_p)], [rng.randrange(n_r) for _ in range(n_r)])
        for _ in range(2000)
    )
    return {
        "speedup": ratio(list(range(n_p)), list(range(n_r))),
        "low": boot[49],
        "high": boot[1949],
    }


def _peak_bound(target, pass_ms: dict[str, float], args, rounds: float) -> dict[str, float]:
    """The most any round could give here: plain decoding's passes as measured; each of
    speculation's passes a plain step's cost plus k positions at this core's peak in a
    matrix product (2 FLOP per weight per position, attention not counted), host work free."""
    a, b = torch.randn(512, 1024), torch.randn(1024, 1024)
    times = []
    for _ in range(21):
        start = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - start)
    peak = 2 * 512 * 1024 * 1024 / min(times[3:])  # FLOP/s, the fastest product
    position_ms = 1e3 * 2 * target.num_parameters() / peak
    prefill, step = pass_ms["prefill"], pass_ms["plain step"]
    plain = prefill + (args.tokens - 1) * step
    spec = prefill + args.k * position_ms + (rounds - 1) * (step + args.k * position_ms)
    return {
        "peak_gflops": peak / 1e9,
        "ms_per_position_at_peak": position_ms,
        "ms_per_extra_position_measured": (pass_ms["round"] - step) / args.k,
        "speedup_at_most": plain / spec,
    }


def main(argv=None) -> None:
    small = {"prompts": 2, "repeats": 2, "tokens": 16}
    bench = Benchmark("engine_speed", __doc__, small=small, seed=2026)
    bench.add("--prompts", type=int, default=12)
    bench.add("--repeats", type=int, default=15)
    bench.add("--tokens", type=int, default=64)
    bench.add("--k", type=int, default=7)
    args = bench.parse(argv)  # the stamp: the machine, the commit, the load before the run
    target, tok = load_model("target"), Tokenizer()
    prompts = [tok.encode(p) for p in workload_prompts("copy", args.prompts, args.seed)]
    params = SamplingParams(temperature=0.0, max_tokens=args.tokens)
    drafter = NgramDrafter()

    def plain(i: int) -> list[int]:
        return generate(target, prompts[i], params)

    def spec(i: int, stats: SpeculationStats | None = None) -> list[int]:
        return speculative_generate(target, drafter, prompts[i], params, k=args.k, stats=stats)

    host_plain, host_spec, rounds = [], [], 0
    inside_plain, inside_spec = [], []  # seconds in the target's passes, per generation
    passes: dict[str, list[float]] = {"prefill": [], "plain step": [], "round": []}
    for i in range(len(prompts)):
        stats = SpeculationStats()
        assert spec(i, stats) == plain(i), "greedy speculation must return plain greedy output"
        rounds += stats.rounds
        calls: list[tuple[int, float]] = []
        wall, inside = time_inside([target], lambda i=i: plain(i), calls)
        host_plain.append((wall - inside) / args.tokens)
        inside_plain.append(inside)
        passes["prefill"].append(calls[0][1])
        passes["plain step"] += [t for _, t in calls[1:]]
        calls = []
        wall, inside = time_inside([target], lambda i=i: spec(i), calls)
        host_spec.append((wall - inside) / stats.rounds)
        inside_spec.append(inside)
        passes["round"] += [t for _, t in calls[1:]]  # the first round is also the prefill
    jobs = {}
    for i in range(len(prompts)):
        jobs[("plain", i)] = lambda i=i: plain(i)
        jobs[("spec", i)] = lambda i=i: spec(i)
    timed = interleaved(jobs, args.repeats, args.seed)
    base = [list(timed[("plain", i)][0]) for i in range(len(prompts))]
    fast = [list(timed[("spec", i)][0]) for i in range(len(prompts))]
    result = {
        "library": specdec_lib.__file__,
        "workload": "copy",
        "k": args.k,
        "drafter": drafter.name,
        "prompts": len(prompts),
        "repeats": args.repeats,
        "tokens": args.tokens,
        "tokens_per_pass": len(prompts) * args.tokens / rounds,
        "plain_ms_per_token": 1e3
        * sum(statistics.median(t) for t in base)
        / (len(prompts) * args.tokens),
        "host_us_per_plain_step": 1e6 * statistics.median(host_plain),
        "host_us_per_round": 1e6 * statistics.median(host_spec),
        # The passes alone: median ms of each kind, and the speed-up if host work were free
        # (time in plain decoding's passes over time in speculation's, summed over prompts).
        "pass_ms": {kind: 1e3 * statistics.median(t) for kind, t in passes.items()},
        "passes_only_speedup": sum(inside_plain) / sum(inside_spec),
    }
    result.update(_speedup(base, fast, args.seed))
    result["peak_bound"] = _peak_bound(target, result["pass_ms"], args, rounds / len(prompts))
    print({k: v for k, v in result.items() if k != "library"})
    bench.save(result)


if __name__ == "__main__":
    main()
