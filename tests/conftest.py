import sys
from pathlib import Path

import pytest

from specdec_lib import Tokenizer, load_model

# A benchmark imports its harness as ``python benchmarks/<name>.py`` finds it: from its folder.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))


@pytest.fixture(scope="session")
def target():
    return load_model("target")


@pytest.fixture(scope="session")
def draft():
    return load_model("draft")


@pytest.fixture(scope="session")
def untrained_target():
    return load_model("target", trained=False)


@pytest.fixture(scope="session")
def tok():
    return Tokenizer()
