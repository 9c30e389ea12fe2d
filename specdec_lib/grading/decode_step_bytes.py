"""Chapter 1's exercise, the bytes one decode step reads, in one module: the answer in the
student's form, its slips, and the check.

``decode_step_bytes(model, context_len) -> int``: a decode step reads every weight once
(the tied embedding once, as ``model.parameters()`` counts it) and the KV cache of the
context: a key and a value per layer per context token, for ``config.kv_heads`` heads
only under grouped-query attention. The slips are the miscounts such an estimate makes:
the tied embedding counted twice (as ``state_dict()`` lists it), the cache left out,
parameters counted instead of bytes, keys without values, and a key and a value cached
for every query head. The cases hold four model shapes, one with grouped-query attention
(6 query heads sharing 2 key/value heads, as SmolLM2 shares 3 among 9), and contexts of
0 to 256 tokens, so that each slip shows.
"""

from __future__ import annotations

import random

from specdec_lib.analysis.costs import kv_cache_bytes_per_token, weight_bytes
from specdec_lib.engine.model import ModelConfig, TinyGPT
from specdec_lib.engine.weights import load_model

from .answers import ExactCheck
from .mistakes import register
from .report import Diagnosis as D
from .sandbox import as_int, call_student, forbidden

# --- the answer, and its slips ---------------------------------------------------------


def _bytes_reference(model, context_len):
    """Correct: every weight once (the tied embedding too), plus the cache of the context."""
    return weight_bytes(model) + kv_cache_bytes_per_token(model.config) * context_len


register(
    "check_decode_step_bytes",
    _bytes_reference,
    (
        "tied embedding twice",
        lambda m, n: (
            _bytes_reference(m, n)
            - weight_bytes(m)
            + sum(t.nbytes for t in m.state_dict().values())
        ),
        D.TIED_TWICE,
    ),
    ("no KV cache", lambda m, n: weight_bytes(m), D.NO_KV_CACHE),
    (
        "parameters, not bytes",
        lambda m, n: m.num_parameters() + kv_cache_bytes_per_token(m.config, 1) * n,
        D.COUNTS_PARAMETERS,
    ),
    (
        "keys only",
        lambda m, n: weight_bytes(m) + kv_cache_bytes_per_token(m.config) // 2 * n,
        D.KEYS_ONLY,
    ),
    (
        "every query head cached",
        lambda m, n: weight_bytes(m) + 2 * m.config.n_layer * m.config.n_embd * 4 * n,
        D.IGNORES_GQA,
    ),
)


# --- the check -------------------------------------------------------------------------


def _models(seed: int) -> list[tuple[TinyGPT, int]]:
    """The course's two models (untrained: the same shapes), two other shapes, one of them with
    grouped-query attention (6 query heads sharing 2 key/value heads, as SmolLM2 shares 3
    among 9), four contexts."""
    rng = random.Random(f"bytes/{seed}")
    models = [load_model("target", trained=False), load_model("draft", trained=False)]
    for layers, width, heads, kv_heads in ((2, 32, 4, None), (3, 48, 6, 2)):
        config = ModelConfig(
            vocab_size=rng.randint(50, 300),
            n_layer=layers,
            n_embd=width,
            n_head=heads,
            n_kv_head=kv_heads,
        )
        models.append(TinyGPT(config))
    return [(m, n) for m in models for n in (0, 1, 100, 256)]


check_decode_step_bytes = ExactCheck(
    "check_decode_step_bytes",
    _models,
    lambda fn, c: as_int(call_student(fn, "decode_step_bytes", *c), "the byte count"),
    lambda c: (
        f"{c[0].config.n_layer} layers, n_embd = {c[0].config.n_embd}, "
        f"{c[0].config.n_head} heads ({c[0].config.kv_heads} key/value), context_len = {c[1]}"
    ),
    """Check ``decode_step_bytes(model, context_len) -> int`` against ``weight_bytes`` plus
    ``kv_cache_bytes_per_token`` times the context: four model shapes (one with grouped-query
    attention), four contexts.""",
    forbidden(weight_bytes, kv_cache_bytes_per_token),
)
