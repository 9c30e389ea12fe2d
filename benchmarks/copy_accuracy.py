"""Greedy copy accuracy of the shipped models on unseen "copy" prompts, per workload seed.

    python benchmarks/copy_accuracy.py [--prompts 32] [--tokens 64]

For each seed in ``COPY_SEEDS``: the share of the first ``--tokens`` tokens of the quoted
passage that greedy decoding reproduces, position by position, over ``--prompts`` prompts;
for the trained target, the untrained target and the trained draft. Also the teacher-forced
loss on "novel" prompts in nats per byte. Writes specdec_lib/results/copy_accuracy.json.
"""

from __future__ import annotations

import statistics

import torch
import torch.nn.functional as F
from measures import COPY_SEEDS

from specdec_lib import Tokenizer, load_model, workload_examples
from specdec_lib.analysis.runs import copy_accuracy

from harness import Benchmark


@torch.inference_mode()
def novel_nats_per_byte(model, n: int, seed: int) -> float:
    """Teacher-forced loss over whole "novel" texts (prompt + reference), per byte."""
    tok = Tokenizer()
    nats = n_bytes = 0.0
    for ex in workload_examples("novel", n, seed):
        ids = tok.encode(ex.prompt + ex.reference)
        x = torch.tensor([ids])
        nats += F.cross_entropy(model(x)[0, :-1], x[0, 1:], reduction="sum").item()
        n_bytes += len(tok.decode(ids[1:]).encode())
    return nats / n_bytes


def main(argv=None) -> None:
    bench = Benchmark("copy_accuracy", __doc__, small={"prompts": 2, "tokens": 8})
    bench.add("--prompts", type=int, default=32)
    bench.add("--tokens", type=int, default=64)
    args = bench.parse(argv)
    models = {
        "target": load_model("target"),
        "untrained target": load_model("target", trained=False),
        "draft": load_model("draft"),
    }
    rows = []
    print(f"{'model':17} " + " ".join(f"{s:>7}" for s in COPY_SEEDS) + "    mean  novel nats/byte")
    for name, model in models.items():
        per_seed = {
            seed: copy_accuracy(model, workload_examples("copy", args.prompts, seed), args.tokens)
            for seed in COPY_SEEDS
        }
        novel = novel_nats_per_byte(model, args.prompts, 4242)
        mean = statistics.fmean(per_seed.values())
        rows.append(
            {"model": name, "per_seed": per_seed, "mean": mean, "novel_nats_per_byte": novel}
        )
        print(
            f"{name:17} "
            + " ".join(f"{a:7.1%}" for a in per_seed.values())
            + f" {mean:7.1%} {novel:8.3f}"
        )
    bench.save({"prompts_per_seed": args.prompts, "tokens": args.tokens, "rows": rows})


if __name__ == "__main__":
    main()
