"""Shipped weights: safetensors files (plain tensors, no code runs on load), each
checked against the SHA-256 recorded beside it before a byte of it is used.

``manifest.json`` records, per model, its file, checksum, ``ModelConfig`` and the
command and seed that trained it, so a chapter can say exactly what it ran.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from specdec_lib.engine.model import ModelConfig, TinyGPT
from specdec_lib.text.tokenizer import Tokenizer

WEIGHTS_DIR = Path(__file__).parent.parent / "weights"
_MANIFEST = "manifest.json"
_MODEL_NAMES = ("target", "draft")

_VOCAB = Tokenizer().vocab_size
_TARGET_CONFIG = ModelConfig(vocab_size=_VOCAB, n_layer=4, n_head=4, n_embd=128, n_hidden=384)
# The draft: one layer, a quarter of the width, no smeared keys (it is not meant to copy).
_DRAFT_CONFIG = ModelConfig(
    vocab_size=_VOCAB, n_layer=1, n_head=2, n_embd=64, n_hidden=192, smear_keys=False
)
CONFIGS = {"target": _TARGET_CONFIG, "draft": _DRAFT_CONFIG}
# Seeds of the untrained (random) models, so trained=False is reproducible too.
_INIT_SEEDS = {"target": 1234, "draft": 5678}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_verified(path: Path, expected: str, record: str) -> dict[str, torch.Tensor]:
    """The tensors of ``path``, read only once its SHA-256 is the ``expected`` one that
    ``record`` holds (the manifest, or the JSON beside a drafter's weights)."""
    digest = sha256(path)
    if digest != expected:
        raise RuntimeError(
            f"{path} has SHA-256 {digest}, {record} says {expected}: "
            "the weights are corrupt or were changed without retraining"
        )
    return load_file(str(path))


def _state_dict_for_saving(model: TinyGPT) -> dict[str, torch.Tensor]:
    # lm_head.weight is the same tensor as embed_tokens.weight; store it once.
    sd = model.state_dict()
    return {k: v.contiguous() for k, v in sd.items() if k != "lm_head.weight"}


def save_model(model: TinyGPT, name: str, info: dict, directory: Path = WEIGHTS_DIR) -> Path:
    """Write ``<name>.safetensors`` and record its checksum and provenance."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.safetensors"
    save_file(_state_dict_for_saving(model), str(path))
    manifest_path = directory / _MANIFEST
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    manifest[name] = {
        "file": path.name,
        "sha256": sha256(path),
        "config": asdict(model.config),
        "tokenizer": Tokenizer.version,
        **info,
    }
    manifest_path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return path


def read_manifest(directory: Path = WEIGHTS_DIR) -> dict:
    return json.loads((directory / _MANIFEST).read_text())


def training_log(name: str, directory: Path = WEIGHTS_DIR) -> list[dict]:
    """The probe curve ``python -m specdec_lib.engine.train`` wrote while training ``name``.

    One point every 100 steps: step, seconds, mean loss of the last 50 steps, and the
    teacher-forced accuracy over the copy span and the source span of held-out prompts.
    """
    if name not in _MODEL_NAMES:
        raise ValueError(f"name must be one of {_MODEL_NAMES}, got {name!r}")
    return json.loads((directory / f"training_log_{name}.json").read_text())


def load_model(name: str, trained: bool = True, directory: Path = WEIGHTS_DIR) -> TinyGPT:
    """The ``"target"`` or ``"draft"`` TinyGPT, in eval mode.

    ``trained=True`` loads the shipped weights after verifying their checksum;
    ``trained=False`` returns the same architecture with seeded random weights,
    the control that shows what training bought.
    """
    if name not in _MODEL_NAMES:
        raise ValueError(f"name must be one of {_MODEL_NAMES}, got {name!r}")
    if not trained:
        # Seed a private generator's worth of state without disturbing the caller's.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(_INIT_SEEDS[name])
            return TinyGPT(CONFIGS[name]).eval()
    entry = read_manifest(directory)[name]
    tok = Tokenizer()
    if entry.get("tokenizer") != tok.version or entry["config"]["vocab_size"] != tok.vocab_size:
        raise ValueError(
            f"weights {name!r} were trained for tokenizer {entry.get('tokenizer')!r} with "
            f"vocab_size {entry['config']['vocab_size']}, but the library's tokenizer is "
            f"{tok.version!r} with vocab_size {tok.vocab_size}: retrain with "
            "`python -m specdec_lib.engine.train`"
        )
    model = TinyGPT(ModelConfig(**entry["config"]))
    state = load_verified(directory / entry["file"], entry["sha256"], _MANIFEST)
    state["lm_head.weight"] = state["model.embed_tokens.weight"]
    model.load_state_dict(state)
    return model.eval()
