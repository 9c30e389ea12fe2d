"""Where fixed k stops paying, pushed further: a closed loop of many users, plain decoding
against k = 4, and what a round costs at that batch.

    python benchmarks/serve_closed.py [--users 512] [--streams 4]
        [--out specdec_lib/results/serve_closed.json]
    python benchmarks/serve_closed.py --small --out /tmp/serve_closed.json   # a quick check

``serve_sweep.py``'s closed loop stops at 256 users and resolves no crossing. Here each of
``--streams`` streams (its own seed) of 2 requests a user, mixed traffic (copy, edit,
answer, novel in equal shares), is served by N users who each send their next request
the moment the last is done, with N cache rows, so the running batch starts at N; plain
decoding and k = 4 (the n-gram drafter) back to back in an order that alternates from
stream to stream, greedy, one thread, the measured clock; every output is checked equal.

* ``rows``: one per (users, stream, policy): the summary :func:`measures.summarize`
  keeps, ``full_round_ms``, the median decoding round while all N rows were running
  (every round of plain decoding's lockstep waves, the first rounds of k = 4's), and
  ``full_rounds``, how many such rounds there were;
* ``ratios``: per N, k = 4 over plain: the geometric mean over streams of each stream's
  ratio of mean latency, with a 95% t-interval
  (:func:`~specdec_lib.analysis.intervals.stream_ratio`); above 1, k = 4 is faster;
* ``round_cost``: per N, a k = 4 round over a plain round with all N rows running (the
  medians' ratio, per stream), the price speculation pays per round at that batch.

Writes specdec_lib/results/serve_closed.json.
"""

from __future__ import annotations

import statistics

from measures import serving_setup, summarize
from tqdm import tqdm

from specdec_lib.analysis.intervals import stream_ratio
from specdec_lib.engine.policies import FixedK, Off
from specdec_lib.engine.traffic import ClosedLoop, mixed_requests

from harness import Benchmark, ints

ALL = {"copy": 1.0, "edit": 1.0, "answer": 1.0, "novel": 1.0}
FIRST_SEED = 51  # serve_sweep's streams are 11-15 and 21-22, serve_shift's 31-42
SMALL = {"users": [8], "streams": 2}


def main(argv: list[str] | None = None) -> None:
    bench = Benchmark("serve_closed", __doc__, small=SMALL)
    bench.add("--users", type=ints, default=[512], help="numbers of users, e.g. 256,512")
    bench.add("--streams", type=int, default=4)
    args, target, params, server = serving_setup(bench, argv)
    rows, latencies, round_cost, ratios = [], {}, [], []
    seeds = list(range(FIRST_SEED, FIRST_SEED + args.streams))
    cells = [(users, seed) for users in args.users for seed in seeds]
    for i, (users, seed) in enumerate(tqdm(cells, desc="closed loop")):
        policies = [Off(), FixedK(4)]
        outputs, full = None, {}
        for policy in policies[i % 2 :] + policies[: i % 2]:
            stream = ClosedLoop(mixed_requests(ALL, 2 * users, seed, params), users)
            result = server(stream, policy, users)
            got = {s.request.id: s.output for s in result.served}
            if outputs is not None and got != outputs:
                raise AssertionError(f"{policy.name} changed an output: {users} users, {seed}")
            outputs = got
            latencies[users, seed, policy.name] = [s.latency for s in result.served]
            full_rounds = [
                s.seconds for s in result.steps if s.kind == "decode" and s.batch == users
            ]
            full[policy.name] = statistics.median(full_rounds)
            rows.append(
                {"users": users, "seed": seed, "policy": policy.name}
                | summarize(result, args.latency_target)
                | {"full_round_ms": 1e3 * full[policy.name], "full_rounds": len(full_rounds)}
            )
        round_cost.append({"users": users, "seed": seed, "ratio": full["k=4"] / full["off"]})
    for users in args.users:

        def per_stream(name, users=users):
            return [(sum(latencies[users, s, name]), len(latencies[users, s, name])) for s in seeds]

        r = stream_ratio(per_stream("off"), per_stream("k=4"))
        ratios.append(r | {"users": users, "policy": "k=4", "over": "off"})
        costs = [c["ratio"] for c in round_cost if c["users"] == users]
        print(
            f"{users} users: k=4 over plain {r['ratio']:.3f} [{r['low']:.3f}, {r['high']:.3f}]; "
            f"a k=4 round with all rows running costs {statistics.median(costs):.2f} plain rounds"
        )
    server.save(
        bench,
        {
            "mix": ALL,
            "users": args.users,
            "requests_per_user": 2,
            "tokens_per_request": args.tokens,
            "seeds": seeds,
            "rows": rows,
            "ratios": ratios,
            "round_cost": round_cost,
        },
    )


if __name__ == "__main__":
    main()
