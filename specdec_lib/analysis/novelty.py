"""What the target *writes* on a workload, and how much of it the draft model predicts.

A workload is named by what the target's continuation is, not by what its prompt says.
"Novel" means the continuation is fresh text in the same document: no line break or
document token (the note goes on), few repeated token 4-grams (no loop), and openings
that differ from prompt to prompt (the argmax moves with the text). These measures
are what ``benchmarks/novel_workload.py`` reports and the tests assert; the chapters
quote them beside the acceptance figures they qualify.

On such text a draft model's acceptance is its token-by-token prediction of the target's
continuation (:func:`draft_agreement`); :func:`replay_position_counts` replays greedy
speculation's rounds over that agreement, to show the acceptance per draft position is
nothing more.

Between copy and novel, :func:`continued_tokens` marks the emitted tokens that continue
a span of the context (what a drafter that copies could have guessed) and
:func:`span_lengths` measures how long those stretches run: a copy is one long span, an
edit many medium ones, an answer quotes whole sentences between new ones.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from functools import cache

import torch

from specdec_lib.checks import check_int
from specdec_lib.engine.model import TinyGPT
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


@torch.inference_mode()
def draft_agreement(
    draft: TinyGPT, prompt: Sequence[int], continuation: Sequence[int]
) -> list[bool]:
    """For each token of a greedy continuation: is it the draft's argmax after the true prefix?

    One teacher-forced pass of the draft over prompt + continuation. Nothing here
    depends on a draft length k: it is what the draft model *predicts*, token by token.
    """
    if not prompt or not continuation:
        raise ValueError("prompt and continuation must both hold at least one token")
    ids = torch.tensor([list(prompt) + list(continuation)])
    if ids.shape[1] > draft.config.block_size:
        raise ValueError(
            f"prompt + continuation must fit the draft's context of {draft.config.block_size} "
            f"tokens, got {ids.shape[1]}"
        )
    rows = draft(ids)[0, len(prompt) - 1 : -1]
    return (rows.argmax(-1) == torch.tensor(list(continuation))).tolist()


def greedy_round_openings(agreement: Sequence[bool], k: int) -> list[tuple[int, int]]:
    """The rounds greedy speculation at draft length ``k`` plays over a continuation.

    Each round is (index of its first drafted token, tokens drafted). The draft's
    j-th token is accepted exactly when the draft's argmax after the true prefix is
    the target's token (``agreement``) and every earlier one was; the round then emits
    the accepted tokens plus one from the target, and never drafts past the end.
    """
    check_int("k", k)
    rounds = []
    t, n = 0, len(agreement)
    while t < n:
        m = min(k, n - t - 1)
        accepted = 0
        while accepted < m and agreement[t + accepted]:
            accepted += 1
        if m:
            rounds.append((t, m))
        t += accepted + 1
    return rounds


def replay_position_counts(agreement: Sequence[bool], k: int) -> tuple[list[int], list[int]]:
    """(proposed, accepted) per draft position, as ``SpeculationStats`` counts them, from agreement.

    If greedy speculation with a draft model gives these counts exactly, every
    acceptance it measured is the draft's token-by-token prediction of the text;
    the round length only decides which tokens open a round.
    """
    proposed, accepted = [0] * k, [0] * k
    for start, m in greedy_round_openings(agreement, k):
        run = 0
        while run < m and agreement[start + run]:
            run += 1
        for i in range(m):
            proposed[i] += 1
            accepted[i] += int(i < run)
    while proposed and not proposed[-1]:
        proposed.pop()
        accepted.pop()
    return proposed, accepted
