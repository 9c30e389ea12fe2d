"""One generation under ``torch.profiler`` (CPU), its time split into parts every engine has.

Chapter 11 compares the course's engine with transformers' ``generate``; to say where
their times differ, both generations are split into the same parts:

* inside the model's forward passes (marked by hooks on the top-level module, so both
  sides' passes are counted the same way): *matrix products* (``aten::linear``,
  ``matmul``, ``mm``, ... with their dispatch), the *attention* kernel
  (``aten::scaled_dot_product_attention``), *norms*, *other operators* (rotary positions,
  the key smear, activations, cache writes, reshapes), and *Python in forward*: the
  pass's time not inside any operator (module calls, argument handling, the hooks);
* outside them, regions marked by wrapping the library functions that do the work
  (a :class:`SideJob` names them): *drafting*, *logits processors*, *stopping criteria*,
  *cache bookkeeping* (rollback), *input preparation* and *setup*; whatever is left (the
  decoding loop's own Python and operators, acceptance among them) is the *rest of the
  loop*.

The wrappers are installed only while a profile runs and removed after it. Operator
calls are counted at the top level only (an operator called by another operator is
part of its caller): each top-level call is one trip from Python into PyTorch, the
fixed cost that dominates a model this small. The comparison built on this is
:mod:`specdec_lib.experiments.hf_profile`.
"""

from __future__ import annotations

import gc
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import wraps
from typing import Any

import torch
from torch.autograd.profiler import record_function
from torch.profiler import ProfilerActivity, profile

from specdec_lib.analysis.pass_profile import native_stderr_silenced

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


def profile_once(job: SideJob) -> tuple[dict[str, Any], Counter]:
    """Run ``job`` once under the profiler, with its passes and host regions marked: the
    split of its time (seconds per part, operator calls, passes) and the calls of each
    marked host part."""
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
        with native_stderr_silenced():
            prof.start()
        try:
            with record_function(GENERATION):
                job.run()
        finally:
            with native_stderr_silenced():
                prof.stop()
    split = _split(prof.profiler.kineto_results.events(), job.outer)
    # A finished profile sits in reference cycles, holding every recorded event (about
    # 150 MB for a plain generation) until the cycle collector runs: collect it now, or
    # a few profiles in a row take gigabytes.
    del prof
    gc.collect()
    return split, calls
