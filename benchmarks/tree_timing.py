"""What trees cost and what they buy in time: the pass against its nodes, and wall clock.

    python benchmarks/tree_timing.py [--prompts 8] [--tokens 64] [--repeats 6]
        [--batch-sizes 1,4,16,64] [--out specdec_lib/results/tree_timing.json]
    python benchmarks/tree_timing.py --small --out /tmp/tree_timing.json   # a quick check

Three measurements, every job interleaved with every other in a freshly shuffled order
(:func:`~specdec_lib.analysis.timing.interleaved`), the machine's load checked:

* **a pass against its nodes**: one cached target pass after a 200-token context, feeding
  the pending token and n drafted tokens (n = 1 ... 32), as a chain (the plain causal
  pass) and as a tree (its layout built and used), each relative to a one-position pass;
* **wall clock at batch one**: plain decoding, and each drafter (n-gram, draft model,
  heads) as a chain and as a tree of equal nodes, on every workload, greedy, every output
  checked against plain decoding; paired speed-ups over plain, and tree over chain;
* **as the batch grows**: plain batched decoding, the n-gram chain and the n-gram trie at
  batch sizes ``--batch-sizes`` on "copy" and "edit": do trees stop paying earlier?

Writes specdec_lib/results/tree_timing.json.
"""

from __future__ import annotations

import statistics

import torch

from specdec_lib import NgramDrafter, SamplingParams, Tokenizer, generate, load_model
from specdec_lib.analysis.intervals import paired_speedup
from specdec_lib.analysis.results import load_result
from specdec_lib.analysis.timing import interleaved
from specdec_lib.engine.batched import generate_batch, speculative_generate_batch
from specdec_lib.engine.generate import speculative_generate
from specdec_lib.engine.heads import HeadsTreeDrafter, load_heads
from specdec_lib.engine.tree import TreeShape, tree_layout
from specdec_lib.engine.tree_decode import (
    DraftModelTreeDrafter,
    NgramTreeDrafter,
    tree_speculate,
    tree_speculative_generate,
)
from specdec_lib.text.language import workload_prompts

from harness import Benchmark, greedy_workloads, interval, ints

NODES = (1, 2, 4, 8, 16, 32)
SEED = 8150  # prompts no other benchmark uses
SMALL = {"prompts": 2, "tokens": 16, "repeats": 3, "batch_sizes": [1, 4]}


def wide_tree(n: int) -> list[int]:
    """Parents of an n-node tree two wide at every level (two branches under the pending
    token): a stand-in for any tree's mask, whose cost does not depend on its shape."""
    return [-1 if i < 2 else i - 2 for i in range(n)]


def pass_costs(target, repeats: int) -> dict:
    """Median seconds of one cached pass of 1 + n positions, chain and tree, per n."""
    ids = list(range(5, 205))  # any 200 tokens: a pass's cost does not read their values
    cache = target.new_cache(1)
    with torch.inference_mode():
        target(torch.tensor([ids]), cache)
    jobs, untimed = {}, {}
    for n in NODES:
        fed = torch.tensor([[7] * (1 + n)])

        def chain(fed=fed):
            with torch.inference_mode():
                target(fed, cache)

        def tree(fed=fed, n=n):
            with torch.inference_mode():
                layout = tree_layout([len(ids)], [1 + n], [wide_tree(n)])
                target(fed, cache, layout=layout)

        for form, job in (("chain", chain), ("tree", tree)):
            jobs[form, n] = job
            untimed[form, n] = lambda: cache.crop(len(ids))
    times = interleaved(jobs, repeats * 5, seed=1, untimed=untimed)
    one = statistics.median(times["chain", 1].wall)
    rows = [
        {
            "nodes": n,
            "form": form,
            "seconds": statistics.median(times[form, n].wall),
            "relative": statistics.median(times[form, n].wall) / one,
        }
        for form, n in jobs
    ]
    return {"rows": rows, "times": times}


def main(argv=None) -> None:
    bench = Benchmark("tree_timing", __doc__, small=SMALL, repeats=6)
    bench.add("--prompts", type=int, default=8)
    bench.add("--tokens", type=int, default=64)
    bench.add("--batch-sizes", type=ints, default=[1, 4, 16, 64])
    args = bench.parse(argv)
    tok = Tokenizer()
    target, draft = load_model("target"), load_model("draft")
    heads = load_heads(target)
    shapes = {
        (s["drafter"], s["nodes"]): TreeShape(tuple(map(tuple, s["paths"])))
        for s in load_result("trees")["shapes"]
    }
    params = SamplingParams(max_tokens=args.tokens)
    costs = pass_costs(target, args.repeats)
    print(
        "pass cost / one-position pass:",
        [(r["form"], r["nodes"], round(r["relative"], 2)) for r in costs["rows"]],
    )
    methods = {
        "ngram chain 7": lambda ids: speculative_generate(target, NgramDrafter(), ids, params, 7),
        "ngram tree 7": lambda ids: tree_speculative_generate(
            target, NgramTreeDrafter(7), ids, params
        ),
        "draft chain 7": lambda ids: tree_speculative_generate(
            target, DraftModelTreeDrafter(draft, TreeShape.chain(7)), ids, params
        ),
        "draft tree 7": lambda ids: tree_speculative_generate(
            target, DraftModelTreeDrafter(draft, shapes["draft", 7]), ids, params
        ),
        "heads chain 4": lambda ids: tree_speculative_generate(
            target, HeadsTreeDrafter(heads, TreeShape.chain(heads.n_heads)), ids, params
        ),
        "heads tree 7": lambda ids: tree_speculative_generate(
            target, HeadsTreeDrafter(heads, shapes["heads", 7]), ids, params
        ),
    }
    pairs = (
        ("ngram tree 7", "ngram chain 7"),
        ("draft tree 7", "draft chain 7"),
        ("heads tree 7", "heads chain 4"),
    )
    wall, timed_all = [], {}
    for workload, prompts, plain in greedy_workloads(target, tok, args.prompts, SEED, params):
        for name, run in methods.items():
            assert all(run(ids) == out for ids, out in zip(prompts, plain, strict=True)), name
        jobs = {
            ("plain", i): (lambda ids=ids: generate(target, ids, params))
            for i, ids in enumerate(prompts)
        }
        for name, run in methods.items():
            jobs |= {
                (name, i): (lambda ids=ids, run=run: run(ids)) for i, ids in enumerate(prompts)
            }
        times = interleaved(jobs, args.repeats, seed=2)
        timed_all |= {(workload, *key): t for key, t in times.items()}
        table = {m: [times[m, i].wall for i in range(len(prompts))] for m in ["plain", *methods]}
        for name in methods:
            e = paired_speedup(table["plain"], table[name])
            wall.append({"workload": workload, "method": name, "over_plain": interval(e)})
            print(f"{workload:7} {name:14} {e.value:5.2f}x [{e.low:.2f}, {e.high:.2f}]")
        for tree, chain in pairs:
            e = paired_speedup(table[chain], table[tree])
            wall.append(
                {"workload": workload, "method": f"{tree} over {chain}", "over_chain": interval(e)}
            )
    batch = []
    for workload in ("copy", "edit"):
        texts = workload_prompts(workload, max(args.batch_sizes), SEED + 1)
        for b in args.batch_sizes:
            prompts = [tok.encode(t) for t in texts[:b]]
            jobs = {
                "plain": lambda prompts=prompts: generate_batch(target, prompts, params),
                "ngram chain 7": lambda prompts=prompts: speculative_generate_batch(
                    target, NgramDrafter, prompts, params, 7
                ),
                "ngram tree 7": lambda prompts=prompts: tree_speculate(
                    target, [NgramTreeDrafter(7) for _ in prompts], prompts, params
                ),
            }
            outs = {name: job() for name, job in jobs.items()}
            assert outs["ngram chain 7"] == outs["plain"] == outs["ngram tree 7"]
            times = interleaved(jobs, args.repeats, seed=3)
            timed_all |= {(workload, b, key): t for key, t in times.items()}
            for name in ("ngram chain 7", "ngram tree 7"):
                e = paired_speedup([times["plain"].wall], [times[name].wall])
                batch.append(
                    {"workload": workload, "batch": b, "method": name, "over_plain": interval(e)}
                )
                print(
                    f"{workload:7} B={b:3d} {name:14} {e.value:5.2f}x [{e.low:.2f}, {e.high:.2f}]"
                )
    load = bench.load({**costs["times"], **timed_all})
    result = {
        "load": load,
        "prompts": args.prompts,
        "tokens_per_prompt": args.tokens,
        "repeats": args.repeats,
        "seed": SEED,
        "pass_costs": costs["rows"],
        "wall_clock": wall,
        "batch": batch,
    }
    print("BUSY" if load["busy"] else "quiet")
    bench.save(result)


if __name__ == "__main__":
    main()
