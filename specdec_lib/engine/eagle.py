"""An EAGLE-style draft head for SmolLM2: one decoder layer that extrapolates the target's
features (Li et al. 2024, EAGLE; EAGLE-2 and EAGLE-3 after it).

A draft model guesses the next token from tokens alone; EAGLE guesses the target's next
*feature* from the target's own features, which is easier: the feature already says much
of what the next token will be. At position i the head reads the target's feature f_i (the
state that chose token i + 1) and the embedding of token i + 1, joins them with one linear
layer (2 C -> C), runs one decoder layer of the target's own shape, and passes the result
through the target's final norm: that is its guess of f_{i + 1}, read by the target's
output layer restricted to a draft vocabulary. Drafting a chain feeds each guess back as
the next position's feature, one pass of the one layer per drafted token.

Choices, and why:

* **The feature is the final layer's output after the final norm** (what
  ``TinyGPT.forward(hidden=True)`` returns). EAGLE-1 and EAGLE-2 read the same (the
  output of Hugging Face's ``LlamaModel``, which applies the norm). The output layer reads
  exactly this vector, so the target's next-token distribution at a position is a
  function of its stored feature alone (logits = f E^T): training data holds features and
  tokens, nothing else. The head's guess goes through the target's final norm too, so what
  it feeds back lies where the target's features lie (unit RMS times the norm's weight).
* **A reduced draft vocabulary** (EAGLE-3; FR-Spec, Zhao et al. 2025): the output layer
  is the target's embedding rows of the ``V_d`` tokens the target most often ranks first
  on the training answers, tied and frozen, with ``d2t`` mapping draft ids to target
  ids. SmolLM2's full output layer (49,152 x 576) is a fifth of the model; over 8,192
  tokens a draft step costs a few percent of a target step (``../shared/MEASURED.md``).
  A token outside the draft vocabulary can never be drafted: sampled, q is zero there,
  which the residual rule handles exactly (q is the distribution the draft sampled from).
* **Its own KV cache**, rolled back like the target's: the positions whose true features
  the target settled are computed once, from those features; the drafted chain's
  positions (computed from the head's own guesses) are cropped before the next draft.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn as nn
from safetensors.torch import save_file

from specdec_lib.checks import check_draft_params, check_int
from specdec_lib.engine.drafters import Generator, LibraryDrafter, NgramDrafter, Params, Proposal
from specdec_lib.engine.model import KVCache, Layout, TinyGPT
from specdec_lib.engine.random_init import normal_
from specdec_lib.engine.sampling import argmax, process_logits, sample
from specdec_lib.engine.weights import WEIGHTS_DIR, load_verified, sha256

_EAGLE_FILE = "eagle_smollm2.safetensors"
_EAGLE_INFO = "eagle_smollm2.json"  # beside the weights: checksum, the GGUF's, recipe, curve


def draft_vocabulary(counts: torch.Tensor, size: int) -> torch.Tensor:
    """``d2t``: the ids of the ``size`` most frequent tokens, most frequent first (ties by
    id), from ``counts`` (V,), how often each target token occurs (``train_eagle`` counts
    the target's first choices on the training answers)."""
    if counts.dim() != 1:
        raise ValueError(f"counts must have shape (V,), got {tuple(counts.shape)}")
    if not 1 <= check_int("size", size) <= len(counts):
        raise ValueError(f"size must lie in [1, {len(counts)}], got {size}")
    order = sorted(range(len(counts)), key=lambda t: (-int(counts[t]), t))
    return torch.tensor(order[:size], dtype=torch.long)


def check_d2t(d2t: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """``d2t`` as a (V_d,) long tensor of distinct target ids in [0, vocab_size - 1]."""
    if not isinstance(d2t, torch.Tensor) or d2t.dim() != 1 or len(d2t) == 0:
        raise ValueError("d2t must be a non-empty 1-D tensor of target token ids")
    d2t = d2t.long()
    if int(d2t.min()) < 0 or int(d2t.max()) >= vocab_size:
        raise ValueError(f"d2t must hold ids in [0, {vocab_size - 1}]")
    if len(torch.unique(d2t)) != len(d2t):
        raise ValueError("d2t must hold distinct ids: one draft id per target token")
    return d2t


class EagleHead(nn.Module):
    """The trainable part, ``fc`` (2 C -> C) and one decoder layer of the target's shape,
    around the target's frozen embedding, final norm and output rows.

    The layer lives in a one-layer :class:`TinyGPT` (``decoder``), so its cache, masks,
    rotary positions and tree layouts are the engine's own: its input embeddings are
    replaced by ``fc``'s output, its final norm is the target's (shared), and its output
    layer is the target's embedding rows of the draft vocabulary (a copy, frozen, rebuilt
    from ``d2t`` and never saved). Only ``fc``, the layer and ``d2t`` are the head's own.
    """

    def __init__(self, target: TinyGPT, d2t: torch.Tensor) -> None:
        super().__init__()
        if not isinstance(target, TinyGPT):
            raise ValueError(f"target must be a TinyGPT, got {type(target).__name__}")
        d2t = check_d2t(d2t, target.config.vocab_size)
        C = target.config.n_embd
        self.fc = nn.Linear(2 * C, C, bias=False)
        normal_(self.fc.weight, std=0.02)
        self.decoder = TinyGPT(replace(target.config, n_layer=1, vocab_size=len(d2t)))
        self.decoder.model["norm"] = target.model.norm
        with torch.no_grad():
            self.decoder.model.embed_tokens.weight.copy_(target.model.embed_tokens.weight[d2t])
        self.decoder.model.embed_tokens.weight.requires_grad_(False)  # tied to lm_head
        self.register_buffer("d2t", d2t)
        self._target = [target]  # a list, so it is not registered as a submodule

    @property
    def target(self) -> TinyGPT:
        return self._target[0]

    @property
    def draft_vocab(self) -> int:
        return len(self.d2t)

    def trained_state(self) -> dict[str, torch.Tensor]:
        """What training changes, and ``d2t``: the tensors a checkpoint holds."""
        own = ("fc.", "decoder.model.layers.", "d2t")
        return {k: v for k, v in self.state_dict().items() if k.startswith(own)}

    def forward(
        self,
        feats: torch.Tensor,
        next_tokens: torch.Tensor,
        cache: KVCache | None = None,
        layout: Layout | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """From features ``feats`` (B, T, C) at positions i and tokens ``next_tokens`` (B, T)
        at i + 1: draft logits (B, T, V_d) for token i + 2 and the guessed features
        f_{i + 1} (B, T, C). With a ``cache`` the T positions follow the cached ones (or
        sit where ``layout`` puts them); without one they are positions 0..T-1 (training)."""
        x = self.fc(torch.cat([self.target.model.embed_tokens(next_tokens), feats], dim=-1))
        return self.decoder(next_tokens, cache, layout=layout, hidden=True, embeds=x)


class EagleDrafter(LibraryDrafter):
    """Drafts a chain of k tokens with an :class:`EagleHead`, one pass of its layer each.

    The speculation round hands it the target's features of every position it settled
    (:meth:`observe`); before the first round there are none and it drafts nothing (the
    first round is the prefill). Greedy, it proposes the draft vocabulary's argmax; sampled,
    it samples the processed draft distribution and reports it on the full vocabulary,
    zero outside the draft vocabulary, so the residual rule stays exact.
    """

    reads_hidden = True

    def __init__(self, head: EagleHead, name: str = "EAGLE head") -> None:
        if not isinstance(head, EagleHead):
            raise ValueError(f"head must be an EagleHead, got {type(head).__name__}")
        self.head = head
        self.name = name
        self.vocab_size = head.target.config.vocab_size
        self.cache = head.decoder.new_cache(1)
        self.feats = torch.zeros(head.target.config.block_size, head.target.config.n_embd)
        self.settled = 0  # cache positions computed from the target's true features
        self.hidden_for = -1  # the context length whose features are all known
        self.drafted_after: list[int] = []  # the context of the last draft, if still valid

    def observe(self, hidden: torch.Tensor, context_length: int) -> None:
        """The target's features (n, C) of the last n settled positions of a context of
        ``context_length`` tokens: positions context_length - 1 - n .. context_length - 2."""
        hidden = hidden.reshape(-1, hidden.shape[-1])
        start = context_length - 1 - len(hidden)
        if start < 0:
            raise ValueError(f"hidden must hold at most {context_length - 1} rows for this context")
        known = self.hidden_for - 1 if self.hidden_for > 0 else 0
        if start > known:  # a gap: features of earlier positions were never seen
            self.settled, self.hidden_for = 0, -1
            return
        self.feats[start : start + len(hidden)] = hidden
        self.settled = min(self.settled, start)
        self.hidden_for = context_length
        if start == 0:  # a new context from its first token (a drafter reused for a new prompt)
            self.drafted_after = []

    def ready(self, context: list[int]) -> bool:
        """Whether the features of every position of ``context`` but the last are known and
        belong to it: the last round's context must begin this one (a drafter reused for
        another prompt of the same length would otherwise draft from the old features)."""
        if self.hidden_for != len(context) or len(context) < 2:
            return False
        if context[: len(self.drafted_after)] != self.drafted_after:
            return False
        self.drafted_after = list(context)
        return True

    @torch.inference_mode()
    def draft(self, context: list[int], k: int, params: Params, generator: Generator) -> Proposal:
        check_draft_params(params)
        if k == 0 or not self.ready(context):
            return Proposal([])
        d2t = self.head.d2t
        logits, guess = self.catch_up(context)
        tokens: list[int] = []
        rows = None if params.greedy else torch.zeros(k, self.vocab_size, dtype=torch.float64)
        for i in range(k):
            if params.greedy:
                tokens.append(int(d2t[argmax(logits)]))
            else:
                probs = process_logits(logits, params)  # (V_d,)
                tokens.append(int(d2t[sample(probs, generator)]))
                rows[i, d2t] = probs
            if i + 1 < k:
                out, guess = self.head(guess, torch.tensor([[tokens[-1]]]), self.cache)
                logits = out[0, -1]
        return Proposal(tokens, rows, draft_passes=k)

    def catch_up(self, context: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Bring the cache up to the context's last settled position from the target's
        features: the draft logits (V_d,) of the token after ``context`` and the guessed
        feature (1, 1, C) that goes with it. Drops whatever was drafted last time."""
        N = len(context)
        # Recompute at least position N - 2, whose output drafts the first token (after a
        # round it is always new: it pairs the last feature with the pending token).
        self.settled = min(self.settled, N - 2)
        self.cache.crop(self.settled)
        feats = self.feats[self.settled : N - 1][None]  # (1, n, C), positions settled..N-2
        logits, guess = self.head(feats, torch.tensor([context[self.settled + 1 : N]]), self.cache)
        self.settled = N - 1
        return logits[0, -1], guess[:, -1:]


class EagleOrLookupDrafter(EagleDrafter):
    """Per round, prompt lookup where the context repeats itself, the head elsewhere.

    Where the answer copies its input (an edit, a quoted line), a suffix of the context
    matched earlier predicts many tokens at no cost, and the head, one layer deep, is
    unlikely to beat it; on fresh text there is no match and the head drafts. A round uses
    :class:`NgramDrafter`'s proposal if its longest suffix match holds at least
    ``min_match`` tokens, else the head's. The head observes every round either way, so
    its cache stays current.
    """

    def __init__(self, head: EagleHead, min_match: int = 2, max_n: int = 4, name: str = "") -> None:
        check_int("min_match", min_match)
        super().__init__(head, name or f"EAGLE head or prompt lookup (match >= {min_match})")
        self.lookup = NgramDrafter(
            max_n=max(max_n, min_match), min_n=min_match, vocab_size=self.vocab_size
        )

    def draft(self, context: list[int], k: int, params: Params, generator: Generator) -> Proposal:
        check_draft_params(params)
        copied = self.lookup.draft(context, k, params, generator)  # deterministic: probs None
        return copied if copied.tokens else super().draft(context, k, params, generator)


def eagle_info(directory: Path = WEIGHTS_DIR) -> dict:
    """What ``python -m specdec_lib.engine.train_eagle`` recorded: checksums, recipe."""
    return json.loads((directory / _EAGLE_INFO).read_text())


def save_eagle(head: EagleHead, info: dict, directory: Path = WEIGHTS_DIR) -> Path:
    """Write the head's trained tensors and ``d2t`` (not the target's rows) and, beside
    them, their SHA-256 with ``info`` (which names the GGUF's SHA-256)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / _EAGLE_FILE
    save_file({k: v.contiguous() for k, v in head.trained_state().items()}, str(path))
    record = {"file": path.name, "sha256": sha256(path), **info}
    (directory / _EAGLE_INFO).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return path


def load_eagle(target: TinyGPT, gguf_sha256: str, directory: Path = WEIGHTS_DIR) -> EagleHead:
    """The shipped head for ``target``, whose GGUF has SHA-256 ``gguf_sha256``: the head
    reads one model's features and no other's, so both checksums are verified first."""
    info = eagle_info(directory)
    if info["gguf_sha256"] != gguf_sha256:
        raise ValueError(
            "the EAGLE head was trained on another GGUF's features: retrain it with "
            "`python -m specdec_lib.engine.train_eagle`"
        )
    state = load_verified(directory / info["file"], info["sha256"], _EAGLE_INFO)
    head = EagleHead(target, state["d2t"])
    missing, unexpected = head.load_state_dict(state, strict=False)
    if unexpected or set(missing) != set(head.state_dict()) - set(head.trained_state()):
        raise ValueError(f"weights do not fit: missing {missing}, unexpected {unexpected}")
    return head.eval()
