"""pytest's set-up for the whole suite: up to two workers, one thread each.

``pytest`` runs the unit tests and the chapter notebooks on ``-n auto`` xdist workers
(pyproject.toml), which this hook caps at two and at the machine's CPUs: the course
promises a run on a two-core machine, and every worker holds a model or a notebook kernel
(up to 1.5 GB each). ``pytest -n 0`` runs everything in one process.

Each worker, and each notebook kernel it starts, gets one thread unless
``OMP_NUM_THREADS`` says otherwise: two workers of two threads each on two cores
oversubscribe and crawl. Set here, before any test module imports torch, so the workers
inherit it.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, absent where it is not installed
def pytest_xdist_auto_num_workers(config) -> int:
    return max(1, min(2, os.cpu_count() or 1))
