"""SmolLM2-135M on real text: what it writes, and what self-made drafts make of it.

    OMP_NUM_THREADS=1 python benchmarks/smollm2_workloads.py [--prompts 8] [--tokens 48]
        [--repeats 2] [--out specdec_lib/results/smollm2_workloads.json]

For chapter 13, "On a real model". Every prompt is built from text that ships with Python
itself: the source of pure-Python standard-library functions (``inspect.getsource``), so
nothing is downloaded. A workload is named by what the model *writes* (measured here as
``copied_share``: the share of its tokens that end a 4-gram seen earlier in the prompt or
in what it wrote), not by what the prompt asks:

* ``recite``: a function's source, then its file name again and its first two lines:
  the model writes the function back, mostly copied;
* ``continue``: the first third of a function: it writes code of its own, often
  repeating its own lines;
* ``explain``: a chat turn asking it to explain a function: prose about the code,
  quoting a few names;
* ``open``: an open question: prose with nothing to copy;
* ``asked_to_repeat``: a chat turn asking it to repeat a function exactly, which a
  135M model mostly does not do (``recited`` counts the outputs that are > 80% copied).

Three ways to decode each prompt, greedy, one thread, batch one, timed interleaved in
``--repeats`` repeats (a fresh order each repeat): plain decoding; prompt lookup
(``NgramDrafter``, k = 4); and an early exit of SmolLM2 itself (its first
``EARLY_LAYERS`` layers read by its own final norm and output layer, k = 2: its
acceptance past the first draft position is near zero). Both drafters' output must
equal plain greedy decoding's, in every repeat (checked). Beside them,
``exit_agreement``: for every depth, how often that early exit's guess equals the token
the model writes next (the early exit's acceptance at draft position 0, all depths from
one pass).
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import asdict

import torch

from specdec_lib import SamplingParams, SpeculationStats, generate, speculative_generate
from specdec_lib.analysis.intervals import (
    acceptance_estimate,
    paired_speedup,
    position_acceptance,
    tokens_per_pass_estimate,
)
from specdec_lib.analysis.novelty import continued_tokens
from specdec_lib.analysis.timing import interleaved
from specdec_lib.engine.drafters import DraftModelDrafter, NgramDrafter
from specdec_lib.engine.model import early_exit
from specdec_lib.engine.smollm2 import SmolLM2Tokenizer, load_smollm2
from specdec_lib.experiments.exit_agreement import exit_agreement
from specdec_lib.text.stdlib_prompts import SMOLLM2_WORKLOADS, smollm2_prompts

from harness import Benchmark

WORKLOADS = SMOLLM2_WORKLOADS
#: (drafter, k): prompt lookup drafts 4; the early exit 2, its later guesses being rarely right
DRAFTERS = {"ngram": 4, "early_exit": 2}
EARLY_LAYERS = 24


def decode_jobs(model, drafters, ids, params, outputs, stats):  # noqa: ANN001, ANN201
    """One job per method; each run stores its output and (for a drafter) fresh counts."""

    def plain() -> None:
        outputs["plain"] = generate(model, ids, params)

    def speculative(name: str):  # noqa: ANN202
        def run() -> None:
            stats[name] = SpeculationStats()
            drafter, k = drafters[name]
            outputs[name] = speculative_generate(
                model, drafter, ids, params, k=k, stats=stats[name]
            )

        return run

    return {"plain": plain, **{name: speculative(name) for name in drafters}}


def summarise(rows: list[dict], workload: str, drafters: dict[str, int] = DRAFTERS) -> dict:
    """One workload's counts (pooled over its prompts) and paired speed-ups, per drafter."""
    mine = [r for r in rows if r["workload"] == workload]
    plain = [r["seconds"]["plain"] for r in mine]
    out = {"copied_share": statistics.mean(r["copied_share"] for r in mine)}
    for name in drafters:
        per_prompt = [SpeculationStats(**r["counts"][name]) for r in mine]
        out[name] = dict(
            acceptance=asdict(acceptance_estimate(per_prompt)),
            tokens_per_pass=asdict(tokens_per_pass_estimate(per_prompt)),
            per_position=[asdict(e) for e in position_acceptance(per_prompt)],
            speedup=asdict(paired_speedup(plain, [r["seconds"][name] for r in mine])),
        )
    return out


def speedup_rows(by_workload: dict, drafters: dict[str, int] = DRAFTERS) -> list[dict]:
    """Each drafter's paired speed-up over plain decoding per workload, as the rows
    ``benchmarks/compare_runs.py`` pairs between two runs."""
    return [
        dict(
            workload=w,
            method=f"{d} k={drafters[d]}",
            speedup=s[d]["speedup"]["value"],
            speedup_low=s[d]["speedup"]["low"],
            speedup_high=s[d]["speedup"]["high"],
        )
        for w, s in by_workload.items()
        for d in drafters
    ]


def tables(prompts: list[dict]) -> dict:
    """The result's tables from its per-prompt rows: ``prompts`` themselves,
    ``by_workload`` (counts and speed-ups with intervals), ``rows`` (speed-ups only)."""
    by_workload = {w: summarise(prompts, w) for w in WORKLOADS}
    by_workload["asked_to_repeat"]["recited"] = sum(
        r["copied_share"] > 0.8 for r in prompts if r["workload"] == "asked_to_repeat"
    )
    return {"prompts": prompts, "by_workload": by_workload, "rows": speedup_rows(by_workload)}


def prompt_row(workload, i, ids, out, tok, stats, times, **extra) -> dict:  # noqa: ANN001
    """One prompt's stored row: its counts per drafter, every method's times, what the
    model wrote and how much of it copies the prompt (``extra``: a benchmark's own keys)."""
    return dict(
        workload=workload,
        prompt=i,
        prompt_tokens=len(ids),
        counts={name: asdict(s) | {"log": []} for name, s in stats.items()},
        seconds={m: t.wall for m, t in times.items()},
        copied_share=statistics.mean(continued_tokens(ids, out, n=4)),
        ended_turn=tok.eos_id in out,
        text=tok.decode(out),
        **extra,
    )


def print_row(row: dict, stats: dict, seconds: float) -> None:
    """A prompt's line of progress: each method's speed-up and tokens per pass."""
    plain = statistics.median(row["seconds"]["plain"])
    print(
        f"{row['workload']:15} {row['prompt']}: copied {row['copied_share']:.2f}, "
        + ", ".join(
            f"{m} {plain / statistics.median(t):.2f}x ({stats[m].tokens_per_pass:.2f}/pass)"
            for m, t in row["seconds"].items()
            if m != "plain"
        )
        + f"; {seconds:.0f} s",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    small = {"prompts": 1, "tokens": 8, "repeats": 1}
    bench = Benchmark("smollm2_workloads", __doc__, small=small, repeats=2)
    bench.add("--prompts", type=int, default=8)
    bench.add("--tokens", type=int, default=48)
    args = bench.parse(argv)
    model, tok = load_smollm2(1024), SmolLM2Tokenizer()
    drafters = {
        "ngram": (NgramDrafter(), DRAFTERS["ngram"]),
        "early_exit": (DraftModelDrafter(early_exit(model, EARLY_LAYERS)), DRAFTERS["early_exit"]),
    }
    params = SamplingParams(max_tokens=args.tokens)
    rows, timed = [], {}
    for workload in WORKLOADS:
        for i, text in enumerate(smollm2_prompts(workload, args.prompts)):
            ids = tok.encode(text)
            outputs, stats = {}, {}
            times = interleaved(
                decode_jobs(model, drafters, ids, params, outputs, stats),
                args.repeats,
                seed=i,
                warmup=0,
            )
            for name in drafters:  # the last repeat's output; earlier ones are checked below
                assert outputs[name] == outputs["plain"], (workload, i, name)
            out = outputs["plain"]
            with torch.inference_mode():
                agreement = exit_agreement(model, ids + out, len(ids))
            timed.update({(workload, i, m): t for m, t in times.items()})
            rows.append(
                prompt_row(workload, i, ids, out, tok, stats, times, exit_agreement=agreement)
            )
            print_row(rows[-1], stats, bench.seconds())
    result = {
        "description": "SmolLM2-135M-Instruct, greedy, batch one: what it writes, and what "
        "prompt lookup and an early exit of itself make of it",
        "drafters": {name: {"k": k} for name, k in DRAFTERS.items()},
        "early_layers": EARLY_LAYERS,
        "tokens_per_prompt": args.tokens,
        "repeats": args.repeats,
        **tables(rows),
        "load": bench.load(timed),
    }
    print(f"busy: {result['load']['busy']}")
    bench.save(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
