"""Chapter 11's profile: where a greedy generation spends its time, course against transformers.

Why this exists: on the same weights, with the same passes, the course's engine and
transformers' ``generate`` take different wall time, and a ratio alone does not say why.
:func:`side_by_side_jobs` defines the four generations compared, and :func:`profile_jobs`
splits each one's time into the parts both sides have
(:mod:`specdec_lib.experiments.generation_profile`).

The profiler records every operator, which costs time of its own: a profiled run is
slower than an unprofiled one, and the more operator calls a run makes, the more so.
So each repeat also runs the job once without the profiler, and :class:`Profile` keeps
both times; shares of the profiled time are what the profile can say, wall time is the
unprofiled measurement's to give.
"""

from __future__ import annotations

import statistics
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from specdec_lib.analysis.timing import interleaved, time_inside
from specdec_lib.checks import check_ids, check_int
from specdec_lib.engine.drafters import Drafter
from specdec_lib.engine.generate import generate, speculative_generate
from specdec_lib.engine.model import KVCache, TinyGPT
from specdec_lib.engine.sampling import SamplingParams
from specdec_lib.experiments.generation_profile import (
    FORWARD_PARTS,
    HOST_PARTS,
    PARTS,
    SideJob,
    profile_once,
    python_calls,
)
from specdec_lib.experiments.hf_compare import LeftmostNgramDrafter, hf_generate

JOBS = ("course plain", "transformers plain", "course speculative", "transformers prompt lookup")


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
    the profiler, and the part of it inside forward passes. ``repeat_seconds`` keeps every
    repeat's parts, for :meth:`share`.
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
    repeat_seconds: tuple[dict[str, float], ...] = ()

    def share(self, *parts: str) -> float:
        """The median over repeats of ``parts``' share of the time inside forward passes.

        A share is a ratio within one run, so load that slows the whole run cancels out of
        it, where a ratio of two parts' fastest times (``seconds``) may take its numerator
        and its denominator from different repeats."""
        if not parts or any(p not in FORWARD_PARTS for p in parts):
            raise ValueError(f"parts must be some of {FORWARD_PARTS}, got {parts}")
        if not self.repeat_seconds:
            raise ValueError("this profile kept no repeats (repeat_seconds is empty)")
        return statistics.median(
            sum(r[p] for p in parts) / sum(r[p] for p in FORWARD_PARTS) for r in self.repeat_seconds
        )

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
    check_int("repeats", repeats)
    check_int("warmup", warmup, 0)
    if not jobs:
        raise ValueError("jobs must name at least one job")
    runs: dict[str, list[tuple[dict[str, Any], Counter]]] = {name: [] for name in jobs}
    plain: dict[str, list[tuple[float, float]]] = {name: [] for name in jobs}

    def profiled(name: str) -> Callable[[], None]:
        return lambda: runs[name].append(profile_once(jobs[name]))

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
            repeat_seconds=tuple(dict(r["seconds"]) for r, _ in results),
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
    n-gram rule (:class:`~specdec_lib.experiments.hf_compare.LeftmostNgramDrafter`, so both
    sides make the same passes) against transformers' prompt lookup.

    Each job returns its new tokens; all four return the same ones.
    """
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


def check_profiles(profiles: Mapping[str, Profile]) -> list[str]:
    """The job names of ``profiles``, refused unless each maps to a :class:`Profile`."""
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
    names = check_profiles(profiles)

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
    names = check_profiles(profiles)
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
