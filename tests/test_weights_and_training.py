import shutil

import pytest
import torch

from specdec_lib import load_model
from specdec_lib.model import ModelConfig
from specdec_lib.train import TrainConfig, train
from specdec_lib.weights import WEIGHTS_DIR, read_manifest, sha256


def test_shipped_weights_match_their_recorded_checksums():
    manifest = read_manifest()
    for name in ("target", "draft"):
        assert sha256(WEIGHTS_DIR / manifest[name]["file"]) == manifest[name]["sha256"]
        assert load_model(name).config == ModelConfig(**manifest[name]["config"])


def test_tampered_weights_are_refused(tmp_path):
    shutil.copytree(WEIGHTS_DIR, tmp_path / "w")
    path = tmp_path / "w" / "target.safetensors"
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(RuntimeError, match="SHA-256"):
        load_model("target", directory=tmp_path / "w")


def test_the_draft_is_much_smaller_than_the_target():
    assert load_model("draft").num_parameters() * 4 < load_model("target").num_parameters()


def test_untrained_models_are_seeded_and_differ_from_trained_ones():
    a, b = load_model("target", trained=False), load_model("target", trained=False)
    wte = "transformer.wte.weight"
    assert torch.equal(a.state_dict()[wte], b.state_dict()[wte])
    assert not torch.equal(a.state_dict()[wte], load_model("target").state_dict()[wte])


def test_unknown_model_names_are_refused():
    with pytest.raises(ValueError, match="name must be one of"):
        load_model("teacher")


def test_a_short_training_run_lowers_the_loss():
    config = ModelConfig(block_size=64, n_layer=1, n_head=2, n_embd=32)
    result = train(config, TrainConfig(steps=40, batch_size=8, lr=3e-3, warmup=5), progress=False)
    first, last = sum(result.losses[:5]) / 5, sum(result.losses[-5:]) / 5
    assert last < first - 1.0
