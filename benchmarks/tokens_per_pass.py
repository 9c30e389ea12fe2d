"""Tokens per target pass for k = 1..8, 10, 12 and 16, both drafters, every workload (greedy).

    python benchmarks/tokens_per_pass.py [--prompts 16] [--tokens 64] [--seed 2026]

64 new tokens stay within the quoted passage of a "copy" prompt (its passages are 70 to 90
tokens long), so what follows the quote does not dilute the copy figure.

Every speculative output is checked against plain greedy decoding before it is
counted. Counts are pooled over all prompts (only emitted tokens are counted), with 95%
intervals that resample prompts; each row also keeps every prompt's own counts, so a
chapter can resample them again (chapter 5's cost model does).
Writes specdec_lib/results/tokens_per_pass.json and prints a table.
"""

from __future__ import annotations

from specdec_lib import (
    DraftModelDrafter,
    NgramDrafter,
    SamplingParams,
    Tokenizer,
    load_model,
)
from specdec_lib.analysis.intervals import acceptance_estimate
from specdec_lib.analysis.runs import per_prompt_speculation, pooled

from harness import Benchmark, counts_row, greedy_workloads, interval

KS = (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16)


def main(argv=None) -> None:
    bench = Benchmark("tokens_per_pass", __doc__, small={"prompts": 2, "tokens": 8}, seed=2026)
    bench.add("--prompts", type=int, default=16)
    bench.add("--tokens", type=int, default=64)
    args = bench.parse(argv)
    tok = Tokenizer()
    target, draft = load_model("target"), load_model("draft")
    params = SamplingParams(max_tokens=args.tokens)
    drafters = {"ngram": NgramDrafter, "draft": lambda: DraftModelDrafter(draft)}
    rows = []
    print(
        f"{'workload':8} {'drafter':6} {'k':>2} {'prompts':>7} {'tokens':>6} {'passes':>6} "
        f"{'tok/pass':>8} {'limit':>5} {'accept':>6} {'draft passes':>12}"
    )
    for workload, prompts, greedy in greedy_workloads(target, tok, args.prompts, args.seed, params):
        for name, make in drafters.items():
            for k in KS:
                each = per_prompt_speculation(
                    target, make, prompts, params, k, check_greedy=True, greedy=greedy
                )
                s = pooled(each)
                row = counts_row(each, workload=workload, drafter=name, k=k)
                row |= dict(
                    proposed=s.proposed,
                    accepted=s.accepted,
                    acceptance=s.acceptance_rate,
                    acceptance_interval=interval(acceptance_estimate(each)),
                    position_proposed=s.position_proposed,
                    position_accepted=s.position_accepted,
                    acceptance_per_position=s.acceptance_per_position,
                    per_prompt=[
                        dict(
                            emitted=e.emitted,
                            target_passes=e.target_passes,
                            proposed=e.proposed,
                            accepted=e.accepted,
                            draft_passes=e.draft_passes,
                            position_proposed=e.position_proposed,
                            position_accepted=e.position_accepted,
                        )
                        for e in each
                    ],
                )
                rows.append(row)
                print(
                    f"{workload:8} {name:6} {k:2d} {len(prompts):7d} {s.emitted:6d} "
                    f"{s.target_passes:6d} {s.tokens_per_pass:8.2f} {k + 1:5d} "
                    f"{s.acceptance_rate:6.3f} {s.draft_passes:12d}"
                )
    print("all outputs identical to greedy")
    bench.save({"seed": args.seed, "tokens_per_prompt": args.tokens, "rows": rows})


if __name__ == "__main__":
    main()
