"""Does the one speculation loop charge a tree for being a tree? The n-gram trie against
the n-gram chain on copy, at batch one, where the trie never branches.

    python benchmarks/trie_vs_chain.py [--prompts 64] [--tokens 64] [--repeats 40]
        [--out specdec_lib/results/trie_vs_chain.json]
    python benchmarks/trie_vs_chain.py --small --out /tmp/trie_vs_chain.json   # a quick check

On copy every round's trie is one path: the latest, longest match, the chain's own
proposal (chapter 12 counts it: the trie branched in 0 of 64 rounds). Both drafters
propose 7 nodes and make the same passes, so any time between them is the price of the
tree path: the drafter's trie search and the loop's handling of a ``TokenTree``. This
measures only that pair (and plain decoding, for scale), with more prompts and repeats
than ``tree_timing.py`` spends on it, every job interleaved with every other in a freshly
shuffled order, greedy outputs checked equal to plain decoding, and the two drafters'
rounds, proposed nodes and emitted tokens checked equal. The paired ratio is the chain's
time over the trie's (1: the same; below 1: the trie is slower).

Writes specdec_lib/results/trie_vs_chain.json.
"""

from __future__ import annotations

from specdec_lib import (
    NgramDrafter,
    SamplingParams,
    SpeculationStats,
    Tokenizer,
    generate,
    load_model,
)
from specdec_lib.analysis.intervals import paired_speedup
from specdec_lib.analysis.timing import interleaved
from specdec_lib.engine.generate import speculative_generate
from specdec_lib.engine.tree_decode import NgramTreeDrafter, tree_speculative_generate
from specdec_lib.text.language import workload_prompts

from harness import Benchmark, interval

SEED = 8150  # tree_timing's prompts, so its copy row and this one measure the same texts
NODES = 7
SMALL = {"prompts": 3, "tokens": 16, "repeats": 3}


def main(argv=None) -> None:
    bench = Benchmark("trie_vs_chain", __doc__, small=SMALL, repeats=40)
    bench.add("--prompts", type=int, default=64)
    bench.add("--tokens", type=int, default=64)
    args = bench.parse(argv)
    tok = Tokenizer()
    target = load_model("target")
    params = SamplingParams(max_tokens=args.tokens)
    prompts = [tok.encode(t) for t in workload_prompts("copy", args.prompts, SEED)]
    methods = {
        "plain": lambda ids: generate(target, ids, params),
        "ngram chain 7": lambda ids: speculative_generate(
            target, NgramDrafter(), ids, params, NODES
        ),
        "ngram trie 7": lambda ids: tree_speculative_generate(
            target, NgramTreeDrafter(NODES), ids, params
        ),
    }
    counts = {}
    for ids in prompts:  # same outputs, same rounds: the pair differs only in the path taken
        plain = methods["plain"](ids)
        for name in ("ngram chain 7", "ngram trie 7"):
            stats = SpeculationStats()
            drafter = NgramDrafter() if name == "ngram chain 7" else NgramTreeDrafter(NODES)
            run = speculative_generate if name == "ngram chain 7" else tree_speculative_generate
            extra = (NODES,) if name == "ngram chain 7" else ()
            out = run(target, drafter, ids, params, *extra, stats=stats)
            assert out == plain, name
            c = counts.setdefault(name, {"rounds": 0, "proposed": 0, "emitted": 0})
            c["rounds"] += stats.rounds
            c["proposed"] += stats.proposed
            c["emitted"] += stats.emitted
    assert counts["ngram chain 7"] == counts["ngram trie 7"], counts
    jobs = {
        (name, i): (lambda ids=ids, run=run: run(ids))
        for name, run in methods.items()
        for i, ids in enumerate(prompts)
    }
    times = interleaved(jobs, args.repeats, seed=4, progress=bench.progress(args.repeats))
    table = {m: [times[m, i].wall for i in range(len(prompts))] for m in methods}
    rows = []
    for base, method in (
        ("plain", "ngram chain 7"),
        ("plain", "ngram trie 7"),
        ("ngram chain 7", "ngram trie 7"),
    ):
        e = paired_speedup(table[base], table[method])
        rows.append({"method": method, "over": base, "speedup": interval(e)})
        print(f"{method:14} over {base:14} {e.value:6.3f}x [{e.low:.3f}, {e.high:.3f}]")
    load = bench.load(times)
    print("BUSY" if load["busy"] else "quiet")
    bench.save(
        {
            "load": load,
            "workload": "copy",
            "prompts": args.prompts,
            "tokens_per_prompt": args.tokens,
            "repeats": args.repeats,
            "seed": SEED,
            "counts": counts,
            "rows": rows,
        }
    )


if __name__ == "__main__":
    main()
