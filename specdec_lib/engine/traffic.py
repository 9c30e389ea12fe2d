"""Traffic for a server (:mod:`.server`): who sends which request when.

* :class:`OpenLoop`: requests arrive at times fixed in advance, whatever the server does
  (:func:`poisson_stream`: a seeded Poisson process at rate λ, the usual model of many
  independent users); if the server falls behind, the queue grows.
* :class:`ClosedLoop`: N users, each sending its next request when the last one is done
  (after a think time): the load adapts to the server, as a benchmark with N concurrent
  clients does.

A stream's requests come from a workload mix (copy, edit, answer, novel: what the target
writes, :mod:`specdec_lib.text.language`), and a mix may change at a given time (a traffic
shift: acceptance collapses when input-grounded traffic turns into fresh text).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence

import numpy as np

from specdec_lib.checks import check_int, check_real
from specdec_lib.engine.sampling import SamplingParams
from specdec_lib.engine.server import Request, Served
from specdec_lib.text.language import WORKLOADS, workload_prompts
from specdec_lib.text.tokenizer import Tokenizer


class _Due:
    """Requests handed over once their arrival time has come, in arrival order."""

    _due: deque[Request]

    def arrivals(self, now: float) -> list[Request]:
        out = []
        while self._due and self._due[0].arrival <= now:
            out.append(self._due.popleft())
        return out

    def next_arrival(self) -> float | None:
        return self._due[0].arrival if self._due else None


class OpenLoop(_Due):
    """Requests that arrive at their own ``arrival`` times, whatever the server does."""

    def __init__(self, requests: Sequence[Request]) -> None:
        if not requests:
            raise ValueError("requests must hold at least 1 request, got an empty stream")
        self._due = deque(sorted(requests, key=lambda r: (r.arrival, r.id)))
        self.requests = list(self._due)

    def finished(self, served: Served, now: float) -> None:
        """An open loop does not wait for answers."""


class ClosedLoop(_Due):
    """``users`` clients, each sending its next request ``think`` seconds after its last one
    is done; the requests are sent in order, the first ``users`` of them at time 0."""

    def __init__(self, requests: Sequence[Request], users: int, think: float = 0.0) -> None:
        if not requests:
            raise ValueError("requests must hold at least 1 request, got an empty stream")
        check_int("users", users)
        self.think = check_real("think", think, "a number >= 0", lambda v: v >= 0)
        self.requests = list(requests)
        self._queue = deque(self.requests)
        self._due = deque()
        for _ in range(min(users, len(self._queue))):
            self._send(0.0)

    def _send(self, at: float) -> None:
        if self._queue:
            r = self._queue.popleft()
            self._due.append(Request(r.id, r.prompt, r.params, at, r.workload))

    def finished(self, served: Served, now: float) -> None:
        self._send(now + self.think)


def poisson_arrivals(rate: float, n: int, seed: int) -> list[float]:
    """``n`` arrival times of a Poisson process at ``rate`` requests per second: independent
    exponential gaps, seeded, the first one after time 0."""
    rate = check_real("rate", rate, "a number > 0 (requests per second)", lambda v: v > 0)
    gaps = np.random.default_rng(check_int("seed", seed, 0)).exponential(
        1 / rate, check_int("n", n)
    )
    return [float(t) for t in np.cumsum(gaps)]


def mixed_requests(
    mix: Mapping[str, float],
    n: int,
    seed: int,
    params: SamplingParams,
    arrivals: Sequence[float] | None = None,
    shift: tuple[float, Mapping[str, float]] | None = None,
) -> list[Request]:
    """``n`` requests drawn from a workload ``mix`` (workload: share), each workload's prompts
    from its own seeded stream. With ``shift=(time, mix2)``, requests arriving at or after
    ``time`` are drawn from ``mix2`` instead (a traffic shift). ``arrivals`` default to 0."""
    n = check_int("n", n)
    arrivals = [0.0] * n if arrivals is None else list(arrivals)
    if len(arrivals) != n:
        raise ValueError(f"arrivals must hold n={n} times, got {len(arrivals)}")
    mixes = [_check_mix("mix", mix)]
    if shift is not None:
        at = check_real("shift time", shift[0], "a number >= 0", lambda v: v >= 0)
        mixes.append(_check_mix("shift mix", shift[1]))
    rng = np.random.default_rng(check_int("seed", seed, 0))
    names = []
    for t in arrivals:
        m = mixes[1] if shift is not None and t >= at else mixes[0]
        names.append(str(rng.choice(list(m), p=np.array(list(m.values())) / sum(m.values()))))
    tokenizer = Tokenizer()
    prompts = {  # each workload's prompts are its own seeded stream, used in order
        w: iter(workload_prompts(w, names.count(w), seed)) for w in set(names)
    }
    return [
        Request(i, tokenizer.encode(next(prompts[w])), params, t, w)
        for i, (w, t) in enumerate(zip(names, arrivals, strict=True))
    ]


def poisson_stream(
    rate: float,
    n: int,
    seed: int,
    mix: Mapping[str, float],
    params: SamplingParams,
    shift: tuple[float, Mapping[str, float]] | None = None,
) -> OpenLoop:
    """An open loop of ``n`` requests from ``mix`` arriving as a Poisson process at ``rate``."""
    return OpenLoop(mixed_requests(mix, n, seed, params, poisson_arrivals(rate, n, seed), shift))


def _check_mix(name: str, mix: Mapping[str, float]) -> dict[str, float]:
    if not isinstance(mix, Mapping) or not mix:
        raise ValueError(f"{name} must map workloads to shares, got {mix!r}")
    for w, share in mix.items():
        if w not in WORKLOADS:
            raise ValueError(f"{name} workloads must be among {sorted(WORKLOADS)}, got {w!r}")
        check_real(f"{name} share of {w}", share, "a number >= 0", lambda v: v >= 0)
    if sum(mix.values()) <= 0:
        raise ValueError(f"{name} shares must add up to more than 0, got {dict(mix)}")
    return dict(mix)
