"""SmolLM2-135M on real text: what it writes, and what prompt lookup makes of it.

    OMP_NUM_THREADS=1 python benchmarks/smollm2_workloads.py [--prompts 6] [--tokens 64]
        [--k 4] [--out benchmarks/results/smollm2_workloads.json]

Issue 33's first measurement, for the chapter "On a real model". Every prompt is built
from text that ships with Python itself: the source of pure-Python standard-library
functions (``inspect.getsource``), so nothing is downloaded. Four kinds of request:

* ``repeat``: a chat turn asking the model to repeat a function exactly;
* ``complete``: the first third of a function's source, continued as plain text;
* ``explain``: a chat turn asking it to explain a function, quoting the lines;
* ``open``: an open question, with nothing in the prompt to copy.

A workload is named by what the model *writes*, so each row records, besides the
n-gram drafter's acceptance and tokens per pass, the share of the continuation's tokens
that end a 4-gram seen earlier in the prompt or the continuation (``copied_share``).
Greedy, one thread, batch one; the plain and speculative runs of a prompt alternate in
order, and the output of speculation must equal plain greedy decoding's (checked).
"""

from __future__ import annotations

import argparse
import colorsys
import fnmatch
import heapq
import inspect
import shlex
import statistics
import sys
import textwrap
import time
from pathlib import Path

import torch

from specdec_lib import SamplingParams, SpeculationStats, generate, speculative_generate
from specdec_lib.analysis.provenance import run_stamp
from specdec_lib.analysis.results import save_result
from specdec_lib.engine.drafters import NgramDrafter
from specdec_lib.engine.smollm2 import SmolLM2Tokenizer, load_smollm2

OUT = Path(__file__).parent / "results" / "smollm2_workloads.json"
FUNCTIONS = [
    colorsys.rgb_to_hsv,
    colorsys.hsv_to_rgb,
    fnmatch.filter,
    heapq.nlargest,
    shlex.quote,
    textwrap.dedent,
    textwrap.indent,
    statistics.median,
]
QUESTIONS = [
    "Why is the sky blue?",
    "Write a short story about a cat.",
    "What are three good habits for writing code?",
    "Explain what a hash table is.",
    "Give me a recipe for pancakes.",
    "What causes the seasons on Earth?",
    "How do plants make food?",
    "Describe a busy train station.",
]


def chat(text: str) -> str:
    """SmolLM2-Instruct's chat template for one user turn, the assistant's turn opened."""
    return f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"


def prompts(workload: str, n: int) -> list[str]:
    if workload == "open":
        return [chat(q) for q in QUESTIONS[:n]]
    out = []
    for fn in FUNCTIONS[:n]:
        source = inspect.getsource(fn)
        if workload == "repeat":
            out.append(chat(f"Repeat this Python function exactly:\n```python\n{source}```"))
        elif workload == "explain":
            out.append(
                chat(
                    "Explain what this function does, quoting the lines you explain:\n"
                    f"```python\n{source}```"
                )
            )
        else:  # complete
            lines = source.splitlines(keepends=True)
            out.append("".join(lines[: max(3, len(lines) // 3)]))
    return out


def copied_share(prompt: list[int], output: list[int], n: int = 4) -> float:
    """Share of the output's tokens that end an n-gram seen earlier in prompt + output."""
    seq, seen, copied = list(prompt), set(), 0
    for i in range(len(seq) - n + 1):
        seen.add(tuple(seq[i : i + n]))
    for t in output:
        seq.append(t)
        gram = tuple(seq[-n:])
        copied += gram in seen
        seen.add(gram)
    return copied / max(len(output), 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=6)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    start = time.perf_counter()
    model, tok = load_smollm2(), SmolLM2Tokenizer()
    params = SamplingParams(max_tokens=args.tokens)
    rows = []
    for workload in ("repeat", "complete", "explain", "open"):
        for i, text in enumerate(prompts(workload, args.prompts)):
            ids = tok.encode(text)
            seconds, outputs, stats = {}, {}, SpeculationStats()
            order = ("plain", "speculative") if i % 2 == 0 else ("speculative", "plain")
            for method in order:
                t0 = time.perf_counter()
                if method == "plain":
                    outputs[method] = generate(model, ids, params)
                else:
                    outputs[method] = speculative_generate(
                        model, NgramDrafter(), ids, params, k=args.k, stats=stats
                    )
                seconds[method] = time.perf_counter() - t0
            assert outputs["plain"] == outputs["speculative"], (workload, i)
            out = outputs["plain"]
            rows.append(
                dict(
                    workload=workload,
                    prompt=i,
                    prompt_tokens=len(ids),
                    emitted=stats.emitted,
                    target_passes=stats.target_passes,
                    proposed=stats.proposed,
                    accepted=stats.accepted,
                    tokens_per_pass=stats.tokens_per_pass,
                    acceptance=stats.acceptance_rate,
                    acceptance_per_position=stats.acceptance_per_position,
                    copied_share=copied_share(ids, out),
                    ended_turn=tok.eos_id in out,
                    plain_seconds=seconds["plain"],
                    speculative_seconds=seconds["speculative"],
                    text=tok.decode(out),
                )
            )
            r = rows[-1]
            print(
                f"{workload:8} {i}: acceptance {r['acceptance']:.2f}, {r['tokens_per_pass']:.2f} "
                f"tokens per pass, copied {r['copied_share']:.2f}, "
                f"{r['plain_seconds']:.1f} s plain, {r['speculative_seconds']:.1f} s speculative",
                flush=True,
            )
    summary = {}
    for workload in ("repeat", "complete", "explain", "open"):
        mine = [r for r in rows if r["workload"] == workload]
        summary[workload] = dict(
            acceptance=sum(r["accepted"] for r in mine) / max(sum(r["proposed"] for r in mine), 1),
            tokens_per_pass=sum(r["emitted"] for r in mine) / sum(r["target_passes"] for r in mine),
            copied_share=statistics.mean(r["copied_share"] for r in mine),
            speedup=sum(r["plain_seconds"] for r in mine)
            / sum(r["speculative_seconds"] for r in mine),
        )
        print(workload, {k: round(v, 3) for k, v in summary[workload].items()})
    result = {
        "description": "SmolLM2-135M-Instruct, greedy, n-gram drafter: what it writes, and how "
        "much prompt lookup gains",
        "command": "OMP_NUM_THREADS=1 python benchmarks/smollm2_workloads.py "
        + " ".join(argv or sys.argv[1:]),
        "k": args.k,
        "tokens_per_prompt": args.tokens,
        "rows": rows,
        "summary": summary,
        "seconds": round(time.perf_counter() - start, 1),
        "stamp": run_stamp(),
    }
    save_result(args.out, result)
    print(f"{result['seconds']} s; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
