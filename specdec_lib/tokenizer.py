"""Byte-level tokenizer: one token per UTF-8 byte, vocabulary of 256.

Bytes keep the course honest and simple: no merges to train, no unknown
tokens, and a token boundary is a character boundary for the ASCII text the
course generates, so a reader can see exactly which characters were drafted.
"""

from __future__ import annotations

from collections.abc import Sequence

VOCAB_SIZE = 256


class Tokenizer:
    """Encode text as its UTF-8 bytes and decode byte ids back to text."""

    vocab_size: int = VOCAB_SIZE

    def encode(self, text: str) -> list[int]:
        if not isinstance(text, str):
            raise ValueError(f"text must be a str, got {type(text).__name__}")
        return list(text.encode("utf-8"))

    def decode(self, token_ids: Sequence[int]) -> str:
        ids = list(token_ids)
        for i in ids:
            if not 0 <= int(i) < VOCAB_SIZE:
                raise ValueError(f"token_ids must lie in [0, {VOCAB_SIZE - 1}], got {i}")
        # A cut can fall inside a multi-byte character; show it, do not fail.
        return bytes(int(i) for i in ids).decode("utf-8", errors="replace")
