"""Speculation in a server: latency and throughput against the arrival rate, per policy.

A continuously batched server (:mod:`specdec_lib.engine.server`) serves open-loop Poisson
streams of TinyGPT requests at each rate λ, under four draft-length policies (off; k = 4;
k = 4 switched off from batch 8, vLLM V0's rule; goodput, per request and round), with the
n-gram drafter, greedy, one thread, the measured clock (each step costs what it took).

* ``calibration``: steps of separate streams (seed 7) fit the step-cost model that the
  goodput policy plans with and the simulator runs on;
* ``rows``: one per (mix, λ, stream seed, policy): latency percentiles, throughput,
  goodput; the policies run back to back on the same stream, and every request's output is
  checked equal across policies (greedy: speculation never changes the text);
* ``ratios``: per (mix, λ, policy), how many times faster than plain, with a 95% t-interval
  over the streams (:func:`~specdec_lib.analysis.intervals.stream_ratio`; each stream's
  requests paired across policies): a stream's schedule moves with every step's timing, so
  requests of one stream are not independent, and the streams carry both prompt and timing
  spread;
* ``high_load``: the same at a capacity of 256 rows and 256 requests a stream (mix "all";
  off, k = 4 and goodput), where the running batch grows past chapter 10's static batches:
  its ``rows``, ``ratios`` and ``crossings`` (the rate where k = 4 stops paying);
* ``closed_loop``: the same three policies with N users who each send their next request
  when the last one is done (no think time), so the running batch is about N: the ratios
  by N, and the N where k = 4 stops paying;
* ``shift``: a stream whose mix turns from input-grounded to fresh text halfway, each
  request's arrival and latency, per policy;
* ``simulator``: the same server on the modelled clock against the measured one, on a mix
  and seeds the fit never saw; ``modelled_rows``: the sweep's cells on the modelled clock. The
  same server on a GPU-shaped clock is ``benchmarks/serve_roofline.py``.

Run: ``python benchmarks/serve_sweep.py`` (about 20 minutes on one quiet core); writes
``specdec_lib/results/serve_sweep.json`` (``--out`` to write elsewhere).
"""

from __future__ import annotations

import dataclasses

from measures import calibrate_step_costs, serving_setup, summarize
from tqdm import tqdm

from specdec_lib.analysis.crossover import log_crossing
from specdec_lib.analysis.intervals import stream_ratio
from specdec_lib.engine.policies import DisableAbove, FixedK, Off
from specdec_lib.engine.server import ModelledClock
from specdec_lib.engine.traffic import ClosedLoop, mixed_requests, poisson_stream
from specdec_lib.experiments.goodput_policy import GoodputK

from harness import Benchmark

ALL = {"copy": 1.0, "edit": 1.0, "answer": 1.0, "novel": 1.0}
MIXES = {
    "grounded": {"copy": 1.0, "edit": 1.0, "answer": 1.0},
    "open": {"novel": 1.0},
    "all": ALL,
}
RATES = [10, 25, 50, 100, 200, 400]
SEEDS = [11, 12, 13, 14, 15]
HIGH = {"capacity": 256, "requests": 256, "rates": [50, 100, 200, 400, 800], "seeds": [11, 12, 13]}
#: Closed loop: N users, no think time; a stream of max(least, per_user * N) requests.
CLOSED = {"users": [8, 32, 128, 256], "requests_per_user": 2, "least_requests": 64}
SIM_SEEDS = [21, 22]
SHIFT_RATE = 50.0  # requests a second in the traffic-shift stream
SMALL = {
    "requests": 24,
    "rates": [25, 200],
    "seeds": [11, 12],
    "sim_seeds": [21],
    "shift": 40,
    "high": {"capacity": 48, "requests": 48, "rates": [100, 400], "seeds": [11, 12]},
    "closed": {"users": [4, 32], "requests_per_user": 2, "least_requests": 16},
}


def main(argv: list[str] | None = None) -> None:
    bench = Benchmark("serve_sweep", __doc__, small=SMALL)
    bench.add("--requests", type=int, default=60)
    bench.add("--capacity", type=int, default=64)
    bench.add("--shift", type=int, default=160, help="requests in the traffic-shift stream")
    args, target, params, server = serving_setup(bench, argv)
    rates, seeds, sim_seeds, high, closed = (
        getattr(args, k, v)  # --small sets them
        for k, v in (
            ("rates", RATES),
            ("seeds", SEEDS),
            ("sim_seeds", SIM_SEEDS),
            ("high", HIGH),
            ("closed", CLOSED),
        )
    )

    def run(stream, policy, clock=None, capacity=args.capacity):
        if isinstance(policy, GoodputK):  # its memory of the traffic belongs to one server
            policy = dataclasses.replace(policy)
        return server(stream, policy, capacity, clock)

    # 1. Calibration: steps of every shape, on streams no measurement below uses.
    fit = calibrate_step_costs(
        lambda stream, policy, capacity: run(stream, policy, capacity=capacity),
        params,
        [
            (25, args.requests, args.capacity),
            (100, args.requests, args.capacity),
            (400, args.requests, args.capacity),
            (400, high["requests"], high["capacity"]),  # the batches of the high-load block
        ],
        ALL,
    )
    print("step cost fit:", fit)
    policies = [Off(), FixedK(4), DisableAbove(4, 8), GoodputK(fit, max_k=6)]

    def open_loop(n):
        return lambda mix, rate, seed: poisson_stream(rate, n, seed, MIXES[mix], params)

    def closed_loop(mix, users, seed):
        n = max(closed["least_requests"], closed["requests_per_user"] * users)
        return ClosedLoop(mixed_requests(MIXES[mix], n, seed, params), users)

    def sweep(mixes, rates, seeds, policies, make_stream, capacity, label):
        """Every policy on the same streams, back to back, order rotated; each request's
        output checked equal across policies (greedy: speculation never changes the text).
        ``rates`` are arrival rates for an open loop, numbers of users for a closed one."""
        rows, latencies = [], {}
        cells = [(m, r, s) for m in mixes for r in rates for s in seeds]
        for i, (mix, rate, seed) in enumerate(tqdm(cells, desc=label)):
            outputs = None
            order = policies[i % len(policies) :] + policies[: i % len(policies)]
            for policy in order:
                result = run(make_stream(mix, rate, seed), policy, capacity=capacity)
                got = {s.request.id: s.output for s in result.served}
                if outputs is not None and got != outputs:
                    raise AssertionError(f"{policy.name} changed an output: {mix}, {rate}, {seed}")
                outputs = got
                rows.append(
                    {"mix": mix, "rate": rate, "seed": seed, "policy": policy.name}
                    | summarize(result, args.latency_target)
                )
                latencies[mix, rate, seed, policy.name] = [s.latency for s in result.served]
        return rows, latencies

    def compare(mixes, rates, seeds, policies, latencies):
        """Each policy against plain per (mix, rate), and the rate where it stops paying."""
        ratios, crossings = [], {}
        for mix in mixes:
            for policy in policies[1:]:
                per_rate = []
                for rate in rates:
                    base, mine = (
                        [(sum(v), len(v)) for v in (latencies[mix, rate, s, name] for s in seeds)]
                        for name in ("off", policy.name)
                    )
                    ratio = stream_ratio(base, mine)
                    ratios.append(ratio | {"mix": mix, "rate": rate, "policy": policy.name})
                    per_rate.append(ratio)
                crossings[f"{mix}/{policy.name}"] = {
                    key: log_crossing(rates, [r[field] for r in per_rate])
                    for key, field in (("rate", "ratio"), ("early", "low"), ("late", "high"))
                }
        return ratios, crossings

    # 2. The sweep.
    rows, requests = sweep(
        MIXES, rates, seeds, policies, open_loop(args.requests), args.capacity, "sweep"
    )
    cells = [(m, r, s) for m in MIXES for r in rates for s in seeds]

    # The simulator on the sweep's own streams, every policy (deterministic: no stopwatch).
    modelled_rows = []
    for mix, rate, seed in tqdm(cells, desc="modelled"):
        for policy in policies:
            stream = poisson_stream(rate, args.requests, seed, MIXES[mix], params)
            result = run(stream, policy, ModelledClock(fit))
            modelled_rows.append(
                {"mix": mix, "rate": rate, "seed": seed, "policy": policy.name}
                | summarize(result, args.latency_target)
            )

    # 3. Ratios to plain with intervals over streams, and crossings; then the high-load
    # block, where a larger cache lets the running batch grow far past the sweep's.
    ratios, crossings = compare(MIXES, rates, seeds, policies, requests)
    high_policies = [policies[0], policies[1], policies[3]]
    high_rows, high_latencies = sweep(
        ["all"],
        high["rates"],
        high["seeds"],
        high_policies,
        open_loop(high["requests"]),
        high["capacity"],
        "high load",
    )
    high_ratios, high_crossings = compare(
        ["all"], high["rates"], high["seeds"], high_policies, high_latencies
    )
    # A closed loop: N users, each sending its next request when the last is done, so the
    # running batch is about N whatever the policy (the crossing in users is a batch size).
    closed_rows, closed_latencies = sweep(
        ["all"],
        closed["users"],
        high["seeds"],
        high_policies,
        closed_loop,
        high["capacity"],
        "closed loop",
    )
    closed_ratios, closed_crossings = compare(
        ["all"], closed["users"], high["seeds"], high_policies, closed_latencies
    )

    # 4. A traffic shift: input-grounded requests, then fresh text from halfway.
    shift_rows = []
    for seed in seeds[:2]:
        half = args.shift / SHIFT_RATE / 2
        for policy in (policies[0], policies[1], policies[3]):
            stream = poisson_stream(
                SHIFT_RATE, args.shift, seed, MIXES["grounded"], params, shift=(half, MIXES["open"])
            )
            result = run(stream, policy)
            shift_rows += [
                {
                    "seed": seed,
                    "policy": policy.name,
                    "arrival": s.request.arrival,
                    "workload": s.request.workload,
                    "latency": s.latency,
                }
                for s in result.served
            ]

    # 5. The simulator against measurement, on a mix and seeds the fit never saw.
    simulator = []
    for seed in sim_seeds:
        for rate in rates:
            for policy in (policies[0], policies[1]):
                measured, modelled = (
                    summarize(
                        run(poisson_stream(rate, args.requests, seed, ALL, params), policy, clock),
                        args.latency_target,
                    )
                    for clock in (None, ModelledClock(fit))
                )
                simulator.append(
                    {
                        "seed": seed,
                        "rate": rate,
                        "policy": policy.name,
                        "measured_latency": measured["latency_mean"],
                        "modelled_latency": modelled["latency_mean"],
                        "measured_p90": measured["latency_p90"],
                        "modelled_p90": modelled["latency_p90"],
                    }
                )

    result = {
        "requests": args.requests,
        "tokens_per_request": args.tokens,
        "capacity": args.capacity,
        "latency_target": args.latency_target,
        "rates": rates,
        "seeds": seeds,
        "mixes": MIXES,
        "policies": [p.name for p in policies],
        "fit": fit.to_dict(),
        "rows": rows,
        "ratios": ratios,
        "crossings": crossings,
        "high_load": high
        | {"mix": "all", "rows": high_rows, "ratios": high_ratios, "crossings": high_crossings},
        "closed_loop": closed
        | {
            "mix": "all",
            "seeds": high["seeds"],
            "capacity": high["capacity"],
            "rows": closed_rows,
            "ratios": closed_ratios,
            "crossings": closed_crossings,
        },
        "shift": {"rate": SHIFT_RATE, "requests": args.shift, "rows": shift_rows},
        "simulator": {"mix": ALL, "seeds": sim_seeds, "rows": simulator},
        "modelled_rows": modelled_rows,
    }
    server.save(bench, result)


if __name__ == "__main__":
    main()
