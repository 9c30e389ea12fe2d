"""Traffic that shifts: the goodput policy against fixed k and plain decoding, on many
independently drawn streams whose mix turns from input-grounded to fresh text halfway.

    python benchmarks/serve_shift.py [--streams 12] [--requests 160] [--rate 50]
        [--out specdec_lib/results/serve_shift.json]
    python benchmarks/serve_shift.py --small --out /tmp/serve_shift.json   # a quick check

``serve_sweep.py`` serves two such streams a run, too few for an interval. Here each of
``--streams`` streams (its own seed: prompts, arrival times and which requests come before
the shift) is served by the continuously batching server (:mod:`specdec_lib.engine.server`)
under plain decoding, k = 4 and the goodput policy (up to k = 6), back to back, in an
order that rotates from stream to stream, on the measured clock, greedy, one thread, the
n-gram drafter; every request's output is checked equal under all three. The policy plans
with a step-cost fit calibrated first on streams of its own (seed 7), as serve_sweep's.

* ``rows``: one per (stream, policy): mean latency of the requests that arrived before the
  shift and of those after, of all, and the summary :func:`measures.summarize` keeps;
* ``ratios``: goodput over plain, goodput over k = 4 and k = 4 over plain: the geometric
  mean over streams of each stream's ratio of mean latency, with a 95% t-interval
  (:func:`~specdec_lib.analysis.intervals.stream_ratio`); above 1, the second is slower.

Writes specdec_lib/results/serve_shift.json.
"""

from __future__ import annotations

import statistics

from measures import calibrate_step_costs, serving_setup, summarize
from tqdm import tqdm

from specdec_lib.analysis.intervals import stream_ratio
from specdec_lib.engine.policies import FixedK, Off
from specdec_lib.engine.traffic import poisson_stream
from specdec_lib.experiments.goodput_policy import GoodputK

from harness import Benchmark

GROUNDED = {"copy": 1.0, "edit": 1.0, "answer": 1.0}
OPEN = {"novel": 1.0}
ALL = GROUNDED | OPEN
FIRST_SEED = 31  # serve_sweep's streams are seeds 11-15 and 21-22, its calibration 6-7
SMALL = {"streams": 2, "requests": 24, "calibration_requests": 16}


def main(argv: list[str] | None = None) -> None:
    bench = Benchmark("serve_shift", __doc__, small=SMALL)
    bench.add("--streams", type=int, default=12)
    bench.add("--requests", type=int, default=160, help="requests a stream")
    bench.add("--rate", type=float, default=50.0, help="arrivals a second")
    bench.add("--capacity", type=int, default=64)
    bench.add("--calibration-requests", type=int, default=60)
    args, target, params, server = serving_setup(bench, argv)

    n = args.calibration_requests
    settings = [(rate, n, args.capacity) for rate in (25, 100, 400)]
    fit = calibrate_step_costs(server, params, settings, ALL)
    half = args.requests / args.rate / 2  # the shift: halfway through the expected arrivals
    seeds = list(range(FIRST_SEED, FIRST_SEED + args.streams))
    rows, latencies = [], {}
    for i, seed in enumerate(tqdm(seeds, desc="streams")):
        # a fresh goodput policy a stream: its memory of the traffic belongs to one server
        policies = [Off(), FixedK(4), GoodputK(fit, max_k=6)]
        outputs = None
        for policy in policies[i % 3 :] + policies[: i % 3]:
            stream = poisson_stream(
                args.rate, args.requests, seed, GROUNDED, params, shift=(half, OPEN)
            )
            result = server(stream, policy, args.capacity)
            got = {s.request.id: s.output for s in result.served}
            if outputs is not None and got != outputs:
                raise AssertionError(f"{policy.name} changed an output on stream {seed}")
            outputs = got
            latency = [s.latency for s in result.served]
            before = [s.latency for s in result.served if s.request.arrival < half]
            after = [s.latency for s in result.served if s.request.arrival >= half]
            latencies[seed, policy.name] = latency
            rows.append(
                {
                    "seed": seed,
                    "policy": policy.name,
                    "before_shift": statistics.mean(before),
                    "after_shift": statistics.mean(after),
                    "requests_before": len(before),
                }
                | summarize(result, args.latency_target)
            )

    def per_stream(name):
        return [(sum(latencies[s, name]), len(latencies[s, name])) for s in seeds]

    ratios = [
        stream_ratio(per_stream(base), per_stream(other)) | {"policy": other, "over": base}
        for other, base in (("goodput", "off"), ("goodput", "k=4"), ("k=4", "off"))
    ]
    for r in ratios:
        print(
            f"{r['policy']:8} over {r['over']:4}: {r['ratio']:.3f} "
            f"[{r['low']:.3f}, {r['high']:.3f}], {r['streams']} streams"
        )
    server.save(
        bench,
        {
            "rate": args.rate,
            "requests": args.requests,
            "tokens_per_request": args.tokens,
            "capacity": args.capacity,
            "shift_at": half,
            "mixes": {"before": GROUNDED, "after": OPEN},
            "seeds": seeds,
            "fit": fit.to_dict(),
            "rows": rows,
            "ratios": ratios,
        },
    )


if __name__ == "__main__":
    main()
