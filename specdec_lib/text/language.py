"""The course's own text: a small generated language, training data and workloads.

Nothing is downloaded. A fixed lexicon of pronounceable made-up words is arranged
by a small grammar into sentences, so the text has structure a model can learn
(spaces, function words, word forms, punctuation). Three rules make its content
words partly predictable but never copyable, which is what "novel" text needs:

* **a topic per document**: each document draws its content words from one of
  :data:`N_TOPICS` topics, disjoint parts of the lexicon, each with its own word
  frequencies (Zipf-like: a few words are common, most are rare). A model that has read part of
  a document can guess its topic, so its best guess for the next noun moves with the
  text instead of being the same noun everywhere.
* **no content word twice**: within a document, a noun, verb, adjective or name is
  used at most once (a plural or a verb form counts as its stem). A model that has
  learnt this steps on to a new word instead of repeating one, so greedy decoding
  does not fall into a loop, and a drafter that copies from the context finds
  nothing to copy.
* **documents packed as in pre-training**: every document starts with the
  document token :data:`DOC` (``<|doc|>``); training rows start at a document start,
  exactly like every workload prompt, and notes are longer than any continuation a
  chapter asks for, so a model never learns that a note ends where a workload's
  continuation begins.

Two kinds of document make the four workloads:

* **copy documents**: ``Text: <passage>`` then, after a marker, the passage again
  (``Quote:``, ``Repeat:``: the *copy* workload), its edit (``Edit:``, every verb put in
  the past tense and every adjective before a noun dropped: the *edit* workload), or an
  answer that quotes it (``Answer:``, each sentence of the passage followed by a new one:
  the *answer* workload). Predicting them needs the model to find the passage in its
  context and copy from it, which is the behaviour the n-gram drafter bets on; an edit
  and an answer copy only part of the time, so the drafter is right only part of the time.
* **novel**: ``Note: <prose>``, running prose that never repeats a content word.

Training text and workload prompts come from random generators seeded by
*different strings* (``"train/..."`` versus ``"workload/..."``), so no prompt a
chapter evaluates on was ever seen in training: a model that reproduces a quoted
passage has learned to copy, not memorised.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from specdec_lib.checks import check_int

LANGUAGE_VERSION = "chains-v5"
DOC = "<|doc|>"  # starts every document, as <|endoftext|> separates GPT-2's
_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aeiou"
_PREPOSITIONS = ["near", "with", "under", "over", "by"]
FUNCTION_WORDS = {"the", "a", "of", "and", "near", "with", "under", "over", "by", "to", "is"}
KINDS = ("noun", "verb", "adj", "name")
# The topics split the lexicon into disjoint parts, so one content word tells a reader
# the topic: a small model learns that fast, and then knows which words are left.
N_TOPICS = 4
_LEXICON_SIZES = {"noun": 480, "verb": 200, "adj": 200, "name": 120}


def _make_words(rng: random.Random, n: int, seen: set[str]) -> list[str]:
    words: list[str] = []
    while len(words) < n:
        word = "".join(
            rng.choice(_CONSONANTS) + rng.choice(_VOWELS) for _ in range(rng.randint(2, 3))
        )
        if rng.random() < 0.3:
            word += rng.choice("nrlt")
        # A word and its inflected forms must not collide with any other word's.
        forms = {word, word + "s", word + "ed"}
        if not forms & seen:
            seen.update(forms)
            words.append(word)
    return words


def _lexicon() -> dict[str, list[str]]:
    rng = random.Random("lexicon/v2")
    seen = set(FUNCTION_WORDS)
    lexicon = {kind: _make_words(rng, _LEXICON_SIZES[kind], seen) for kind in KINDS}
    lexicon["name"] = [w.capitalize() for w in lexicon["name"]]
    return lexicon


LEXICON = _lexicon()


def word_forms(kind: str, word: str) -> list[str]:
    """Every form of a lexicon word the grammar writes (each one token of the tokenizer)."""
    if kind == "noun":
        return [word, word + "s"]
    if kind == "verb":
        return [word, word + "s", word + "ed"]
    return [word]


def _word_kinds() -> dict[str, str]:
    kinds = {}
    for kind, stems in LEXICON.items():
        for stem in stems:
            for form in word_forms(kind, stem):
                kinds[form] = kind
    return kinds


_WORD_KINDS = _word_kinds()


def word_class(word: str) -> str:
    """The grammar's class of one written word: a kind of content word, or what else it is.

    ``"The"``, ``" the"`` and ``"the"`` are all ``"function"``; ``" dovas"`` is a
    ``"noun"``, ``"Sivala"`` a ``"name"``; ``"."`` is ``"punctuation"``; document
    tokens and markers are ``"other"``.
    Used to ask *which* words a drafter guesses, not only how many.
    """
    bare = word.strip()
    for form in (bare, bare.lower()):  # names are capitalised; a sentence capitalises others
        if form in _WORD_KINDS:
            return _WORD_KINDS[form]
    if bare.lower() in FUNCTION_WORDS:
        return "function"
    if bare.isdigit():
        return "number"
    if bare and all(c in ".!?," for c in bare):
        return "punctuation"
    return "other"


@dataclass(frozen=True)
class _Topic:
    """A subset of the lexicon with Zipf-like weights: rank r has weight 1 / (r + 2)."""

    words: dict[str, tuple[str, ...]]

    def weights(self, kind: str) -> list[float]:
        return [1.0 / (r + 2) for r in range(len(self.words[kind]))]


def _topics() -> tuple[_Topic, ...]:
    rng = random.Random("topics/v3")
    shuffled = {kind: rng.sample(LEXICON[kind], len(LEXICON[kind])) for kind in KINDS}
    return tuple(
        _Topic({kind: tuple(words[t::N_TOPICS]) for kind, words in shuffled.items()})
        for t in range(N_TOPICS)
    )


TOPICS = _topics()


class _TopicExhausted(Exception):
    """A document has used every word of one kind in its topic: it must end here."""


# How often a content word is the next one along its topic's chain (see Writer.word).
CHAIN = 0.9


class Writer:
    """Draws a document's content words: from its topic, along its chain, never twice.

    Each kind of word in a topic is a list, read as a chain: with probability
    :data:`CHAIN` the next noun (verb, ...) is the first unused one after the previous
    noun in the list, going round at the end; otherwise it is drawn from the unused
    ones by frequency. A model that has learnt the chains can predict much of a note
    without ever having seen the word it predicts, and a greedy reader walks along a
    chain instead of going round in a loop; a drafter that copies finds nothing.
    """

    def __init__(self, rng: random.Random, topic: int | None = None) -> None:
        self.rng = rng
        self.topic = TOPICS[rng.randrange(N_TOPICS) if topic is None else topic]
        self.used: set[str] = set()
        self.last: dict[str, int] = {}

    def word(self, kind: str) -> str:
        words, weights = self.topic.words[kind], self.topic.weights(kind)
        free = [i for i, w in enumerate(words) if w not in self.used]
        if not free:
            raise _TopicExhausted(kind)
        last = self.last.get(kind)
        if last is not None and self.rng.random() < CHAIN:
            i = min(free, key=lambda j: (j - last) % len(words))  # the next unused one along
        else:
            i = self.rng.choices(free, [weights[j] for j in free])[0]
        self.last[kind] = i
        self.used.add(words[i])
        return words[i]


def _np(w: Writer) -> str:
    rng = w.rng
    r = rng.random()
    if r < 0.35:
        return f"the {w.word('noun')}"
    if r < 0.6:
        return f"the {w.word('adj')} {w.word('noun')}"
    if r < 0.75:
        return f"a {w.word('noun')}"
    if r < 0.9:
        return f"{rng.randint(2, 99)} {w.word('noun')}s"
    return w.word("name")


def sentence(w: Writer) -> str:
    """One sentence of the generated language, e.g. ``The dova of Rimeka sopes 12 takus.``"""
    rng = w.rng
    verb = w.word("verb")
    r = rng.random()
    if r < 0.3:
        s = f"{_np(w)} {verb}s {_np(w)}"
    elif r < 0.55:
        s = f"{_np(w)} {verb}ed {_np(w)} {rng.choice(_PREPOSITIONS)} {_np(w)}"
    elif r < 0.75:
        s = f"{_np(w)} of {_np(w)} is {w.word('adj')}"
    else:
        s = f"{_np(w)} and {_np(w)} {verb} {_np(w)}"
    s = s[0].upper() + s[1:]
    return s + rng.choice(".....!?")


def passage(w: Writer, min_chars: int, max_chars: int) -> str:
    """Whole sentences, ``min_chars`` or more (unless the topic runs out), under ``max_chars``.

    A sentence that would overshoot ``max_chars`` is dropped and another drawn; the
    words it drew stay used, which keeps the no-repeat rule simple to state.
    """
    text = ""
    try:
        while len(text) < min_chars:
            s = sentence(w)
            if text and len(text) + 1 + len(s) > max_chars:
                continue
            text = f"{text} {s}" if text else s
    except _TopicExhausted:
        if not text:
            raise
    return text


_VERB_STEMS = {form: stem for stem in LEXICON["verb"] for form in word_forms("verb", stem)}
_ADJECTIVES = frozenset(LEXICON["adj"])


def edit(text: str) -> str:
    """The edit of an ``Edit:`` document: every verb put in the past tense, and every
    adjective before a noun dropped. A rule, not a whim, so a model can learn to make it:
    the edited passage repeats the original with words changed and dropped."""
    out = []
    words = text.split(" ")
    for i, word in enumerate(words):
        bare = word.rstrip(".!?")
        key = bare.lower() if bare[:1].isupper() else bare
        if key in _VERB_STEMS:
            past = _VERB_STEMS[key] + "ed"
            out.append((past.capitalize() if bare[:1].isupper() else past) + word[len(bare) :])
        elif key in _ADJECTIVES and bare == word and i + 1 < len(words):
            if bare[:1].isupper():  # the sentence's first word goes: capitalise the next
                words[i + 1] = words[i + 1][:1].upper() + words[i + 1][1:]
            continue
        else:
            out.append(word)
    return " ".join(out)


def sentences(text: str) -> list[str]:
    """The sentences of ``text``, each with its closing mark, stripped."""
    return [s.strip() for s in re.findall(r"[^.!?]+[.!?]", text)]


def answer(w: Writer, text: str) -> str:
    """The body of an ``Answer:`` document: each sentence of the passage quoted in order,
    each followed by one new sentence of the same document (new words, same topic).
    Spans copied amid new words, as an answer that quotes its source is."""
    out = []
    for quoted in sentences(text):
        out.append(quoted)
        try:
            out.append(sentence(w))
        except _TopicExhausted:
            break
    return " ".join(out)


COPY_MARKERS = ("Quote", "Repeat")
OTHER_MARKERS = ("Text", "Edit", "Note", "Answer")
# Passage length of the "copy" workload, in characters.
_PASSAGE_CHARS = (350, 450)
# A note is longer than any workload prompt plus its longest continuation (about 1,000
# characters), so no note in training ends where a workload continues.
NOTE_CHARS = (1100, 1400)
NOTE_SHARE = 0.2  # share of training documents that are notes (by count, not by length)


def copy_document(rng: random.Random, passage_chars: tuple[int, int] = _PASSAGE_CHARS) -> str:
    """A passage followed by a verbatim copy, its edit (:func:`edit`) or an answer that
    quotes it (:func:`answer`)."""
    w = Writer(rng)
    text = passage(w, *passage_chars)
    r = rng.random()
    if r < 0.2:
        return f"{DOC}Text: {text}\nEdit: {edit(text)}\n"
    if r < 0.4:
        return f"{DOC}Text: {text}\nAnswer: {answer(w, text)}\n"
    return f"{DOC}Text: {text}\n{rng.choice(COPY_MARKERS)}: {text}\n"


def novel_document(rng: random.Random, note_chars: tuple[int, int] = NOTE_CHARS) -> str:
    """Prose with nothing to copy: one topic, no content word twice."""
    return f"{DOC}Note: {passage(Writer(rng), *note_chars)}\n"


def training_text(
    rng: random.Random,
    min_chars: int,
    note_share: float = NOTE_SHARE,
    passage_chars: tuple[int, int] = (20, 400),
) -> str:
    """Documents, each starting with :data:`DOC`, until ``min_chars``: it opens a document.

    A ``note_share`` of the documents are notes; the others are copy documents whose
    passages are drawn between ``passage_chars[0]`` and ``passage_chars[1] + 100``.
    """
    if not 0 <= note_share <= 1:
        raise ValueError(f"note_share must lie in [0, 1], got {note_share}")
    docs: list[str] = []
    total = 0
    while total < min_chars:
        if rng.random() < note_share:
            doc = novel_document(rng)
        else:
            shortest = rng.randint(*passage_chars)
            doc = copy_document(rng, (shortest, shortest + 100))
        docs.append(doc)
        total += len(doc)
    return "".join(docs)


@dataclass(frozen=True)
class Example:
    """A workload prompt and the continuation the generator wrote after it."""

    prompt: str
    reference: str


WORKLOADS = ("copy", "novel", "edit", "answer")
# Where a novel prompt is cut, in characters of the note's prose.
_NOVEL_PROMPT_CHARS = (250, 350)


def workload_examples(name: str, n: int, seed: int) -> list[Example]:
    """``n`` prompts of workload ``name`` with their reference continuations.

    ``copy``: ``"<|doc|>Text: <passage>\\nQuote:"``; the reference is ``" <passage>"`` again.
    ``edit``: ``"<|doc|>Text: <passage>\\nEdit:"``; the reference is the passage's
    :func:`edit`, which follows a rule, so a model that learnt the rule can write it.
    ``answer``: ``"<|doc|>Text: <passage>\\nAnswer:"``; the reference is one
    :func:`answer`, whose new sentences are one draw among many (a model that quotes in
    the right places but writes other new sentences is right, not wrong).
    ``novel``: ``"<|doc|>Note: <prose>"`` cut at a word boundary, usually mid-sentence;
    the reference is the rest of the note (at least 1,000 characters).
    A prompt never ends in a space: the space belongs to the next word's token (``" The"``),
    so a prompt ending in a bare space would ask for a token sequence training never saw.
    Deterministic in ``seed``; seeded apart from all training text.
    """
    if name not in WORKLOADS:
        raise ValueError(f"name must be one of {WORKLOADS}, got {name!r}")
    check_int("n", n)
    rng = random.Random(f"workload/{name}/{seed}")
    examples = []
    for _ in range(n):
        if name in ("copy", "edit", "answer"):
            w = Writer(rng)
            text = passage(w, *_PASSAGE_CHARS)
            if name == "copy":
                marker, body = "Quote", text
            elif name == "edit":
                marker, body = "Edit", edit(text)
            else:
                marker, body = "Answer", answer(w, text)
            examples.append(Example(f"{DOC}Text: {text}\n{marker}:", f" {body}"))
        else:
            note = passage(Writer(rng), *NOTE_CHARS)
            spaces = [i for i, c in enumerate(note) if c == " "]
            cut = rng.choice(
                [i for i in spaces if _NOVEL_PROMPT_CHARS[0] <= i <= _NOVEL_PROMPT_CHARS[1]]
            )
            examples.append(Example(f"{DOC}Note: {note[:cut]}", note[cut:]))
    return examples


def workload_prompts(name: str, n: int, seed: int) -> list[str]:
    """Prompt strings of the named workload (one of :data:`WORKLOADS`)."""
    return [e.prompt for e in workload_examples(name, n, seed)]
