"""Prompts for SmolLM2 built from text that ships with Python: nothing is downloaded.

The source of pure-Python standard-library functions (``inspect.getsource``) is real code
with real docstrings, on every machine the course runs on. A workload is named by what
SmolLM2-135M-Instruct *writes* after its prompt (measured by
``benchmarks/smollm2_workloads.py``), not by what the prompt asks:

* ``recite``: a function's source, then its file name again and its first two lines:
  the model writes the function back, mostly copied;
* ``continue``: the first third of a function: it writes code of its own, often
  repeating its own lines;
* ``explain``: a chat turn asking it to explain a function: prose about the code,
  quoting a few names;
* ``open``: an open question: prose with nothing to copy;
* ``asked_to_repeat``: a chat turn asking it to repeat a function exactly, which a 135M
  model mostly does not do.
"""

from __future__ import annotations

import colorsys
import fnmatch
import heapq
import inspect
import shlex
import statistics
import textwrap

from specdec_lib.checks import check_int

SMOLLM2_WORKLOADS = ("recite", "continue", "explain", "open", "asked_to_repeat")
_FUNCTIONS = [
    colorsys.rgb_to_hsv,
    colorsys.hsv_to_rgb,
    fnmatch.filter,
    heapq.nlargest,
    shlex.quote,
    textwrap.dedent,
    textwrap.indent,
    statistics.median,
]
_QUESTIONS = [
    "Why is the sky blue?",
    "Write a short story about a cat.",
    "What are three good habits for writing code?",
    "Explain what a hash table is.",
    "Give me a recipe for pancakes.",
    "What causes the seasons on Earth?",
    "How do plants make food?",
    "Describe a busy train station.",
]


def _chat(text: str) -> str:
    """SmolLM2-Instruct's chat template for one user turn, the assistant's turn opened."""
    return f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"


def smollm2_prompts(workload: str, n: int) -> list[str]:
    """The first ``n`` prompts (at most 8) of one of :data:`SMOLLM2_WORKLOADS`."""
    if workload not in SMOLLM2_WORKLOADS:
        raise ValueError(f"workload must be one of {SMOLLM2_WORKLOADS}, got {workload!r}")
    if check_int("n", n) > len(_FUNCTIONS):
        raise ValueError(f"n must be at most {len(_FUNCTIONS)}, got {n}")
    if workload == "open":
        return [_chat(q) for q in _QUESTIONS[:n]]
    out = []
    for fn in _FUNCTIONS[:n]:
        source = inspect.getsource(fn)
        lines = source.splitlines(keepends=True)
        if workload == "recite":
            name = fn.__module__
            out.append(
                f"# {name}.py\n{source}\n\n# {name}_copy.py (an exact copy)\n{''.join(lines[:2])}"
            )
        elif workload == "asked_to_repeat":
            out.append(_chat(f"Repeat this Python function exactly:\n```python\n{source}```"))
        elif workload == "explain":
            out.append(
                _chat(
                    "Explain what this function does, quoting the lines you explain:\n"
                    f"```python\n{source}```"
                )
            )
        else:  # continue
            out.append("".join(lines[: max(3, len(lines) // 3)]))
    return out
