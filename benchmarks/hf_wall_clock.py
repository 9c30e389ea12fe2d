"""Wall clock, side by side: the course's engine against Hugging Face transformers on the
same weights, plain greedy decoding and greedy prompt lookup at the same k.

    python benchmarks/hf_wall_clock.py [--prompts 6] [--tokens 64] [--k 7] [--repeats 20]
        [--blocks 5] [--threads 1] [--seed 1121] [--strict]
        [--out specdec_lib/results/hf_wall_clock.json]
    python benchmarks/hf_wall_clock.py --small --out /tmp/hf_wall_clock.json   # a quick check

The four jobs of :func:`~specdec_lib.experiments.hf_profile.side_by_side_jobs`: the course's
plain greedy decoding, transformers' (``LlamaForCausalLM.generate`` on the exported
target), the course's greedy speculation at ``--k`` with transformers' own n-gram rule
(:class:`~specdec_lib.experiments.hf_compare.LeftmostNgramDrafter`), and transformers' prompt
lookup (``prompt_lookup_num_tokens=k``). The course's engine runs transformers' rule so
that both sides make the same target passes, prompt by prompt: what is compared is the
engines, not the drafting rules. Every job must return plain greedy decoding's tokens and
the pairs must make the same passes (counted by a hook on each model), or the script stops.

Prompts: ``--prompts`` of each workload, ``"copy"`` (the target quotes its prompt, so lookup
pays) and ``"novel"`` (it does not), from chapter 11's seed, so the chapter's prompts come
first. Timing (:func:`~specdec_lib.analysis.timing.interleaved`, the course's one timing
loop), one thread: a warm-up of every (job, prompt), then ``--repeats`` rounds, each
running every (job, prompt) once in a freshly shuffled order. The ratios are how many times
as fast the course ran as transformers (transformers' time / the course's), plain against
plain and speculative against prompt lookup, per workload and over both, each with its
paired bootstrap 95% interval (:func:`~specdec_lib.analysis.intervals.paired_speedup`,
prompts and ``--blocks`` blocks of rounds resampled) and the interval a rerun should land
in (:func:`run_summaries.paired_rerun_interval`). Every wall and CPU time
per repeat is stored (``times``, ``cpu_times``: job -> prompt -> repeats, prompts in the
order of ``prompts``), with the machine, code and load
(:mod:`~specdec_lib.analysis.provenance`); ``--strict`` refuses to write from a busy
machine. The full run takes about two minutes on an idle core.
"""

from __future__ import annotations

import statistics
import tempfile

import transformers
from run_summaries import paired_rerun_interval

from specdec_lib import Tokenizer, load_model, workload_prompts
from specdec_lib.analysis.intervals import paired_speedup
from specdec_lib.analysis.timing import interleaved
from specdec_lib.experiments.hf_compare import ForwardCounter, export_hf, load_hf
from specdec_lib.experiments.hf_profile import JOBS, side_by_side_jobs

from harness import Benchmark
from harness import interval as _interval

WORKLOADS = ("copy", "novel")
PAIRS = {  # ratio name: (transformers' job, the course's job)
    "plain": ("transformers plain", "course plain"),
    "speculative": ("transformers prompt lookup", "course speculative"),
}
SETTINGS = ("prompts", "tokens", "k", "repeats", "blocks", "threads", "seed")
SMALL = {"prompts": 1, "tokens": 16, "repeats": 4, "blocks": 2}


def estimate(e) -> dict[str, float]:
    return _interval(e, digits=None, level=True)


def checked_passes(jobs) -> dict[str, int]:
    """Run every job once: all must return the same tokens, and each pair the same target
    passes (a hook on the model counts them). Returns the passes of each job."""
    outputs, passes = {}, {}
    for name, job in jobs.items():
        with ForwardCounter(job.model) as counter:
            outputs[name] = job.run()
        passes[name] = counter.calls
    if len({tuple(out) for out in outputs.values()}) != 1:
        raise SystemExit(f"the four jobs returned different tokens: {outputs}")
    for theirs, ours in PAIRS.values():
        if passes[theirs] != passes[ours]:
            raise SystemExit(f"{theirs} made {passes[theirs]} passes, {ours} {passes[ours]}")
    return passes


def ratios(times: dict[str, list[list[float]]], rows: list[int], blocks: int) -> dict:
    """Transformers' time / the course's, over the prompts ``rows``, for each pair."""
    out = {}
    for key, (theirs, ours) in PAIRS.items():
        base, method = [times[theirs][i] for i in rows], [times[ours][i] for i in rows]
        out[key] = estimate(paired_speedup(base, method, blocks=blocks)) | {
            "rerun": estimate(paired_rerun_interval(base, method, blocks=blocks))
        }
    return out


def benchmark() -> Benchmark:
    """The command line: the harness's options and the comparison's own."""
    options = dict(small=SMALL, threads=True, seed=1121, repeats=20, strict=True)
    bench = Benchmark("hf_wall_clock", __doc__, **options)
    for name, default in {"prompts": 6, "tokens": 64, "k": 7, "blocks": 5}.items():
        bench.add(f"--{name}", type=int, default=default)
    return bench


def parse(bench: Benchmark, argv=None):
    """The options, checked."""
    args = bench.parse(argv)
    for name in ("prompts", "tokens", "k", "repeats", "threads"):
        if getattr(args, name) < 1:
            bench.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    return args


def main(argv=None) -> None:
    bench = benchmark()
    args, tok = parse(bench, argv), Tokenizer()
    target = load_model("target")
    with tempfile.TemporaryDirectory() as folder:
        hf = load_hf(export_hf(target, folder))
    prompts = {
        w: [tok.encode(p) for p in workload_prompts(w, args.prompts, args.seed)] for w in WORKLOADS
    }
    order = [(w, i) for w in WORKLOADS for i in range(args.prompts)]  # the prompts' rows
    passes = {w: dict.fromkeys(JOBS, 0) for w in WORKLOADS}
    jobs = {}
    for row, (w, i) in enumerate(order):
        side = side_by_side_jobs(target, hf, prompts[w][i], args.tokens, args.k)
        for name, count in checked_passes(side).items():
            passes[w][name] += count
        jobs.update({(name, row): job.run for name, job in side.items()})
    print(f"outputs and passes checked ({bench.seconds():.0f} s)", flush=True)
    timed = interleaved(jobs, args.repeats, args.seed, progress=bench.progress(args.repeats))
    load = bench.load(timed)
    rows = range(len(order))
    times = {name: [timed[name, r].wall for r in rows] for name in JOBS}
    cpu_times = {name: [timed[name, r].cpu for r in rows] for name in JOBS}
    by_workload = {w: [r for r, (v, _) in enumerate(order) if v == w] for w in WORKLOADS}
    result = {
        "what": "course's engine against transformers, same weights: transformers' time / the "
        "course's (>1: the course ran faster), plain vs plain and course speculation with "
        "transformers' n-gram rule vs transformers' prompt lookup, same k",
        "settings": {n: getattr(args, n) for n in SETTINGS} | {"small": args.small},
        "interval": "paired bootstrap 95%, prompts and blocks of repeats resampled together",
        "transformers": transformers.__version__,
        "load": load,
        "prompts": {w: [tok.decode(p) for p in prompts[w]] for w in WORKLOADS},
        "passes": passes,
        "tokens_per_pass": {
            w: {name: args.tokens * args.prompts / n for name, n in passes[w].items()}
            for w in WORKLOADS
        },
        "median_seconds": {
            w: {name: [statistics.median(times[name][r]) for r in by_workload[w]] for name in JOBS}
            for w in WORKLOADS
        },
        "ratios": {w: ratios(times, by_workload[w], args.blocks) for w in WORKLOADS}
        | {"both": ratios(times, list(rows), args.blocks)},
        "times": times,
        "cpu_times": cpu_times,
    }
    for w, pair in result["ratios"].items():
        for key, e in pair.items():
            print(
                f"{w:5} {key:11}: the course {e['value']:.2f}x as fast "
                f"[{e['low']:.2f}, {e['high']:.2f}]"
            )
    print("outputs identical, passes equal in each pair")
    bench.save(result)


if __name__ == "__main__":
    main()
