"""Tokens per target pass for k = 1..8, both drafters, both workloads (greedy).

    python benchmarks/tokens_per_pass.py [--prompts 8] [--tokens 64] [--seed 2026]

64 new tokens stay within the quoted passage of a "copy" prompt (its passages are 70 to 90
tokens long), so what follows the quote does not dilute the copy figure.

Every speculative output is checked against plain greedy decoding before it is
counted. Counts are pooled over all prompts; only emitted tokens are counted.
Writes benchmarks/results/tokens_per_pass.json and prints a table.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from specdec_lib import (
    DraftModelDrafter,
    NgramDrafter,
    SamplingParams,
    Tokenizer,
    load_model,
    workload_prompts,
)
from specdec_lib.analysis.provenance import run_stamp
from specdec_lib.analysis.results import save_result
from specdec_lib.analysis.runs import pooled_speculation

OUT = Path(__file__).parent / "results" / "tokens_per_pass.json"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    tok = Tokenizer()
    target, draft = load_model("target"), load_model("draft")
    params = SamplingParams(max_tokens=args.tokens)
    drafters = {"ngram": NgramDrafter, "draft": lambda: DraftModelDrafter(draft)}
    rows = []
    start = time.perf_counter()
    print(
        f"{'workload':8} {'drafter':6} {'k':>2} {'prompts':>7} {'tokens':>6} {'passes':>6} "
        f"{'tok/pass':>8} {'limit':>5} {'accept':>6} {'draft passes':>12}"
    )
    for workload in ("copy", "novel"):
        prompts = [tok.encode(p) for p in workload_prompts(workload, args.prompts, args.seed)]
        for name, make in drafters.items():
            for k in range(1, 9):
                s = pooled_speculation(target, make, prompts, params, k, check_greedy=True)
                row = dict(
                    workload=workload,
                    drafter=name,
                    k=k,
                    prompts=len(prompts),
                    emitted=s.emitted,
                    target_passes=s.target_passes,
                    tokens_per_pass=s.tokens_per_pass,
                    acceptance=s.acceptance_rate,
                    draft_passes=s.draft_passes,
                    acceptance_per_position=s.acceptance_per_position,
                )
                rows.append(row)
                print(
                    f"{workload:8} {name:6} {k:2d} {len(prompts):7d} {s.emitted:6d} "
                    f"{s.target_passes:6d} {s.tokens_per_pass:8.2f} {k + 1:5d} "
                    f"{s.acceptance_rate:6.3f} {s.draft_passes:12d}"
                )
    result = {
        "stamp": run_stamp(),
        "seed": args.seed,
        "tokens_per_prompt": args.tokens,
        "seconds": round(time.perf_counter() - start, 1),
        "rows": rows,
    }
    save_result(args.out, result)
    print(f"all outputs identical to greedy; {result['seconds']} s; wrote {args.out}")


if __name__ == "__main__":
    main()
