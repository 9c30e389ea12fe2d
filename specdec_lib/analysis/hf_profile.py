"""Where a greedy generation spends its time: the course's engine against transformers.

Why this exists: on the same weights, with the same passes, the course's engine and
transformers' ``generate`` take different wall time, and a ratio alone does not say why.
:func:`profile_jobs` runs each generation under ``torch.profiler`` (CPU) and splits its
time into parts that both sides have:

* inside the model's forward passes (marked by hooks on the top-level module, so both
  sides' passes are counted the same way): *matrix products* (``aten::linear``,
  ``matmul``, ``mm``, ... with their dispatch), the *attention* kernel
  (``aten::scaled_dot_product_attention``), *other operators* (norms, rotary positions,
  the key smear, activations, cache writes, reshapes), and *Python in forward*: the
  pass's time not inside any operator (module calls, argument handling, the hooks);
* outside them, regions marked by wrapping the library functions that do the work:
  *drafting*, *logits processors*, *stopping criteria*, *cache bookkeeping* (rollback),
  *input preparation* and *setup*; whatever is left (the decoding loop's own Python and
  operators, acceptance among them) is the *rest of the loop*.

The wrappers are installed only while a profile runs and removed after it. Operator
calls are counted at the top level only (an operator called by another operator is
part of its caller): each top-level call is one trip from Python into PyTorch, the
fixed cost that dominates a model this small.

The profiler records every operator, which costs time of its own: a profiled run is
slower than an unprofiled one, and the more operator calls a run makes, the more so.
So each repeat also runs the job once without the profiler, and :class:`Profile` keeps
both times; shares of the profiled time are what the profile can say, wall time is the
unprofiled measurement's to give.
"""

from __future__ import annotations

import gc
import os
import statistics
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from functools import wraps
from typing import Any

import torch
from torch.autograd.profiler import record_function
from torch.profiler import ProfilerActivity, profile

from specdec_lib.checks import check_ids, check_int
from specdec_lib.engine.drafters import Drafter
from specdec_lib.engine.generate import generate, speculative_generate
from specdec_lib.engine.model import KVCache, TinyGPT
from specdec_lib.engine.sampling import SamplingParams

LABEL = "specdec::"  # prefix of the ranges this module records
FORWARD, NORM, GENERATION = f"{LABEL}forward", f"{LABEL}norm", f"{LABEL}generation"
_MATRIX_OPS = frozenset(
    {"aten::linear", "aten::matmul", "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"}
)
_ATTENTION_OPS = frozenset({"aten::scaled_dot_product_attention"})
FORWARD_PARTS = ("matrix products", "attention", "norms", "other operators", "Python in forward")
HOST_PARTS = (
    "drafting",
    "logits processors",
    "stopping criteria",
    "cache bookkeeping",
    "input preparation",
    "setup",
    "rest of the loop",
)
PARTS = FORWARD_PARTS + HOST_PARTS
JOBS = ("course plain", "transformers plain", "course speculative", "transformers prompt lookup")


@dataclass(frozen=True)
class SideJob:
    """One generation to time or profile: ``run`` decodes; ``model`` is the module whose
    forward calls are the passes; ``regions`` names the host work to mark, each part as
    ``(owner, attribute)`` pairs to wrap; the outermost range's own time goes to
    ``outer`` (``"setup"`` or ``"rest of the loop"``)."""

    run: Callable[[], list[int]]
    model: torch.nn.Module
    regions: Mapping[str, Sequence[tuple[object, str]]]
    outer: str


@dataclass(frozen=True)
class Profile:
    """One job's profile: the fastest of its repeats, part by part (``seconds``, summing to
    ``profiled``), with the unprofiled wall time beside them.

    ``forward_ops`` and ``host_ops`` count top-level operator calls inside and outside the
    forward passes (``forward_op_names``: the former by name, ``host_ops_by_part``: the
    latter by part); ``forward_python_calls`` and
    ``host_python_calls`` Python function calls (:func:`python_calls`, one unprofiled run;
    ``forward_python_functions`` and ``host_python_functions``: by function);
    ``region_calls`` the calls of each marked host part; ``recorded_ops`` every operator
    the profiler recorded, nested ones included (what its own cost scales with).
    ``unprofiled`` and ``unprofiled_forward`` are the wall time of the fastest run without
    the profiler, and the part of it inside forward passes.
    """

    passes: int
    forward_ops: int
    host_ops: int
    forward_python_calls: int
    host_python_calls: int
    recorded_ops: int
    seconds: dict[str, float]
    unprofiled: float
    unprofiled_forward: float
    repeats: int
    forward_op_names: dict[str, int] = field(default_factory=dict)
    host_ops_by_part: dict[str, int] = field(default_factory=dict)
    forward_python_functions: dict[str, int] = field(default_factory=dict)
    host_python_functions: dict[str, int] = field(default_factory=dict)
    region_calls: dict[str, int] = field(default_factory=dict)

    @property
    def profiled(self) -> float:
        return sum(self.seconds.values())

    @property
    def forward(self) -> float:
        """Seconds inside the forward passes."""
        return sum(self.seconds[p] for p in FORWARD_PARTS)

    @property
    def host(self) -> float:
        """Seconds outside the forward passes."""
        return sum(self.seconds[p] for p in HOST_PARTS)


def _definer(owner: object, attribute: str) -> object:
    """The class in ``owner``'s MRO that defines ``attribute`` (or ``owner`` itself, for a
    module or an instance attribute), so a wrapper replaces the definition everyone sees."""
    if isinstance(owner, type):
        for cls in owner.__mro__:
            if attribute in cls.__dict__:
                return cls
    if not hasattr(owner, attribute):
        raise ValueError(f"{owner!r} has no attribute {attribute!r} to mark")
    return owner


@contextmanager
def _marked(
    owner: object, attribute: str, label: str, calls: Counter, depth: Counter
) -> Iterator[None]:
    """Temporarily wrap ``owner.attribute`` so each call is a profiler range ``label``.

    ``calls[label]`` counts the calls not made from inside another call of the same part
    (``depth`` tracks that), so a part whose marked functions call each other (a drafter's
    ``propose`` that calls its ``draft``) counts one call per proposal."""
    target = _definer(owner, attribute)
    original = target.__dict__.get(attribute) if hasattr(target, "__dict__") else None
    function = getattr(owner, attribute) if original is None else original
    descriptor = type(original) if isinstance(original, staticmethod | classmethod) else None
    inner = function.__func__ if descriptor is not None else function

    @wraps(inner)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls[label] += depth[label] == 0
        depth[label] += 1
        try:
            with record_function(f"{LABEL}{label}"):
                return inner(*args, **kwargs)
        finally:
            depth[label] -= 1

    setattr(target, attribute, wrapper if descriptor is None else descriptor(wrapper))
    try:
        yield
    finally:
        if original is None:
            delattr(target, attribute)  # an instance attribute set here
        else:
            setattr(target, attribute, original)


def _norms(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The RMS norms of ``model``: the course's ``RMSNorm`` and transformers' ``LlamaRMSNorm``."""
    return [m for m in model.modules() if type(m).__name__.endswith("RMSNorm")]


@contextmanager
def _passes_marked(model: torch.nn.Module) -> Iterator[None]:
    """Make every forward call of ``model`` a profiler range ``FORWARD``, and every call of
    one of its norms a range ``NORM``."""
    open_ranges: list[record_function] = []

    def opener(label: str) -> Callable[..., None]:
        return lambda *_: open_ranges.append(record_function(label).__enter__())

    def leave(*_: Any) -> None:
        open_ranges.pop().__exit__(None, None, None)

    handles = []
    for module, label in [(model, FORWARD), *((norm, NORM) for norm in _norms(model))]:
        handles.append(module.register_forward_pre_hook(opener(label)))
        handles.append(module.register_forward_hook(leave))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
        while open_ranges:  # a forward pass that raised
            open_ranges.pop().__exit__(None, None, None)


@dataclass
class _Open:
    """A range or operator still open while the events are read in time order."""

    end: int
    part: str | None  # the host part its own time goes to; None inside a forward pass
    in_forward: bool = False
    in_norm: bool = False
    under_op: bool = False


def _op_part(name: str) -> str:
    if name in _MATRIX_OPS:
        return "matrix products"
    return "attention" if name in _ATTENTION_OPS else "other operators"


def _split(events: Sequence[Any], outer: str) -> dict[str, Any]:
    """Seconds per part, operator counts and passes from one profiled generation.

    ``events`` are the profiler's raw events (``name()``, ``start_ns()``, ``end_ns()``);
    nesting is read from their times, on one thread: an event lies inside every event
    still open when it starts. A host range's own time is its duration less that of the
    ranges and passes directly inside it; a pass's Python time is its duration less that
    of its norms and of the operators it called directly.
    """
    seconds = dict.fromkeys(PARTS, 0.0)
    names: Counter = Counter()
    passes = recorded = 0
    host_ops: Counter = Counter()
    stack: list[_Open] = []
    for event in sorted(events, key=lambda e: (e.start_ns(), -e.end_ns())):
        start, end, name = event.start_ns(), event.end_ns(), event.name()
        while stack and start >= stack[-1].end:
            stack.pop()
        parent = stack[-1] if stack else None
        duration = (end - start) * 1e-9
        if not name.startswith(LABEL):
            recorded += 1
            if parent is not None and not parent.under_op:  # called from Python
                if not parent.in_forward:
                    host_ops[parent.part] += 1
                else:
                    names[name] += 1
                    if not parent.in_norm:
                        seconds[_op_part(name)] += duration
                        seconds["Python in forward"] -= duration
            stack.append(_Open(end, None, parent is not None and parent.in_forward, under_op=True))
        elif parent is not None and parent.in_forward:  # a norm, or marked code in a pass
            if name == NORM and not parent.in_norm:
                seconds["norms"] += duration
                seconds["Python in forward"] -= duration
            stack.append(_Open(end, None, True, parent.in_norm or name == NORM))
        else:
            if name == FORWARD:
                passes += 1
                part = None
                seconds["Python in forward"] += duration
            else:
                part = outer if name == GENERATION else name.removeprefix(LABEL)
                seconds[part] += duration
            if parent is not None and parent.part is not None:
                seconds[parent.part] -= duration
            stack.append(_Open(end, part, name == FORWARD))
    return {
        "seconds": seconds,
        "names": names,
        "passes": passes,
        "host_ops": host_ops,
        "recorded": recorded,
    }


def python_calls(job: SideJob) -> tuple[Counter, Counter]:
    """Python function calls made by one run of ``job``, inside and outside its forward
    passes, by function (``module.qualified_name``), from ``sys.setprofile``'s call
    events; builtins and operators are not Python functions and are not counted."""
    counts: tuple[Counter, Counter] = (Counter(), Counter())  # outside, inside
    depth = [0]

    def enter(*_: Any) -> None:
        depth[0] += 1

    def leave(*_: Any) -> None:
        depth[0] -= 1

    def tracer(frame: Any, event: str, _arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            counts[depth[0] > 0][f"{frame.f_globals.get('__name__')}.{code.co_qualname}"] += 1

    handles = [job.model.register_forward_pre_hook(enter), job.model.register_forward_hook(leave)]
    previous = sys.getprofile()
    sys.setprofile(tracer)
    try:
        job.run()
    finally:
        sys.setprofile(previous)
        for handle in handles:
            handle.remove()
    return counts[1], counts[0]


@contextmanager
def _stderr_silenced() -> Iterator[None]:
    """Send file descriptor 2 to /dev/null for a moment: the profiler's C++ side prints a
    line on every start and stop (``USDT: ... profiler_start``), which no setting turns
    off and which would fill a notebook cell's output. Errors still raise in Python."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _profile_once(job: SideJob) -> tuple[dict[str, Any], Counter]:
    """Run ``job`` once under the profiler, with its passes and host regions marked."""
    calls: Counter = Counter()
    depth: Counter = Counter()
    with ExitStack() as stack:
        for part, places in job.regions.items():
            if part not in HOST_PARTS:
                raise ValueError(f"regions must name parts in {HOST_PARTS}, got {part!r}")
            for owner, attribute in places:
                stack.enter_context(_marked(owner, attribute, part, calls, depth))
        stack.enter_context(_passes_marked(job.model))
        prof = profile(activities=[ProfilerActivity.CPU])
        with _stderr_silenced():
            prof.start()
        try:
            with record_function(GENERATION):
                job.run()
        finally:
            with _stderr_silenced():
                prof.stop()
    split = _split(prof.profiler.kineto_results.events(), job.outer)
    # A finished profile sits in reference cycles, holding every recorded event (about
    # 150 MB for a plain generation) until the cycle collector runs: collect it now, or
    # a few profiles in a row take gigabytes.
    del prof
    gc.collect()
    return split, calls


def profile_jobs(
    jobs: Mapping[str, SideJob], repeats: int = 3, warmup: int = 1, seed: int = 0
) -> dict[str, Profile]:
    """Profile every job ``repeats`` times, and run it as often without the profiler (its
    wall time and time inside forward passes from :func:`~specdec_lib.analysis.timing.time_inside`),
    all of these taking turns in the course's one timing loop
    (:func:`~specdec_lib.analysis.timing.interleaved`, after ``warmup`` untimed runs of
    each); per part, the fastest of the repeats.

    Fastest, not median: other work on the machine only ever adds time, and it lands on
    whichever part was running, so the fastest time of a part is the closest to its own
    cost (``timeit``'s reasoning), and a part of a few milliseconds is not swamped by one
    burst of load.

    The counts (passes, operator calls) must be the same in every repeat, since greedy
    decoding is deterministic; a difference raises, rather than being averaged away.
    """
    from specdec_lib.analysis.timing import interleaved, time_inside

    check_int("repeats", repeats)
    check_int("warmup", warmup, 0)
    if not jobs:
        raise ValueError("jobs must name at least one job")
    runs: dict[str, list[tuple[dict[str, Any], Counter]]] = {name: [] for name in jobs}
    plain: dict[str, list[tuple[float, float]]] = {name: [] for name in jobs}

    def profiled(name: str) -> Callable[[], None]:
        return lambda: runs[name].append(_profile_once(jobs[name]))

    def unprofiled(name: str) -> Callable[[], None]:
        return lambda: plain[name].append(time_inside([jobs[name].model], jobs[name].run))

    loop: dict[tuple[str, str], Callable[[], None]] = {}
    for name in jobs:
        loop["profiled", name] = profiled(name)
        loop["unprofiled", name] = unprofiled(name)
    interleaved(loop, repeats, seed=seed, warmup=warmup)
    out = {}
    for name, results in runs.items():
        results = results[warmup:]
        walls = plain[name][warmup:]
        first, calls = results[0]
        for other, other_calls in results[1:]:
            same = (other["names"], other["passes"], other["host_ops"], other_calls)
            if same != (first["names"], first["passes"], first["host_ops"], calls):
                raise RuntimeError(f"job {name!r} made different calls in different repeats")
        forward_functions, host_functions = python_calls(jobs[name])
        out[name] = Profile(
            passes=first["passes"],
            forward_ops=sum(first["names"].values()),
            host_ops=first["host_ops"].total(),
            host_ops_by_part=dict(first["host_ops"]),
            forward_python_calls=forward_functions.total(),
            host_python_calls=host_functions.total(),
            recorded_ops=int(statistics.median(r["recorded"] for r, _ in results)),
            seconds={p: min(r["seconds"][p] for r, _ in results) for p in PARTS},
            unprofiled=min(walls)[0],
            unprofiled_forward=min(walls)[1],
            repeats=repeats,
            forward_op_names=dict(first["names"]),
            forward_python_functions=dict(forward_functions),
            host_python_functions=dict(host_functions),
            region_calls=dict(calls),
        )
    return out


def _engine_modules_holding(name: str) -> list[tuple[object, str]]:
    """Every ``specdec_lib.engine`` module that holds a function ``name``: the places a
    wrapper must replace it for the engine's calls (``from ... import name``) to go through
    the wrapper, wherever the engine's code keeps them."""
    return [
        (module, name)
        for module_name, module in list(sys.modules.items())
        if module_name.startswith("specdec_lib.engine") and callable(getattr(module, name, None))
    ]


def _course_regions(drafter: Drafter | None) -> dict[str, list[tuple[object, str]]]:
    """The course's host work: the drafter's proposals, the cache's rollback, the checks
    and cache allocation before decoding. The loop itself (tensors in, argmax, acceptance,
    counting) is the rest."""
    regions: dict[str, list[tuple[object, str]]] = {
        "cache bookkeeping": [(KVCache, "crop")],
        "setup": [*_engine_modules_holding("check_prompt"), (TinyGPT, "new_cache")],
    }
    if drafter is not None:
        # The engine calls a library drafter's ``draft`` (its arguments already checked)
        # and any other drafter's ``propose``.
        regions["drafting"] = [(drafter, m) for m in ("propose", "draft") if hasattr(drafter, m)]
    return regions


def _transformers_regions() -> dict[str, list[tuple[object, str]]]:
    """transformers' host work, by the functions ``generate`` calls for it (5.x names).

    The decoding loops (``_sample``, ``_assisted_decoding``) are marked as the rest of the
    loop, so that what ``generate`` does around them (validating and copying the
    generation config, building processors, criteria and cache) comes out as setup.
    """
    from transformers import GenerationMixin
    from transformers.cache_utils import Cache
    from transformers.generation.candidate_generator import PromptLookupCandidateGenerator
    from transformers.generation.logits_process import LogitsProcessorList
    from transformers.generation.stopping_criteria import StoppingCriteriaList

    return {
        "drafting": [
            (PromptLookupCandidateGenerator, "get_candidates"),
            (PromptLookupCandidateGenerator, "update_candidate_strategy"),
        ],
        "logits processors": [(LogitsProcessorList, "__call__")],
        "stopping criteria": [(StoppingCriteriaList, "__call__")],
        "cache bookkeeping": [(Cache, "crop")],
        "input preparation": [
            (GenerationMixin, "prepare_inputs_for_generation"),
            (GenerationMixin, "_update_model_kwargs_for_generation"),
        ],
        "rest of the loop": [
            (GenerationMixin, "_sample"),
            (GenerationMixin, "_assisted_decoding"),
        ],
    }


def side_by_side_jobs(
    target: TinyGPT,
    hf_target: torch.nn.Module,
    prompt_token_ids: Sequence[int],
    n_tokens: int,
    k: int,
) -> dict[str, SideJob]:
    """The four generations compared: the course's plain greedy decoding and transformers',
    and greedy speculation at ``k`` in each: the course's engine with transformers' own
    n-gram rule (:class:`~specdec_lib.analysis.hf_compare.LeftmostNgramDrafter`, so both
    sides make the same passes) against transformers' prompt lookup.

    Each job returns its new tokens; all four return the same ones.
    """
    from specdec_lib.analysis.hf_compare import LeftmostNgramDrafter, hf_generate

    check_int("n_tokens", n_tokens)
    check_int("k", k)
    if not isinstance(target, TinyGPT):
        raise ValueError(f"target must be a TinyGPT, got {type(target).__name__}")
    ids = check_ids("prompt_token_ids", prompt_token_ids, target.config.vocab_size)
    if not ids or len(ids) + n_tokens > target.config.block_size:
        raise ValueError(
            f"prompt_token_ids must hold 1 to {target.config.block_size - n_tokens} tokens "
            f"(context window {target.config.block_size}, n_tokens {n_tokens}), got {len(ids)}"
        )
    params = SamplingParams(temperature=0, max_tokens=n_tokens)
    drafter = LeftmostNgramDrafter(vocab_size=target.config.vocab_size)
    hf_regions = _transformers_regions()
    return {
        "course plain": SideJob(
            lambda: generate(target, ids, params), target, _course_regions(None), "rest of the loop"
        ),
        "transformers plain": SideJob(
            lambda: hf_generate(hf_target, ids, n_tokens)[0], hf_target, hf_regions, "setup"
        ),
        "course speculative": SideJob(
            lambda: speculative_generate(target, drafter, ids, params, k=k),
            target,
            _course_regions(drafter),
            "rest of the loop",
        ),
        "transformers prompt lookup": SideJob(
            lambda: hf_generate(hf_target, ids, n_tokens, prompt_lookup_num_tokens=k)[0],
            hf_target,
            hf_regions,
            "setup",
        ),
    }


def _check_profiles(profiles: Mapping[str, Profile]) -> list[str]:
    if not profiles or not all(isinstance(p, Profile) for p in profiles.values()):
        raise ValueError("profiles must map job names to Profile objects (from profile_jobs)")
    return list(profiles)


_PACKAGES = ("torch", "transformers", "specdec_lib")


def calls_by_package(functions: Mapping[str, int]) -> dict[str, int]:
    """Python calls summed by the package that defines each function (:data:`_PACKAGES`,
    and ``"other"``: the standard library's ``dataclasses``, ``copy``, ``inspect``, ...)."""
    out = dict.fromkeys((*_PACKAGES, "other"), 0)
    for function, calls in functions.items():
        package = function.split(".", 1)[0]
        out[package if package in _PACKAGES else "other"] += calls
    return out


def count_table(profiles: Mapping[str, Profile]) -> str:
    """Passes, and operator and Python function calls per pass inside and outside them
    (the calls in forward also by package), one column per job, as text."""
    names = _check_profiles(profiles)

    def in_package(package: str) -> Callable[[Profile], str]:
        return lambda p: f"{calls_by_package(p.forward_python_functions)[package] / p.passes:.1f}"

    rows = [
        ("target passes", lambda p: f"{p.passes}"),
        ("operators per pass, in forward", lambda p: f"{p.forward_ops / p.passes:.1f}"),
        ("operators per pass, outside", lambda p: f"{p.host_ops / p.passes:.1f}"),
        ("Python calls per pass, in forward", lambda p: f"{p.forward_python_calls / p.passes:.1f}"),
        *((f"  in {package}", in_package(package)) for package in (*_PACKAGES, "other")),
        ("Python calls per pass, outside", lambda p: f"{p.host_python_calls / p.passes:.1f}"),
    ]
    return _table(names, [(label, [cell(profiles[n]) for n in names]) for label, cell in rows])


def time_table(profiles: Mapping[str, Profile]) -> str:
    """Milliseconds per generation, part by part (the fastest profiled run), with the totals
    profiled and unprofiled, one column per job, as text."""
    names = _check_profiles(profiles)
    rows = [(part, [f"{1e3 * profiles[n].seconds[part]:.1f}" for n in names]) for part in PARTS]
    rows += [
        ("total, profiled", [f"{1e3 * profiles[n].profiled:.1f}" for n in names]),
        ("total, unprofiled", [f"{1e3 * profiles[n].unprofiled:.1f}" for n in names]),
        ("  in forward passes", [f"{1e3 * profiles[n].unprofiled_forward:.1f}" for n in names]),
    ]
    return _table(names, rows)


def _table(names: Sequence[str], rows: Sequence[tuple[str, Sequence[str]]]) -> str:
    width = max(len(label) for label, _ in rows)
    columns = [max(len(n), *(len(r[1][i]) for r in rows)) for i, n in enumerate(names)]
    lines = [" " * width + "".join(f"  {n:>{w}}" for n, w in zip(names, columns, strict=True))]
    for label, cells in rows:
        lines.append(
            f"{label:<{width}}"
            + "".join(f"  {c:>{w}}" for c, w in zip(cells, columns, strict=True))
        )
    return "\n".join(lines)


#: How the figure groups the parts: every host part in one bar segment.
_FIGURE_GROUPS: dict[str, tuple[str, ...]] = {
    **{part: (part,) for part in FORWARD_PARTS},
    "outside the passes": HOST_PARTS,
}


def plot_profiles(profiles: Mapping[str, Profile]) -> Any:
    """Horizontal bars, one per job, of profiled milliseconds per target pass, stacked by
    part (:data:`_FIGURE_GROUPS`); per pass, so plain and speculative jobs share one axis."""
    from specdec_lib.course.plotting import _CYCLE, legend_outside, new_figure

    names = _check_profiles(profiles)
    fig, ax = new_figure("profiled time per target pass (ms)", "job", figsize=(7.0, 3.6))
    left = [0.0] * len(names)
    for (group, parts), color in zip(_FIGURE_GROUPS.items(), _CYCLE, strict=False):
        widths = [
            1e3 * sum(profiles[n].seconds[p] for p in parts) / profiles[n].passes for n in names
        ]
        ax.barh(names, widths, left=left, color=color, label=group, height=0.6)
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.invert_yaxis()
    ax.grid(axis="y", visible=False)
    legend_outside(ax)
    return fig
