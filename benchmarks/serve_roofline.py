"""The server on a GPU-shaped clock: what the CPU cannot show, as a model.

The same continuously batched server as ``benchmarks/serve_sweep.py``, on the same kind
of traffic (TinyGPT's mixed requests: copy, edit, answer and novel; the n-gram drafter,
greedy, its acceptance exactly as measured there), but every step costs what a roofline
model of Llama 3 8B on an A100 80 GB says it costs
(:class:`~specdec_lib.analysis.costs.RooflineStepCost`): the larger of the bytes read
over bandwidth and the arithmetic over peak throughput. Policies: off, k = 4, k = 4 off
from batch 8, and goodput planning with the same model. Two contexts a request: 512
tokens (weights dominate the bytes) and 8192 (each request's cache does, MagicDec's
regime), with as many rows as the caches leave room for beside the weights in 80 GB (at
most 128). Nothing here is timed, so the result is the same on every machine.

Run: ``python benchmarks/serve_roofline.py`` (about 10 minutes); writes
``specdec_lib/results/serve_roofline.json`` (``--out`` to write elsewhere).
"""

from __future__ import annotations

import dataclasses

from measures import summarize
from tqdm import tqdm

from specdec_lib import NgramDrafter, SamplingParams, load_model
from specdec_lib.analysis.costs import RooflineStepCost
from specdec_lib.engine.policies import DisableAbove, FixedK, Off
from specdec_lib.engine.server import ModelledClock, serve
from specdec_lib.engine.traffic import poisson_stream
from specdec_lib.experiments.goodput_policy import GoodputK

from harness import Benchmark

MIX = {"copy": 1.0, "edit": 1.0, "answer": 1.0, "novel": 1.0}
RATES = [5, 10, 20, 40, 80, 160, 320, 640, 1280]
CONTEXTS = [512, 8192]
SEEDS = [21, 22]
LATENCY_TARGET = 1.0  # seconds; a 48-token answer takes about 0.4 s alone on this model
SMALL = {"requests": 16, "rates": [5, 640], "seeds": [21]}


def main(argv: list[str] | None = None) -> None:
    bench = Benchmark("serve_roofline", __doc__, small=SMALL)
    bench.add("--requests", type=int, default=120)
    bench.add("--tokens", type=int, default=48)
    bench.add("--capacity", type=int, default=128)
    args = bench.parse(argv)
    rates, seeds = getattr(args, "rates", RATES), getattr(args, "seeds", SEEDS)  # --small
    target = load_model("target")
    params = SamplingParams(max_tokens=args.tokens)
    rows = []
    for context in CONTEXTS:
        gpu = RooflineStepCost(context=context)
        capacity = min(args.capacity, gpu.max_batch())  # the caches must fit in memory
        policies = [Off(), FixedK(4), DisableAbove(4, 8), GoodputK(gpu, max_k=6)]
        for rate in tqdm(rates, desc=f"context {context}"):
            for seed in seeds:
                outputs = None
                for policy in policies:
                    if isinstance(policy, GoodputK):  # its memory belongs to one server
                        policy = dataclasses.replace(policy)
                    stream = poisson_stream(rate, args.requests, seed, MIX, params)
                    run = serve(
                        target,
                        stream,
                        policy,
                        lambda r: NgramDrafter(),
                        capacity,
                        clock=ModelledClock(gpu),
                    )
                    got = {s.request.id: s.output for s in run.served}
                    if outputs is not None and got != outputs:
                        raise AssertionError(f"{policy.name} changed an output")
                    outputs = got
                    rows.append(
                        {
                            "context": context,
                            "capacity": capacity,
                            "rate": rate,
                            "seed": seed,
                            "policy": policy.name,
                        }
                        | summarize(run, LATENCY_TARGET)
                    )
    result = {
        "model": dataclasses.asdict(RooflineStepCost()),
        "drafter": "n-gram (n=1..4)",
        "mix": MIX,
        "requests": args.requests,
        "tokens_per_request": args.tokens,
        "capacity": args.capacity,
        "latency_target": LATENCY_TARGET,
        "contexts": CONTEXTS,
        "rates": rates,
        "seeds": seeds,
        "rows": rows,
    }
    bench.save(result)


if __name__ == "__main__":
    main()
