"""SmolLM2-135M with its EAGLE head: a learned drafter against prompt lookup, at batch one.

    OMP_NUM_THREADS=1 python benchmarks/eagle_workloads.py [--prompts 8] [--tokens 48]
        [--repeats 2] [--onednn] [--out specdec_lib/results/eagle_workloads.json]

For chapter 13. The prompts are chapter 13's (``smollm2_prompts``), which the head's
training data was filtered against (``eagle_data.leaked``): open conversation (``open``,
``explain``: prose with little to copy) and input-grounded text (``recite``,
``continue``: code the prompt holds or the model repeats). Greedy, one thread, timed
interleaved in ``--repeats`` repeats (a fresh order each repeat), every method's output
checked equal to plain greedy decoding's:

* ``plain``: one target pass a token;
* ``ngram``: prompt lookup (``NgramDrafter``, k = 4), chapter 13's baseline;
* ``eagle``: the head's chain, k = ``--chain-k`` (its acceptance falls fast with the
  draft position, so a short chain may pay where a long one does not);
* ``eagle_tree``: EAGLE-2's dynamic tree (``EagleTreeDrafter``, ``TREE_WIDTH`` children a
  node, ``TREE_BUDGET`` nodes, ``EAGLE_K`` levels deep);
* ``eagle_or_lookup``: per round, prompt lookup where the context repeats itself, else the
  head (``EagleOrLookupDrafter``).

Beside the wall clock, for the speed-up predicted from costs: every target pass is timed
by forward hooks, with the positions it fed (``passes``: seconds by positions, per method),
and every drafting call is timed (``draft_seconds``), so a draft pass's cost can be set
against a plain decoding step's measured in the same run.

``--onednn`` runs the target's and the head's linear layers through oneDNN's inner product
(:mod:`specdec_lib.engine.onednn`), where a pass over 2 to 5 positions cost 1.2-1.35
plain steps in ``smollm2_kernels*.json``; without it, PyTorch's default kernel (1.5-2.1).
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from smollm2_workloads import decode_jobs, print_row, prompt_row, speedup_rows, summarise

from specdec_lib import SamplingParams
from specdec_lib.analysis.timing import interleaved
from specdec_lib.engine.drafters import NgramDrafter
from specdec_lib.engine.eagle import EagleDrafter, EagleOrLookupDrafter, eagle_info, load_eagle
from specdec_lib.engine.eagle_tree import EagleTreeDrafter
from specdec_lib.engine.onednn import use_onednn
from specdec_lib.engine.smollm2 import SmolLM2Tokenizer, gguf_path, load_smollm2
from specdec_lib.engine.weights import WEIGHTS_DIR, sha256
from specdec_lib.text.stdlib_prompts import smollm2_prompts

from harness import Benchmark

WORKLOADS = ("open", "explain", "recite", "continue")
EAGLE_K = 4
TREE_WIDTH, TREE_BUDGET = 4, 12
#: (method, k): the draft depth each is asked for
DRAFTERS = {"ngram": 4, "eagle": EAGLE_K, "eagle_tree": EAGLE_K, "eagle_or_lookup": EAGLE_K}


class PassClock:
    """Times every forward call of ``model`` with the positions it fed, into the list that
    :attr:`into` names (set it before each job): the hooks run on every call, so plain
    decoding and every method pay the same few microseconds."""

    def __init__(self, model) -> None:  # noqa: ANN001
        self.into: list[tuple[int, float]] | None = None
        self._t0 = 0.0
        model.register_forward_pre_hook(self._before)
        model.register_forward_hook(self._after)

    def _before(self, module, args) -> None:  # noqa: ANN001
        self._fed = int(args[0].shape[-1])
        self._t0 = time.perf_counter()

    def _after(self, module, args, out) -> None:  # noqa: ANN001
        if self.into is not None:
            self.into.append((self._fed, time.perf_counter() - self._t0))


def time_drafting(drafter, seconds: list[float]):  # noqa: ANN001, ANN201
    """``drafter`` with its drafting call (``draft_tree`` or ``draft``) timed into
    ``seconds``: the instance's method is wrapped, so the engine sees the same drafter."""
    name = "draft_tree" if hasattr(drafter, "draft_tree") else "draft"
    inner: Callable = getattr(drafter, name)

    def timed(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        t0 = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            seconds.append(time.perf_counter() - t0)

    setattr(drafter, name, timed)
    return drafter


def record(name, job, clock, passes, drafting, draft_seconds):  # noqa: ANN001, ANN201
    """``job`` with its target passes (positions, seconds) kept in ``passes[name]`` and its
    drafting seconds in ``drafting[name]``: the last run's, the one whose counts are kept."""

    def run() -> None:
        clock.into = []
        before = len(draft_seconds.get(name, []))
        job()
        passes[name], clock.into = clock.into, None
        if name in draft_seconds:
            drafting[name] = sum(draft_seconds[name][before:])

    return run


def main(argv: list[str] | None = None) -> int:
    small = {"prompts": 1, "tokens": 8, "repeats": 1}
    bench = Benchmark("eagle_workloads", __doc__, small=small, repeats=2)
    bench.add("--prompts", type=int, default=8)
    bench.add("--tokens", type=int, default=48)
    bench.add("--head", type=Path, default=WEIGHTS_DIR, help="the head's folder")
    bench.add("--chain-k", type=int, default=EAGLE_K, help="the head's chain length")
    bench.add("--onednn", action="store_true", help="oneDNN's inner product for the linear layers")
    args = bench.parse(argv)
    ks = DRAFTERS | {"eagle": args.chain_k}
    model, tok = load_smollm2(1024), SmolLM2Tokenizer()
    head = load_eagle(model, sha256(gguf_path()), args.head)
    if args.onednn:  # after the head is built: it copies rows of the dense embedding
        use_onednn(model), use_onednn(head)
    draft_seconds: dict[str, list[float]] = {name: [] for name in ks}
    made = {
        "ngram": NgramDrafter(vocab_size=model.config.vocab_size),
        "eagle": EagleDrafter(head),
        "eagle_tree": EagleTreeDrafter(head, TREE_WIDTH, TREE_BUDGET),
        "eagle_or_lookup": EagleOrLookupDrafter(head),
    }
    drafters = {name: (time_drafting(d, draft_seconds[name]), ks[name]) for name, d in made.items()}
    clock = PassClock(model)
    params = SamplingParams(max_tokens=args.tokens)
    rows, timed = [], {}
    for workload in WORKLOADS:
        for i, text in enumerate(smollm2_prompts(workload, args.prompts)):
            ids = tok.encode(text)
            outputs, stats = {}, {}
            passes: dict[str, list[tuple[int, float]]] = defaultdict(list)
            drafting = {name: 0.0 for name in ks}
            jobs = decode_jobs(model, drafters, ids, params, outputs, stats)

            clocked = {
                m: record(m, j, clock, passes, drafting, draft_seconds) for m, j in jobs.items()
            }
            times = interleaved(clocked, args.repeats, seed=i, warmup=0)
            for name in drafters:  # the last repeat's output and counts
                assert outputs[name] == outputs["plain"], (workload, i, name)
            out = outputs["plain"]
            timed.update({(workload, i, m): t for m, t in times.items()})
            rows.append(
                prompt_row(
                    workload,
                    i,
                    ids,
                    out,
                    tok,
                    stats,
                    times,
                    passes={m: [[n, round(s, 6)] for n, s in p] for m, p in passes.items()},
                    draft_seconds={m: round(s, 6) for m, s in drafting.items()},
                )
            )
            print_row(rows[-1], stats, bench.seconds())
    by_workload = {w: summarise(rows, w, ks) for w in WORKLOADS}
    result = {
        "description": "SmolLM2-135M-Instruct, greedy, batch one: its EAGLE head (chain and "
        "EAGLE-2 tree) and prompt lookup against plain decoding",
        "drafters": {name: {"k": k} for name, k in ks.items()},
        "tree": {"width": TREE_WIDTH, "budget": TREE_BUDGET},
        "head": {k: v for k, v in eagle_info(args.head).items() if k in ("sha256", "gguf_sha256")},
        "kernel": "oneDNN" if args.onednn else "PyTorch default (MKL)",
        "tokens_per_prompt": args.tokens,
        "repeats": args.repeats,
        "prompts": rows,
        "by_workload": by_workload,
        "rows": speedup_rows(by_workload, ks),
        "load": bench.load(timed),
    }
    print(f"busy: {result['load']['busy']}")
    bench.save(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
