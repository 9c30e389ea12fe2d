"""What the benchmarks measure that no chapter runs live: the measurement behind a stored
result, which the chapters read back from its file.

A benchmark script imports these as it imports :mod:`harness` (this folder is on
``sys.path`` when a script runs, and the tests put it there in ``tests/conftest.py``).
The library keeps what a chapter calls; a function only the benchmarks call lives here.

* Costs (``wall_clock.py``): :func:`measure_unit_costs`, the seconds of every operation a
  request is made of (:class:`~specdec_lib.analysis.costs.UnitCosts`).
* Serving (``serve_sweep.py``, ``serve_shift.py``, ``serve_roofline.py``): :func:`summarize`,
  what a server run measured; :func:`fit_step_costs`, the step-cost model
  (:class:`~specdec_lib.analysis.costs.StepCostFit`) from measured steps, and
  :func:`calibrate_step_costs`, the runs that make those steps.
* What a draft model predicts of novel text (``novel_workload.py``): its token-by-token
  agreement with the target's continuation (:func:`draft_agreement`), and greedy
  speculation's rounds replayed over it (:func:`greedy_round_openings`,
  :func:`replay_position_counts`), to show the acceptance per draft position is nothing
  more.
* :data:`COPY_SEEDS`: the workload seeds of the copy-accuracy measurement
  (``copy_accuracy.py``).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import torch

from specdec_lib.analysis.costs import StepCostFit, UnitCosts, fit_pass_cost
from specdec_lib.analysis.timing import interleaved, time_inside, time_passes
from specdec_lib.checks import check_int
from specdec_lib.engine.drafters import DraftModelDrafter, NgramDrafter
from specdec_lib.engine.generate import SpeculationStats, generate, speculative_generate
from specdec_lib.engine.model import TinyGPT
from specdec_lib.engine.policies import FixedK, Off
from specdec_lib.engine.sampling import SamplingParams
from specdec_lib.engine.server import KPolicy, ServeRun, Step, Traffic, serve
from specdec_lib.engine.traffic import OpenLoop, poisson_stream
from specdec_lib.engine.weights import load_model

#: Workload seeds of the copy-accuracy measurement (``copy_accuracy.py``).
COPY_SEEDS = (100, 2026, 4242, 7, 12345)


def measure_unit_costs(
    target: TinyGPT,
    draft: TinyGPT,
    prompts: Sequence[Sequence[int]],
    tokens: int,
    repeats: int = 31,
    max_k: int = 16,
) -> tuple[UnitCosts, dict[str, float]]:
    """The :class:`UnitCosts` of decoding ``tokens`` after ``prompts`` (at least two), and
    two figures to record beside them (the pass's cache length, an isolated one-position
    pass).

    Passes over 1 to ``max_k`` + 1 positions, prefills and an n-gram lookup are timed by
    :func:`~specdec_lib.analysis.timing.interleaved`, ``repeats`` times. The host's time
    outside any pass, and one-position passes of both models, are timed inside real
    requests (plain, and speculative at k = 4 with each drafter; five repeats of every
    prompt, by the same loop) with forward hooks: inside the decoding loop a one-position
    pass runs faster than the line through 1..17 positions says (matrix-vector products,
    warm caches).
    """
    if len(prompts) < 2 or tokens < 2:
        raise ValueError(f"prompts must hold >= 2 prompts and tokens be >= 2, got {tokens}")
    prompts = [list(p) for p in prompts]
    context = int(statistics.median(len(p) for p in prompts)) + tokens // 2
    passes = time_passes(target, range(1, max_k + 2), context, repeats=repeats)
    lookup_context = prompts[0] + prompts[1][: tokens // 2]
    params = SamplingParams(max_tokens=tokens)
    lengths = sorted({len(p) + m for p in prompts for m in (0, 1, 2, 4, 8, 16)})

    @torch.inference_mode()
    def prefill(n: int) -> None:
        target(torch.tensor([lookup_context[:1] * n]), target.new_cache(1))

    jobs: dict = {n: (lambda n=n: prefill(n)) for n in lengths}
    jobs["lookup"] = lambda: NgramDrafter().propose(lookup_context, 8, params)
    timed = {
        key: statistics.median(t.wall) for key, t in interleaved(jobs, repeats, warmup=2).items()
    }
    seen: dict[str, list[tuple[float, float, SpeculationStats, list]]] = {}

    def watched(kind: str, ids: list[int]):
        """A job: one request of ``kind``, timed inside by forward hooks, recorded in seen."""
        models = [draft, target] if kind == "draft" else [target]

        def job() -> None:
            s, calls = SpeculationStats(), []

            def request() -> object:
                if kind == "plain":
                    return generate(target, ids, params)
                drafter = NgramDrafter() if kind == "ngram" else DraftModelDrafter(draft)
                return speculative_generate(target, drafter, ids, params, k=4, stats=s)

            seen.setdefault(kind, []).append((*time_inside(models, request, calls), s, calls))

        return job

    kinds = ("plain", "ngram", "draft")
    interleaved({(k, i): watched(k, p) for k in kinds for i, p in enumerate(prompts)}, 5, warmup=0)
    parts = {"step": [(w - i) / tokens for w, i, _, _ in seen["plain"]]}
    parts["one"] = [t for *_, calls in seen["plain"] for n, t in calls if n == 1]
    parts["round"] = [(w - i) / s.rounds - timed["lookup"] for w, i, s, _ in seen["ngram"]]
    host_round = statistics.median(parts["round"])  # the lookup taken out above
    parts["drafted"] = [
        (w - i - s.rounds * host_round) / s.draft_passes for w, i, s, _ in seen["draft"]
    ]
    parts["draft_one"] = [t for *_, calls in seen["draft"] for n, t in calls if n == 1]
    med = {key: statistics.median(v) for key, v in parts.items()}
    costs = UnitCosts(
        pass_fit=fit_pass_cost(passes),
        draft_pass=med["draft_one"],
        lookup=timed["lookup"],
        prefill={n: timed[n] for n in lengths},
        host_step=med["step"],
        host_round=med["round"],
        host_draft_step=med["drafted"],
        single_pass=med["one"],
    )
    return costs, {"context": context, "target_pass_isolated_s": passes[1].median}


def _percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values``, linearly interpolated (NumPy's default);
    nan for no values."""
    return float(np.percentile(values, q)) if len(values) else float("nan")


def summarize(run: ServeRun, latency_target: float) -> dict[str, float]:
    """A run's service: percentiles in seconds, throughput in output tokens per second over
    the run (first arrival to last token), goodput as the share of served requests whose
    end-to-end latency met ``latency_target`` seconds, and the mean decoding batch."""
    done = [s for s in run.served if s.error is None]
    if not done:
        raise ValueError("run must have served at least 1 request without error")
    latency = [s.latency for s in done]
    ttft = [s.ttft for s in done]
    tpot = [s.tpot for s in done if len(s.output) > 1]
    span = max(s.finished for s in done) - min(s.request.arrival for s in done)
    decodes = [s for s in run.steps if s.kind == "decode"]
    out = {"requests": len(done), "refused": len(run.served) - len(done)}
    for name, values in (("latency", latency), ("ttft", ttft), ("tpot", tpot)):
        out[f"{name}_mean"] = float(np.mean(values)) if values else float("nan")
        for q in (50, 90, 99):
            out[f"{name}_p{q}"] = _percentile(values, q)
    out["throughput"] = sum(len(s.output) for s in done) / span
    out["goodput"] = float(np.mean([v <= latency_target for v in latency]))
    out["mean_batch"] = float(np.mean([s.batch for s in decodes])) if decodes else 0.0
    out["tokens_per_pass"] = run.stats.tokens_per_pass / max(out["mean_batch"], 1e-12)
    out["acceptance"] = run.stats.acceptance_rate
    return out


#: Batch sizes are pooled in these bins before a median is taken (a bin is [edge, next edge)).
_BATCH_BINS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 40, 48, 64, 96, 128)


def _weighted_fit(features: Sequence[Sequence[float]], seconds: Sequence[float]) -> list[float]:
    """Least squares of ``seconds`` on ``features``, each step weighted by 1 / its time, so a
    small step counts as much, relatively, as a large one."""
    x, y = np.asarray(features, dtype=np.float64), np.asarray(seconds, dtype=np.float64)
    if len(y) <= x.shape[1] or (y <= 0).any():
        raise ValueError(f"steps must hold more than {x.shape[1]} positive times, got {len(y)}")
    w = 1 / y
    coef, *_ = np.linalg.lstsq(x * w[:, None], y * w, rcond=None)
    return [float(c) for c in coef]


class TimedServer:
    """Serves each request with its own n-gram drafter (:func:`specdec_lib.engine.server.serve`)
    on the measured clock, or on ``clock``, and keeps every run's wall and CPU seconds
    (``walls``, ``cpus``) for the load check (``Benchmark.load(wall=..., cpu=...)``)."""

    def __init__(self, target: TinyGPT) -> None:
        self.target = target
        self.walls: list[float] = []
        self.cpus: list[float] = []

    def __call__(
        self, stream: Traffic, policy: KPolicy, capacity: int, clock: object | None = None
    ) -> ServeRun:
        wall, cpu = time.perf_counter(), time.process_time()
        out = serve(self.target, stream, policy, lambda r: NgramDrafter(), capacity, clock=clock)
        self.walls.append(time.perf_counter() - wall)
        self.cpus.append(time.process_time() - cpu)
        return out

    def save(self, bench, result: dict) -> dict:
        """Save ``result`` with the load check over every run served, the drafter and the
        thread count (``bench`` is the script's ``harness.Benchmark``)."""
        load = bench.load(wall=self.walls, cpu=self.cpus)
        print("BUSY" if load["busy"] else "quiet")
        return bench.save({"load": load, "drafter": "n-gram (n=1..4)", "threads": 1} | result)


def serving_setup(bench, argv: Sequence[str] | None) -> tuple:
    """What every serving benchmark starts with: the options they share (``--tokens`` a
    request, ``--latency-target`` in seconds) added to ``bench`` (a ``harness.Benchmark``)
    and parsed, the target model, the sampling parameters and a :class:`TimedServer`:
    ``(args, target, params, server)``."""
    bench.add("--tokens", type=int, default=48)
    bench.add("--latency-target", type=float, default=0.25)
    args = bench.parse(argv)
    target = load_model("target")
    return args, target, SamplingParams(max_tokens=args.tokens), TimedServer(target)


def calibrate_step_costs(
    serve_run: Callable[[OpenLoop, KPolicy, int], ServeRun],
    params: SamplingParams,
    settings: Sequence[tuple[float, int, int]],
    mix: Mapping[str, float],
    ks: Sequence[int] = (0, 1, 2, 4, 6),
    seed: int = 7,
) -> StepCostFit:
    """The step-cost fit a server benchmark's goodput policy plans with, from steps of every
    shape on streams no measurement uses (``seed``). A first run only warms up (a process's
    first run is slower: it allocates as it goes); then, for each ``(rate, requests,
    capacity)`` of ``settings``, every k of ``ks`` (0: plain) before the next setting, so a
    drift in the machine spreads evenly. ``serve_run(stream, policy, capacity)`` serves."""
    rate, n, capacity = settings[0]
    serve_run(poisson_stream(100, n, seed - 1, mix, params), FixedK(2), capacity)
    steps = []
    for rate, n, capacity in settings:
        for k in ks:
            stream = poisson_stream(rate, n, seed, mix, params)
            steps += serve_run(stream, FixedK(k) if k else Off(), capacity).steps
    return fit_step_costs(steps)


def fit_step_costs(steps: Sequence[Step], min_steps: int = 5) -> StepCostFit:
    """:class:`StepCostFit` from measured steps (``Step.seconds``) of one or more runs: for
    every k asked, the median step of each batch bin holding at least ``min_steps`` rounds
    (a median, so one step slowed by other work cannot move it)."""
    points = {}
    for k in sorted({s.asked for s in steps if s.kind == "decode"}):
        mine = [s for s in steps if s.kind == "decode" and s.asked == k]
        bins = np.searchsorted(_BATCH_BINS, [s.batch for s in mine], side="right")
        here = []
        for b in sorted(set(bins)):
            cell = [s for s, x in zip(mine, bins, strict=True) if x == b]
            if len(cell) >= min_steps:
                here.append(
                    (
                        statistics.median(s.batch for s in cell),
                        statistics.median(s.seconds for s in cell),
                    )
                )
        if here:
            points[k] = tuple(here)
    prefills = [s for s in steps if s.kind == "prefill"]
    if len(points) < 2 or len(prefills) < 3:
        raise ValueError("steps must hold decoding rounds of at least 2 k asked and 3 prefills")
    prefill = _weighted_fit(
        [[1, s.batch * s.width] for s in prefills], [s.seconds for s in prefills]
    )
    return StepCostFit(tuple(points), tuple(points.values()), *prefill)


@torch.inference_mode()
def draft_agreement(
    draft: TinyGPT, prompt: Sequence[int], continuation: Sequence[int]
) -> list[bool]:
    """For each token of a greedy continuation: is it the draft's argmax after the true prefix?

    One teacher-forced pass of the draft over prompt + continuation. Nothing here
    depends on a draft length k: it is what the draft model *predicts*, token by token.
    """
    if not prompt or not continuation:
        raise ValueError("prompt and continuation must both hold at least one token")
    ids = torch.tensor([list(prompt) + list(continuation)])
    if ids.shape[1] > draft.config.block_size:
        raise ValueError(
            f"prompt + continuation must fit the draft's context of {draft.config.block_size} "
            f"tokens, got {ids.shape[1]}"
        )
    rows = draft(ids)[0, len(prompt) - 1 : -1]
    return (rows.argmax(-1) == torch.tensor(list(continuation))).tolist()


def greedy_round_openings(agreement: Sequence[bool], k: int) -> list[tuple[int, int]]:
    """The rounds greedy speculation at draft length ``k`` plays over a continuation.

    Each round is (index of its first drafted token, tokens drafted). The draft's
    j-th token is accepted exactly when the draft's argmax after the true prefix is
    the target's token (``agreement``) and every earlier one was; the round then emits
    the accepted tokens plus one from the target, and never drafts past the end.
    """
    check_int("k", k)
    rounds = []
    t, n = 0, len(agreement)
    while t < n:
        m = min(k, n - t - 1)
        accepted = 0
        while accepted < m and agreement[t + accepted]:
            accepted += 1
        if m:
            rounds.append((t, m))
        t += accepted + 1
    return rounds


def replay_position_counts(agreement: Sequence[bool], k: int) -> tuple[list[int], list[int]]:
    """(proposed, accepted) per draft position, as ``SpeculationStats`` counts them, from agreement.

    If greedy speculation with a draft model gives these counts exactly, every
    acceptance it measured is the draft's token-by-token prediction of the text;
    the round length only decides which tokens open a round.
    """
    proposed, accepted = [0] * k, [0] * k
    for start, m in greedy_round_openings(agreement, k):
        run = 0
        while run < m and agreement[start + run]:
            run += 1
        for i in range(m):
            proposed[i] += 1
            accepted[i] += int(i < run)
    while proposed and not proposed[-1]:
        proposed.pop()
        accepted.pop()
    return proposed, accepted
