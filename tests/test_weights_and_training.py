import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

from specdec_lib import Tokenizer, load_model
from specdec_lib.engine.model import ModelConfig
from specdec_lib.engine.random_init import normal_
from specdec_lib.engine.train import TrainConfig, train
from specdec_lib.engine.weights import WEIGHTS_DIR, read_manifest, sha256


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
    wte = "model.embed_tokens.weight"
    assert torch.equal(a.state_dict()[wte], b.state_dict()[wte])
    assert not torch.equal(a.state_dict()[wte], load_model("target").state_dict()[wte])


def test_weights_made_for_another_tokenizer_are_refused(tmp_path):
    shutil.copytree(WEIGHTS_DIR, tmp_path / "w")
    manifest = read_manifest(tmp_path / "w")
    manifest["target"]["tokenizer"] = "bytes-v0"
    (tmp_path / "w" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="tokenizer 'bytes-v0'.*retrain"):
        load_model("target", directory=tmp_path / "w")


def test_loading_an_untrained_model_leaves_the_global_random_state_alone():
    torch.manual_seed(42)
    expected = torch.rand(3)
    torch.manual_seed(42)
    load_model("draft", trained=False)
    assert torch.equal(torch.rand(3), expected)


def test_unknown_model_names_are_refused():
    with pytest.raises(ValueError, match="name must be one of"):
        load_model("teacher")


def test_a_short_training_run_lowers_the_loss_and_logs_the_copy_probe():
    config = ModelConfig(
        vocab_size=Tokenizer().vocab_size, n_layer=1, n_head=2, n_embd=32, n_hidden=64
    )
    cfg = TrainConfig(steps=40, batch_size=4, window=64, lr=3e-3, warmup=5, probe_every=20)
    result = train(config, cfg, progress=False)
    first, last = sum(result.losses[:5]) / 5, sum(result.losses[-5:]) / 5
    assert last < first - 1.0
    assert [point["step"] for point in result.curve] == [0, 20, 40]
    assert all(0 <= point["copy"] <= 1 and 0 <= point["source"] <= 1 for point in result.curve)


def test_training_refuses_a_model_whose_vocabulary_is_not_the_tokenizers():
    with pytest.raises(ValueError, match="vocab_size"):
        train(ModelConfig(vocab_size=256), TrainConfig(steps=1), progress=False)


def test_the_untrained_model_is_the_same_under_every_cpu_kernel():
    # torch's own normal_ rounds differently under AVX-512, AVX2 and scalar kernels; the
    # library's initialisation must not, or chapter 7's control differs per reader's CPU.
    code = (
        "import torch; from specdec_lib import load_model; "
        "m = load_model('target', trained=False); "
        "print(repr(sum(float(p.detach().double().sum()) for p in m.parameters())))"
    )
    sums = {
        capability: subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "ATEN_CPU_CAPABILITY": capability, "OMP_NUM_THREADS": "1"},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for capability in ("default", "avx2")
    }
    assert sums["default"] == sums["avx2"] and sums["default"].strip()


def test_initialisation_is_torchs_normal_to_a_few_float32_ulps():
    for n in (16, 100, 4096):  # a ragged tail is redrawn as one more block of 16, as in torch
        theirs, ours = torch.empty(n), torch.empty(n)
        torch.manual_seed(n)
        torch.nn.init.normal_(theirs, std=1.0)
        next_theirs = torch.rand(1).item()
        torch.manual_seed(n)
        normal_(ours, 1.0)
        next_ours = torch.rand(1).item()
        assert float((theirs - ours).abs().max()) < 1e-5
        assert next_ours == next_theirs  # the same draws consumed: later inits line up too
    with pytest.raises(ValueError, match="at least 16 elements"):
        normal_(torch.empty(8), 1.0)
