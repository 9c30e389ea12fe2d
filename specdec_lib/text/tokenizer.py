"""Word-level tokenizer with byte fallback: the generated language's words are tokens.

Why words and not bytes: a byte matches dozens of earlier places in a passage and is
mostly predictable from spelling, so a tiny byte-level model gains little from
copying and barely learns to. A content word of the generated language is nearly
unique in its passage and costs about six nats unless it is copied, so copying is
worth learning. Real LLMs use sub-word tokens for the same reason, and counting
tokens per pass in bytes would flatter a drafter that copies long runs of letters.

The vocabulary, in id order:

* ids 0..255: the 256 bytes, so any string round-trips (non-ASCII text, typos,
  words the language never made are spelled out byte by byte);
* id 256: the document token ``<|doc|>`` that starts every document;
* then every word form of the generated language (each noun bare and plural, each
  verb bare, with ``s`` and with ``ed``, adjectives, names, function words, document
  markers, the numbers 0..99), each once bare and once with a leading space.

A plural or a verb form is one token, not stem + suffix: the language never uses a
content word twice in a document, so the token before a sentence's full stop is then
unique in its passage, and a model copying a quote can tell every sentence end apart
by the word before it.

Encoding splits text into pieces (``<|doc|>``, `` ?[A-Za-z]+``, `` ?[0-9]+`` or one
other character); a piece in the vocabulary is one token, anything else is its UTF-8
bytes. Punctuation and newlines are their byte tokens. ``_TOKENIZER_VERSION`` names this
scheme and the language; weights record it and are refused if it differs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from specdec_lib.checks import check_ids
from specdec_lib.text.language import (
    COPY_MARKERS,
    DOC,
    FUNCTION_WORDS,
    KINDS,
    LANGUAGE_VERSION,
    LEXICON,
    OTHER_MARKERS,
    word_forms,
)

_TOKENIZER_VERSION = f"words-v2/{LANGUAGE_VERSION}"
_PIECE = re.compile(re.escape(DOC) + r"| ?[A-Za-z]+| ?[0-9]+|.", re.DOTALL)


def _words() -> list[str]:
    words: list[str] = []
    for kind in KINDS:
        for word in LEXICON[kind]:
            words += word_forms(kind, word)
    words += sorted(FUNCTION_WORDS) + [w.capitalize() for w in ("the", "a")]
    words += list(COPY_MARKERS) + list(OTHER_MARKERS)
    words += [str(n) for n in range(100)]
    return list(dict.fromkeys(words))  # unique, order kept


@lru_cache(maxsize=1)
def _tables() -> tuple[tuple[bytes, ...], dict[str, int]]:
    pieces = [bytes([b]) for b in range(256)] + [DOC.encode()]
    for word in _words():
        pieces += [word.encode(), b" " + word.encode()]
    index = {p.decode(): i for i, p in enumerate(pieces) if i >= 256}
    return tuple(pieces), index


class Tokenizer:
    """``encode(str) -> list[int]`` and ``decode(list[int]) -> str`` over words and bytes."""

    version: str = _TOKENIZER_VERSION

    def __init__(self) -> None:
        self._pieces, self._index = _tables()

    @property
    def vocab_size(self) -> int:
        return len(self._pieces)

    def _encode_piece(self, piece: str) -> list[int]:
        index = self._index
        if piece in index:
            return [index[piece]]
        return list(piece.encode("utf-8"))

    def encode(self, text: str) -> list[int]:
        if not isinstance(text, str):
            raise ValueError(f"text must be a str, got {type(text).__name__}")
        ids: list[int] = []
        for piece in _PIECE.findall(text):
            ids += self._encode_piece(piece)
        return ids

    def decode(self, token_ids: Sequence[int]) -> str:
        pieces = self._pieces
        out = [pieces[i] for i in check_ids("token_ids", token_ids, len(pieces))]
        # A cut can fall inside a multi-byte character; show it, do not fail.
        return b"".join(out).decode("utf-8", errors="replace")

    def piece(self, token_id: int) -> str:
        """The text of one token, for displays that mark token boundaries.

        A byte token of a multi-byte character (0x80 and up) is no character on its
        own, and decoding it alone gives U+FFFD; it shows as ``<0xC3>``, the way
        Llama's tokenizer writes its byte tokens.
        """
        text = self.decode([token_id])
        return f"<0x{token_id:02X}>" if 0x80 <= token_id < 256 else text
