"""The course's own text: a small generated language, training data and workloads.

Nothing is downloaded. A fixed lexicon of pronounceable made-up words is arranged
by a small grammar into sentences, so the text has structure a model can learn
(spaces, function words, word shapes, punctuation) while its content words are
unpredictable. Two kinds of document make the two workloads:

* **copy**: a passage, then the same passage again after a marker (``Quote:``,
  ``Repeat:``) or lightly edited (``Edit:``). Predicting the second copy needs the
  model to find the passage in its context and copy it, which is the behaviour
  the n-gram drafter bets on.
* **novel**: running prose that never repeats beyond short, common phrases.

Training text and workload prompts come from random generators seeded by
*different strings* (``"train/..."`` versus ``"workload/..."``), so no prompt a
chapter evaluates on was ever seen in training: a model that reproduces a quoted
passage has learned to copy, not memorised.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aeiou"
_PREPOSITIONS = ["near", "with", "under", "over", "by"]
FUNCTION_WORDS = {"the", "a", "of", "and", "near", "with", "under", "over", "by", "to", "is"}


def _make_words(rng: random.Random, n: int, min_syl: int, max_syl: int) -> list[str]:
    words: list[str] = []
    seen = set(FUNCTION_WORDS)
    while len(words) < n:
        syllables = rng.randint(min_syl, max_syl)
        word = "".join(rng.choice(_CONSONANTS) + rng.choice(_VOWELS) for _ in range(syllables))
        if rng.random() < 0.3:
            word += rng.choice("nrslt")
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def _lexicon() -> dict[str, list[str]]:
    rng = random.Random("lexicon/v1")
    return {
        "noun": _make_words(rng, 600, 2, 3),
        "verb": _make_words(rng, 250, 2, 3),
        "adj": _make_words(rng, 250, 2, 3),
        "name": [w.capitalize() for w in _make_words(rng, 150, 2, 3)],
    }


LEXICON = _lexicon()


def _np(rng: random.Random) -> str:
    noun = rng.choice(LEXICON["noun"])
    r = rng.random()
    if r < 0.35:
        return f"the {noun}"
    if r < 0.6:
        return f"the {rng.choice(LEXICON['adj'])} {noun}"
    if r < 0.75:
        return f"a {noun}"
    if r < 0.9:
        return f"{rng.randint(2, 99)} {noun}s"
    return rng.choice(LEXICON["name"])


def sentence(rng: random.Random) -> str:
    """One sentence of the generated language, e.g. ``The dova of Rimeka sopes 12 takus.``"""
    verb = rng.choice(LEXICON["verb"])
    r = rng.random()
    if r < 0.3:
        s = f"{_np(rng)} {verb}s {_np(rng)}"
    elif r < 0.55:
        s = f"{_np(rng)} {verb}ed {_np(rng)} {rng.choice(_PREPOSITIONS)} {_np(rng)}"
    elif r < 0.75:
        s = f"{_np(rng)} of {_np(rng)} is {rng.choice(LEXICON['adj'])}"
    else:
        s = f"{_np(rng)} and {_np(rng)} {verb} {_np(rng)}"
    s = s[0].upper() + s[1:]
    return s + rng.choice(".....!?")


def passage(rng: random.Random, min_chars: int, max_chars: int) -> str:
    """Whole sentences, at least ``min_chars`` long, cut back under ``max_chars``."""
    text = ""
    while len(text) < min_chars:
        s = sentence(rng)
        if text and len(text) + 1 + len(s) > max_chars:
            continue
        text = f"{text} {s}" if text else s
    return text


def light_edit(rng: random.Random, text: str) -> str:
    """Replace one content word with another: the kind of edit a reviser makes."""
    words = text.split(" ")
    candidates = [i for i, w in enumerate(words) if w.strip(".!?").lower() not in FUNCTION_WORDS]
    i = rng.choice(candidates)
    tail = words[i][len(words[i].rstrip(".!?")) :]
    words[i] = rng.choice(LEXICON["noun"]) + tail
    return " ".join(words)


COPY_MARKERS = ("Quote", "Repeat")
OTHER_MARKERS = ("Text", "Edit", "Note")
# Passage length of the "copy" workload, in characters.
PASSAGE_CHARS = (300, 400)


def copy_document(rng: random.Random, passage_chars: tuple[int, int] = PASSAGE_CHARS) -> str:
    """A passage followed by a verbatim or lightly edited copy of it."""
    text = passage(rng, *passage_chars)
    r = rng.random()
    if r < 0.2:
        return f"Text: {text}\nEdit: {light_edit(rng, text)}\n"
    marker = rng.choice(COPY_MARKERS)
    return f"Text: {text}\n{marker}: {text}\n"


def novel_document(rng: random.Random) -> str:
    """Prose with nothing to copy."""
    return f"Note: {passage(rng, 200, 900)}\n"


def word_list_document(rng: random.Random, n_words: tuple[int, int] = (4, 40)) -> str:
    """A list of random content words, then the list again: text only copying can predict.

    In a passage of sentences, grammar already predicts half the tokens of the copy; in a
    word list nothing does, so every token of the repeat rewards copying. A small share of
    these in training makes the copying circuit form sooner.
    """
    words = " ".join(
        rng.choice(LEXICON[rng.choice(("noun", "verb", "adj"))])
        for _ in range(rng.randint(*n_words))
    )
    return f"Text: {words}\nRepeat: {words}\n"


def training_text(
    rng: random.Random,
    min_chars: int,
    copy_share: float = 0.5,
    passage_chars: tuple[int, int] = PASSAGE_CHARS,
    word_list_share: float = 0.0,
) -> str:
    """Documents separated by blank lines, a ``copy_share`` of them copy documents.

    A ``word_list_share`` of the copy documents are word lists (see :func:`word_list_document`).
    """
    docs: list[str] = []
    total = 0
    while total < min_chars:
        if rng.random() < copy_share:
            if word_list_share and rng.random() < word_list_share:
                doc = word_list_document(rng)
            else:
                shortest = rng.randint(*passage_chars)
                doc = copy_document(rng, (shortest, shortest + 100))
        else:
            doc = novel_document(rng)
        docs.append(doc)
        total += len(doc) + 1
    return "\n".join(docs)


@dataclass(frozen=True)
class Example:
    """A workload prompt and the continuation the generator wrote after it."""

    prompt: str
    reference: str


WORKLOADS = ("copy", "novel")


def workload_examples(name: str, n: int, seed: int) -> list[Example]:
    """``n`` prompts of workload ``name`` with their reference continuations.

    ``copy``: ``"Text: <passage>\\nQuote:"``; the reference is ``" <passage>"`` again.
    ``novel``: ``"Note: <prose>"`` cut mid-paragraph; the reference is fresh prose.
    A prompt never ends in a space: the space belongs to the next word's token (``" The"``),
    so a prompt ending in a bare space would ask for a token sequence training never saw.
    Deterministic in ``seed``; seeded apart from all training text.
    """
    if name not in WORKLOADS:
        raise ValueError(f"name must be one of {WORKLOADS}, got {name!r}")
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    rng = random.Random(f"workload/{name}/{seed}")
    examples = []
    for _ in range(n):
        if name == "copy":
            text = passage(rng, *PASSAGE_CHARS)
            examples.append(Example(f"Text: {text}\nQuote:", f" {text}"))
        else:
            head = passage(rng, 250, 350)
            tail = passage(rng, 300, 400)
            examples.append(Example(f"Note: {head}", f" {tail}"))
    return examples


def workload_prompts(name: str, n: int, seed: int) -> list[str]:
    """Prompt strings of the named workload (``"copy"`` or ``"novel"``)."""
    return [e.prompt for e in workload_examples(name, n, seed)]
