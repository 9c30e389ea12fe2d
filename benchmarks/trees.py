"""Chains against trees at equal verified positions: tokens per target pass (greedy).

    python benchmarks/trees.py [--prompts 16] [--tokens 64] [--nodes 7]

Three drafters, each as a chain of ``--nodes`` tokens and as a tree of ``--nodes`` nodes,
so every pass verifies the same number of positions (the pending token and the nodes):
the n-gram drafter (chain: the latest match; tree: a trie of several matches), the draft
model and the target's own Medusa heads (a chain as deep as there are heads). The draft
model's and the heads' trees are static, the shape the measured ranks ask for
(``analysis.trees.best_shape``), calibrated on prompts of another seed than the ones
measured. Every output is checked against plain greedy decoding before it is counted.
Intervals resample prompts; the tree-minus-chain difference is paired by prompt.
Writes specdec_lib/results/trees.json.
"""

from __future__ import annotations

from specdec_lib import SamplingParams, SpeculationStats, Tokenizer, load_model
from specdec_lib.analysis.intervals import (
    paired_tokens_per_pass_difference,
    position_acceptance,
)
from specdec_lib.analysis.trees import best_shape, rank_hits
from specdec_lib.engine.heads import HeadsTreeDrafter, load_heads
from specdec_lib.engine.tree import TreeShape
from specdec_lib.engine.tree_decode import (
    DraftModelTreeDrafter,
    NgramTreeDrafter,
    tree_speculative_generate,
)
from specdec_lib.text.language import WORKLOADS, workload_prompts

from harness import Benchmark, counts_row, greedy_workloads, interval

CALIBRATION_SEED, CALIBRATION_PROMPTS = 7151, 4  # per workload


def run(target, make, prompts, greedy, params) -> list[SpeculationStats]:
    out = []
    for i, ids in enumerate(prompts):
        stats = SpeculationStats()
        got = tree_speculative_generate(target, make(), ids, params, stats=stats)
        if got != greedy[i]:
            raise AssertionError(f"tree output differs from greedy on prompt {i}")
        out.append(stats)
    return out


def main(argv=None) -> None:
    bench = Benchmark("trees", __doc__, small={"prompts": 1, "tokens": 8}, seed=7150)
    bench.add("--prompts", type=int, default=16)
    bench.add("--tokens", type=int, default=64)
    bench.add("--nodes", type=int, default=7)
    args = bench.parse(argv)
    tok = Tokenizer()
    target, draft = load_model("target"), load_model("draft")
    heads = load_heads(target)
    params = SamplingParams(max_tokens=args.tokens)
    calibration = [
        tok.encode(p)
        for w in WORKLOADS
        for p in workload_prompts(w, CALIBRATION_PROMPTS, CALIBRATION_SEED)
    ]
    hits = {
        "draft": rank_hits(target, calibration, args.tokens, args.nodes, 4, draft=draft),
        "heads": rank_hits(target, calibration, args.tokens, heads.n_heads, 4, heads=heads),
    }
    n, depth = args.nodes, heads.n_heads  # the heads' chain can be no deeper than the heads
    shapes = {
        ("draft", n): best_shape(hits["draft"], n),
        ("heads", depth): best_shape(hits["heads"], depth),
        ("heads", n): best_shape(hits["heads"], n),
    }
    drafters = {  # (drafter, form, nodes): a fresh drafter
        ("ngram", "chain", n): lambda: NgramTreeDrafter(max_nodes=n, max_paths=1),
        ("ngram", "tree", n): lambda: NgramTreeDrafter(max_nodes=n),
        ("draft", "chain", n): lambda: DraftModelTreeDrafter(draft, TreeShape.chain(n)),
        ("draft", "tree", n): lambda: DraftModelTreeDrafter(draft, shapes["draft", n][0]),
        ("heads", "chain", depth): lambda: HeadsTreeDrafter(heads, TreeShape.chain(depth)),
        ("heads", "tree", depth): lambda: HeadsTreeDrafter(heads, shapes["heads", depth][0]),
        ("heads", "tree", n): lambda: HeadsTreeDrafter(heads, shapes["heads", n][0]),
    }
    rows = []
    print(
        f"{'workload':8} {'drafter':6} {'form':5} {'nodes':>5} {'tok/pass [95%]':>22} "
        f"{'tree - chain':>24}"
    )
    for workload, prompts, greedy in greedy_workloads(target, tok, args.prompts, args.seed, params):
        each = {key: run(target, make, prompts, greedy, params) for key, make in drafters.items()}
        for (name, form, nodes), stats in each.items():
            row = counts_row(stats, workload=workload, drafter=name, form=form, nodes=nodes)
            row |= dict(
                depth_acceptance=[interval(x) for x in position_acceptance(stats)],
                per_prompt=[
                    dict(emitted=x.emitted, target_passes=x.target_passes, accepted=x.accepted)
                    for x in stats
                ],
            )
            diff = ""
            if form == "tree" and (name, "chain", nodes) in each:
                d = paired_tokens_per_pass_difference(stats, each[name, "chain", nodes])
                row["tree_minus_chain"] = interval(d)
                diff = f"{d.value:+.2f} [{d.low:+.2f}, {d.high:+.2f}]"
            rows.append(row)
            e = row["tokens_per_pass_interval"]
            at = f"{e['value']:8.2f} [{e['low']:.2f}, {e['high']:.2f}]"
            print(f"{workload:8} {name:6} {form:5} {nodes:5d} {at} {diff:>24}")
    result = {
        "seed": args.seed,
        "calibration": {"seed": CALIBRATION_SEED, "prompts_per_workload": CALIBRATION_PROMPTS},
        "tokens_per_prompt": args.tokens,
        "nodes": args.nodes,
        "rank_hits": {name: h.round(4).tolist() for name, h in hits.items()},
        "shapes": [
            {
                "drafter": name,
                "nodes": nodes,
                "paths": [list(p) for p in s.paths],
                "expected_accepted": round(v, 4),
            }
            for (name, nodes), (s, v) in shapes.items()
        ],
        "rows": rows,
    }
    print("all outputs identical to greedy")
    bench.save(result)


if __name__ == "__main__":
    main()
