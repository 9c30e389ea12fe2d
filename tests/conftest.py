import pytest

from specdec_lib import Tokenizer, load_model


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
