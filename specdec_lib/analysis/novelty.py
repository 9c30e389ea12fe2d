"""What the target *writes* on a workload.

A workload is named by what the target's continuation is, not by what its prompt says.
"Novel" means the continuation is fresh text in the same document: no line break or
document token (the note goes on), few repeated token 4-grams (no loop), and openings
that differ from prompt to prompt (the argmax moves with the text). These measures
are what ``benchmarks/novel_workload.py`` reports and the tests assert; the chapters
quote them beside the acceptance figures they qualify. (How much of such text a draft
model predicts, token by token, is ``benchmarks/novel_workload.py``'s own measurement,
in ``benchmarks/measures.py``.)

Between copy and novel, :func:`continued_tokens` marks the emitted tokens that continue
a span of the context (what a drafter that copies could have guessed) and
:func:`span_lengths` measures how long those stretches run: a copy is one long span, an
edit many medium ones, an answer quotes whole sentences between new ones.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from functools import cache

from specdec_lib.checks import check_int
from specdec_lib.text.language import DOC, LEXICON, Example, sentences, word_forms
from specdec_lib.text.tokenizer import Tokenizer


def _document_breaks() -> frozenset[int]:
    tok = Tokenizer()
    return frozenset({tok.encode("\n")[0], tok.encode(DOC)[0]})


def stays_in_document(tokens: Sequence[int]) -> bool:
    """True when a continuation holds no line break and no document token."""
    return not _document_breaks() & set(tokens)


def distinct_ngram_share(tokens: Sequence[int], n: int = 4) -> float:
    """Share of a sequence's token n-grams that are distinct (1.0: nothing repeats).

    A loop of period p over L tokens leaves about p / L of them distinct.
    """
    check_int("n", n)
    grams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
    if not grams:
        raise ValueError(f"tokens must hold at least n={n} tokens, got {len(tokens)}")
    return len(set(grams)) / len(grams)


def unique_opening_share(continuations: Sequence[Sequence[int]], n: int = 16) -> float:
    """Share of continuations whose first ``n`` tokens no other continuation shares."""
    if not continuations:
        raise ValueError("continuations must not be empty")
    openings = Counter(tuple(c[:n]) for c in continuations)
    return sum(openings[tuple(c[:n])] == 1 for c in continuations) / len(continuations)


def continued_tokens(prompt: Sequence[int], output: Sequence[int], n: int = 3) -> list[bool]:
    """For each token of ``output``: whether the ``n`` tokens ending at it (reaching back
    into ``prompt``) occurred earlier in ``prompt + output``, so that it continues a span
    the context already holds. ``n = 3``: two tokens of context and the token itself."""
    check_int("n", n, minimum=2)
    seq = list(prompt) + list(output)
    seen: set[tuple[int, ...]] = set()
    flags = []
    for end in range(n, len(seq) + 1):
        gram = tuple(seq[end - n : end])
        if end > len(prompt):
            flags.append(gram in seen)
        seen.add(gram)
    return [False] * (len(output) - len(flags)) + flags


@cache
def _lexicon_words() -> dict[str, tuple[str, str]]:
    """Every written form of a content word -> (kind, stem): a plural or a verb form is
    the same word as its stem, as the generator's "no content word twice" counts it."""
    words: dict[str, tuple[str, str]] = {}
    for kind, stems in LEXICON.items():
        for stem in stems:
            for form in word_forms(kind, stem):
                words.setdefault(form, (kind, stem))
    return words


def repeated_content_words(
    prompt: Sequence[int], output: Sequence[int], tok: Tokenizer
) -> list[bool | None]:
    """For each token of ``output``: ``None`` when it is not a content word (noun, verb,
    adjective or name); else whether that word, in any of its forms, already occurred in
    ``prompt`` or earlier in ``output``.

    The generator writes no content word twice in a document, so on a note every flag
    of its own continuation is ``False``; a ``True`` is a word the target said again.
    """
    words = _lexicon_words()

    def word(token: int) -> tuple[str, str] | None:
        bare = tok.piece(token).strip()
        return words.get(bare) or words.get(bare.lower())  # a sentence capitalises

    seen = {w for w in map(word, prompt) if w is not None}
    flags: list[bool | None] = []
    for token in output:
        w = word(token)
        flags.append(None if w is None else w in seen)
        if w is not None:
            seen.add(w)
    return flags


def rule_hits(example: Example, output: Sequence[int], tok: Tokenizer) -> tuple[int, int]:
    """How closely a continuation follows its workload's rule, as (hits, trials).

    ``Quote:`` and ``Edit:`` prompts (``copy``, ``edit``): the tokens equal to the
    reference at the same position (a rule's output is unique, so position by position is
    fair). ``Answer:`` prompts: the passage's sentences the continuation quotes whole,
    over those it had room to reach (whose start the reference places within its length);
    its new sentences are free, so they are not compared.
    """
    marker = example.prompt.rsplit("\n", 1)[-1]
    if marker == "Answer:":
        written = tok.decode(list(output))
        passage = example.prompt.split("\n")[0].split(": ", 1)[1]
        reach = [s for s in sentences(passage) if example.reference.find(s) < len(written)]
        return sum(s in written for s in reach), len(reach)
    if marker not in ("Quote:", "Edit:"):
        raise ValueError(f"example must be a Quote:, Edit: or Answer: prompt, got {marker!r}")
    ref = tok.encode(example.reference)[: len(output)]
    return sum(a == b for a, b in zip(output, ref, strict=False)), len(ref)


def _content_stems(text: str) -> set[tuple[str, str]]:
    """The content words of ``text`` (noun, verb, adjective or name), each as (kind, stem)."""
    words = _lexicon_words()
    stems = set()
    for raw in text.split():
        bare = raw.strip(".,;:!?")
        w = words.get(bare) or words.get(bare.lower())
        if w is not None:
            stems.add(w)
    return stems


def answer_sentence_kinds(
    example: Example, output: Sequence[int], tok: Tokenizer, near: float = 0.6
) -> list[tuple[str, str]]:
    """Each whole sentence of an ``Answer:`` continuation, as (kind, sentence).

    ``"quote"``: a passage sentence, exactly. ``"near-quote"``: not one, but it holds at
    least a share ``near`` of the content words (any form) of some passage sentence, as a
    quote with a word dropped or changed does. ``"new"``: anything else. A sentence the
    continuation cut off (no closing mark) is not counted. Exact matching alone
    (:func:`rule_hits`) calls a quote with its adjective dropped new.
    """
    if not 0 < near <= 1:
        raise ValueError(f"near must lie in (0, 1], got {near!r}")
    if example.prompt.rsplit("\n", 1)[-1] != "Answer:":
        raise ValueError("example must be an Answer: prompt")
    passage = sentences(example.prompt.split("\n")[0].split(": ", 1)[1])
    quoted = [_content_stems(s) for s in passage]
    kinds = []
    for s in sentences(tok.decode(list(output))):
        if s in passage:
            kind = "quote"
        else:
            mine = _content_stems(s)
            close = any(q and len(q & mine) >= near * len(q) for q in quoted)
            kind = "near-quote" if close else "new"
        kinds.append((kind, s))
    return kinds


def span_lengths(flags: Sequence[bool]) -> list[int]:
    """Lengths of the runs of ``True`` in ``flags`` (:func:`continued_tokens`' spans)."""
    runs, current = [], 0
    for f in flags:
        if f:
            current += 1
        elif current:
            runs.append(current)
            current = 0
    return runs + [current] if current else runs
