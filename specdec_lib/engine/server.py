"""A speculative server: continuous batching, with speculation decided per request and round.

Static batches (:func:`~specdec_lib.engine.batched.speculative_generate_batch`) run until
their slowest request is done, so one slow request sets every row's passes. A server
batches continuously instead, as vLLM and SGLang do (Orca's iteration-level scheduling):

* requests arrive (a :class:`Traffic` source says when) and wait for a free cache row;
* each step, the new ones are prefilled together in a pass of their own, which emits their
  first token, and join the running batch at the round boundary;
* every running request then drafts its own ``k``, chosen by a policy
  (:mod:`.policies`; 0 is a plain step for that row), and one target pass verifies every
  row: :func:`~specdec_lib.engine.generate.speculation_round`, the same round single
  requests and static batches use;
* a request with all its tokens leaves at once and frees its row (:meth:`KVCache.leave`).

Time is kept by a clock. With :class:`MeasuredClock` a step costs what it took on this
machine, and waiting for the next arrival moves the clock without sleeping: a discrete-event
run, scheduled exactly as if requests had arrived in real time. With :class:`ModelledClock`
a step costs what a pass-cost model says: the same server as a simulator. Our pass is a
rectangle: every row is padded to the widest row's positions (vLLM flattens the tokens of
all rows instead), so one row's ``k`` costs every row, and the modelled clock charges that.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

import torch

from specdec_lib.checks import check_int, check_prompt
from specdec_lib.engine.drafters import Drafter
from specdec_lib.engine.generate import Row, SpeculationStats, speculation_round
from specdec_lib.engine.model import TinyGPT
from specdec_lib.engine.sampling import SamplingParams


@dataclass(frozen=True)
class Request:
    """What a client sends: a prompt, its sampling parameters (``max_tokens`` included),
    when it arrives (seconds from the start) and the workload it was drawn from."""

    id: int
    prompt: list[int]
    params: SamplingParams
    arrival: float = 0.0
    workload: str = ""


@dataclass(frozen=True)
class Served:
    """What became of one request: its output, when its first and last tokens came out, its
    rounds as ``(proposed, accepted)`` pairs, or the error that refused it (then no tokens)."""

    request: Request
    output: list[int]
    first_token: float
    finished: float
    rounds: list[tuple[int, int]]
    error: str | None = None

    @property
    def ttft(self) -> float:
        """Time to first token: arrival to the end of the step that emitted it."""
        return self.first_token - self.request.arrival

    @property
    def latency(self) -> float:
        """End-to-end latency: arrival to the last token."""
        return self.finished - self.request.arrival

    @property
    def tpot(self) -> float:
        """Time per output token after the first (nan for a one-token output)."""
        n = len(self.output)
        return (self.finished - self.first_token) / (n - 1) if n > 1 else float("nan")


class Traffic(Protocol):
    """Where requests come from. ``arrivals(now)`` hands over every request due by ``now``;
    ``next_arrival()`` says when the next one is due (``None``: no more will come unless a
    request finishes); ``finished`` tells the source a request is done (a closed loop's
    user then sends the next)."""

    def arrivals(self, now: float) -> list[Request]: ...

    def next_arrival(self) -> float | None: ...

    def finished(self, served: Served, now: float) -> None: ...


class KPolicy(Protocol):
    """Chooses each running request's draft length for the next round. ``rows`` are the
    running requests (their ``rounds`` hold what they proposed and accepted so far) and
    ``waiting`` how many wait for a row. ``max_k`` bounds what it may choose."""

    name: str
    max_k: int

    def choose(self, rows: Sequence[Row], waiting: int) -> list[int]: ...


@dataclass(frozen=True)
class Step:
    """One pass of the server: a prefill of ``batch`` newcomers ``width`` tokens wide (the
    longest prompt), or a decoding round of ``batch`` rows ``width`` positions wide (1 + the
    widest draft) after asking up to ``asked`` drafted tokens of each (a drafter may propose
    fewer), with ``draft_passes`` draft-model passes among them; ``seconds`` is what it cost
    and ``end`` when it ended."""

    kind: str
    batch: int
    width: int
    asked: int = 0
    draft_passes: int = 0
    seconds: float = 0.0
    end: float = 0.0


class MeasuredClock:
    """A step costs the seconds it took here (``time.perf_counter``)."""

    name = "measured"

    def run(self, step: Callable[[], Step]) -> tuple[float, Step]:
        start = time.perf_counter()
        shape = step()
        return time.perf_counter() - start, shape


class _StepCost(Protocol):
    """Seconds a step of this shape costs (a pass-cost model)."""

    def seconds(self, step: Step) -> float: ...


class ModelledClock:
    """A step costs what ``cost`` predicts for its shape: the server as a simulator."""

    name = "modelled"

    def __init__(self, cost: _StepCost) -> None:
        self.cost = cost

    def run(self, step: Callable[[], Step]) -> tuple[float, Step]:
        shape = step()
        return self.cost.seconds(shape), shape


@dataclass
class ServeRun:
    """A server run: every request's fate in the order they finished, every step, and the
    counts of every round (:class:`SpeculationStats`)."""

    policy: str
    clock: str
    served: list[Served] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    stats: SpeculationStats = field(default_factory=SpeculationStats)


@torch.inference_mode()
def serve(
    target: TinyGPT,
    traffic: Traffic,
    policy: KPolicy,
    make_drafter: Callable[[Request], Drafter],
    capacity: int = 32,
    generator: torch.Generator | None = None,
    clock: MeasuredClock | ModelledClock | None = None,
    progress: Callable[[int], None] | None = None,
) -> ServeRun:
    """Serve ``traffic`` until it has no more requests; see the module's docstring.

    ``capacity`` is the most requests decoded at once (cache rows); ``make_drafter`` gives
    each request its own drafter. A request that cannot be served (a prompt the model cannot
    read, or no room in the context for its tokens and a round's drafts) is refused with its
    error and the others go on. ``progress`` is called with the number of requests done.
    """
    check_int("capacity", capacity)
    clock = MeasuredClock() if clock is None else clock
    run = ServeRun(policy.name, clock.name)
    cache = target.new_cache(0, capacity=capacity)
    running: list[Row] = []
    meta: list[tuple[Request, float]] = []  # each running row's request and first-token time
    waiting: deque[Request] = deque()
    now = 0.0

    def finish(served: Served) -> None:
        run.served.append(served)
        traffic.finished(served, now)
        if progress is not None:
            progress(len(run.served))

    def timed(step: Callable[[], Step]) -> None:
        nonlocal now
        seconds, shape = clock.run(step)
        now += seconds
        run.steps.append(replace(shape, seconds=seconds, end=now))

    def prefill(joining: list[tuple[Request, Row]]) -> Step:
        """The newcomers in a pass of their own (it emits their first token); then they join."""
        rows = [row for _, row in joining]
        fresh = target.new_cache(len(rows))
        speculation_round(target, fresh, rows, generator)
        for b, row in enumerate(rows):
            cache.join(fresh, b)
            running.append(row)
        return Step("prefill", len(rows), max(row.n_prompt for row in rows))

    def decode() -> Step:
        """One round for every running request, each with the draft length the policy chose."""
        for row, k in zip(running, policy.choose(running, len(waiting)), strict=True):
            row.k = k
        before = run.stats.draft_passes
        speculation_round(target, cache, running, generator, run.stats)
        width = 1 + max(row.rounds[-1][0] for row in running)  # every row just ran a round
        asked = max(row.asked[-1] for row in running)
        return Step("decode", len(running), width, asked, run.stats.draft_passes - before)

    def retire() -> None:
        """Every finished request leaves at once, freeing its row."""
        for b in reversed(range(len(running))):
            if running[b].left > 0:
                continue
            row, (request, first) = running[b], meta[b]
            cache.leave(b)  # the last row moves into b: mirror it
            running[b], meta[b] = running[-1], meta[-1]
            running.pop()
            meta.pop()
            finish(Served(request, row.output, first, now, list(row.rounds)))

    while True:
        waiting.extend(traffic.arrivals(now))
        if not waiting and not running:
            due = traffic.next_arrival()
            if due is None:
                return run
            now = max(now, due)
            continue
        joining: list[tuple[Request, Row]] = []
        while waiting and len(running) + len(joining) < capacity:
            request = waiting.popleft()
            try:
                room = request.params.max_tokens + policy.max_k
                ids = check_prompt(request.prompt, target.config, room)
                drafter = make_drafter(request)
            except ValueError as error:
                finish(Served(request, [], now, now, [], error=str(error)))
                continue
            joining.append((request, Row(ids, len(ids), request.params, drafter, 0)))
        if joining:
            timed(lambda joining=joining: prefill(joining))
            meta += [(request, now) for request, _ in joining]
            retire()
        if running:
            timed(decode)
            retire()
