"""Where the time goes, stored: chapter 11's profile of the course's engine against
Hugging Face transformers, one greedy generation per job, profiled part by part.

    python benchmarks/hf_profile.py [--tokens 64] [--k 7] [--plain-repeats 20]
        [--spec-repeats 60] [--threads 1] [--seed 1121] [--strict]
        [--out specdec_lib/results/hf_profile.json]
    python benchmarks/hf_profile.py --out specdec_lib/results/hf_profile_rerun.json

The chapter's own profile, with more repeats: the four jobs of
:func:`~specdec_lib.experiments.hf_profile.side_by_side_jobs` on the first ``"copy"``
prompt of chapter 11's seed (the course's plain greedy decoding and transformers', the
course's speculation at ``--k`` with transformers' n-gram rule and transformers' prompt
lookup), profiled by :func:`~specdec_lib.experiments.hf_profile.profile_jobs` (the
library's one implementation): the plain pair ``--plain-repeats`` times, the
speculative pair ``--spec-repeats`` times, each profiled run taking turns with an
unprofiled run of every job. Every job must return plain greedy decoding's tokens.

Stored per job: the :class:`~specdec_lib.experiments.hf_profile.Profile` as a dict (the
fastest time of each part over the repeats, every repeat's parts, the unprofiled times,
the operator and Python-call counts), with the machine, code and load
(:mod:`~specdec_lib.analysis.provenance`). The load check covers the whole run as one
job (its CPU time against its wall time, and the load average at the end); ``--strict``
refuses to write from a busy machine. Run it twice, on a quiet machine: the chapter
claims only what both runs show. About a minute and a half on an idle core.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time

import transformers

from specdec_lib import Tokenizer, generate, load_model, workload_prompts
from specdec_lib.engine.sampling import SamplingParams
from specdec_lib.experiments.hf_compare import export_hf, load_hf
from specdec_lib.experiments.hf_profile import JOBS, profile_jobs, side_by_side_jobs

from harness import Benchmark

SETTINGS = ("tokens", "k", "plain_repeats", "spec_repeats", "threads", "seed")


def parse(argv=None) -> tuple[Benchmark, argparse.Namespace]:
    """The command line, checked: the harness's options and the profile's own."""
    small = {"tokens": 16, "plain_repeats": 2, "spec_repeats": 2}
    bench = Benchmark("hf_profile", __doc__, small=small, threads=True, seed=1121, strict=True)
    for name, default in {"tokens": 64, "k": 7, "plain-repeats": 20, "spec-repeats": 60}.items():
        bench.add(f"--{name}", type=int, default=default)
    args = bench.parse(argv)
    for name in ("tokens", "k", "plain_repeats", "spec_repeats", "threads"):
        if getattr(args, name) < 1:
            bench.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    return bench, args


def main(argv=None) -> None:
    bench, args = parse(argv)
    tok = Tokenizer()
    start, cpu_start = time.perf_counter(), time.process_time()
    target = load_model("target")
    with tempfile.TemporaryDirectory() as folder:
        hf = load_hf(export_hf(target, folder))
    prompt = tok.encode(workload_prompts("copy", 1, args.seed)[0])
    jobs = side_by_side_jobs(target, hf, prompt, args.tokens, args.k)
    reference = generate(target, prompt, SamplingParams(temperature=0, max_tokens=args.tokens))
    for name, job in jobs.items():
        if job.run() != reference:
            raise SystemExit(f"{name} did not return plain greedy decoding's tokens")
    plain, spec = JOBS[:2], JOBS[2:]
    profiles = {
        **profile_jobs({n: jobs[n] for n in plain}, repeats=args.plain_repeats, seed=args.seed),
        **profile_jobs({n: jobs[n] for n in spec}, repeats=args.spec_repeats, seed=args.seed),
    }
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    load = bench.load(wall=[wall], cpu=[cpu])
    result = {
        "what": "chapter 11's profile: one greedy generation of the first copy prompt by each "
        "of four jobs (course and transformers, plain and prompt lookup at k), part by part; "
        "seconds per part are the fastest over the repeats, repeat_seconds every repeat",
        "settings": {n: getattr(args, n) for n in SETTINGS},
        "load_check": "the whole run as one job: its CPU time against its wall time, and the "
        "1-minute load average at its end",
        "transformers": transformers.__version__,
        "load": load,
        "prompt": tok.decode(prompt),
        "profiles": {name: dataclasses.asdict(p) for name, p in profiles.items()},
        "seconds": round(wall, 1),
    }
    for name, p in profiles.items():
        print(
            f"{name:27}: profiled {1e3 * p.profiled:6.1f} ms, unprofiled "
            f"{1e3 * p.unprofiled:6.1f} ms, matrix products' share "
            f"{p.share('matrix products'):.0%}"
        )
    print(f"load {load}")
    bench.save(result)


if __name__ == "__main__":
    main()
