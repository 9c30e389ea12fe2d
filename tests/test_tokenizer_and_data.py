import random
import re

import pytest

from specdec_lib import Tokenizer, workload_examples, workload_prompts
from specdec_lib.text.language import (
    DOC,
    FUNCTION_WORDS,
    KINDS,
    LEXICON,
    NOTE_CHARS,
    TOPICS,
    Writer,
    answer,
    copy_document,
    edit,
    novel_document,
    passage,
    training_text,
    word_forms,
)


def test_word_forms_of_the_language_are_single_tokens():
    tok = Tokenizer()
    noun, verb = LEXICON["noun"][0], LEXICON["verb"][0]
    text = f"{DOC}Text: The {noun} {verb}ed 12 {noun}s."
    pieces = [tok.piece(i) for i in tok.encode(text)]
    assert pieces == [DOC, "Text", ":", " The", f" {noun}", f" {verb}ed", " 12", f" {noun}s", "."]


def test_no_two_lexicon_words_share_a_form():
    forms = [f for kind in KINDS for w in LEXICON[kind] for f in word_forms(kind, w.lower())]
    assert len(forms) == len(set(forms))


def test_every_string_round_trips_through_byte_fallback():
    tok = Tokenizer()
    rng = random.Random(0)
    samples = ["", " ", "\n\n", "naïve café ☃", "Zzyzx qwerty", "dovas!!", "x" * 50]
    samples += ["".join(chr(rng.randrange(1, 0x3000)) for _ in range(30)) for _ in range(50)]
    for text in samples:
        assert tok.decode(tok.encode(text)) == text


def test_every_single_byte_is_a_token_so_any_byte_string_round_trips():
    tok = Tokenizer()
    assert [tok.decode([b]) for b in range(128)] == [chr(b) for b in range(128)]
    assert tok.encode("é") == list("é".encode())  # a character outside the vocabulary: its bytes
    rng = random.Random(1)
    for _ in range(200):
        data = bytes(rng.randrange(256) for _ in range(rng.randint(0, 40)))
        text = data.decode("utf-8", errors="replace")
        assert tok.decode(tok.encode(text)) == text


def test_generated_text_takes_about_five_bytes_per_token():
    tok = Tokenizer()
    text = training_text(random.Random("t"), 20_000)
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert 4.0 < len(text.encode()) / len(ids) < 5.5
    assert sum(i < 256 for i in ids) / len(ids) < 0.2  # punctuation, spaces, digits


def test_tokenizer_rejects_ids_outside_the_vocabulary():
    tok = Tokenizer()
    with pytest.raises(ValueError, match=rf"\[0, {tok.vocab_size - 1}\]"):
        tok.decode([65, tok.vocab_size])
    with pytest.raises(ValueError, match="text must be a str"):
        tok.encode(b"bytes")


def test_workloads_are_deterministic_in_seed_and_differ_across_seeds():
    assert workload_prompts("copy", 3, seed=7) == workload_prompts("copy", 3, seed=7)
    assert workload_prompts("copy", 3, seed=7) != workload_prompts("copy", 3, seed=8)
    assert workload_prompts("novel", 2, seed=1) == workload_prompts("novel", 2, seed=1)


def test_copy_prompts_contain_the_passage_their_continuation_repeats():
    for ex in workload_examples("copy", 8, seed=0):
        assert ex.prompt == f"{DOC}Text:{ex.reference}\nQuote:"
        assert len(Tokenizer().encode(ex.reference)) >= 64  # long enough for a 64-token quote


def test_novel_continuations_do_not_repeat_the_prompt():
    for ex in workload_examples("novel", 8, seed=0):
        assert ex.reference[:40] not in ex.prompt


def _content_stems(text: str) -> list[str]:
    """The content words of a text, each reduced to its lexicon stem."""
    stems = {}
    for kind in KINDS:
        for w in LEXICON[kind]:
            for form in word_forms(kind, w):
                stems[form.lower()] = w.lower()
    return [
        stems[w]
        for w in text.lower().replace(".", " ").replace("!", " ").replace("?", " ").split()
        if w in stems
    ]


def test_a_note_never_uses_a_content_word_twice():
    for seed in range(20):
        doc = novel_document(random.Random(seed))
        stems = _content_stems(doc)
        assert len(stems) > 100
        assert len(stems) == len(set(stems))


def test_a_novel_prompt_and_its_continuation_share_no_content_word():
    for ex in workload_examples("novel", 16, seed=3):
        assert not set(_content_stems(ex.prompt)) & set(_content_stems(ex.reference))


def test_a_note_draws_its_words_from_one_topic():
    rng = random.Random(5)
    w = Writer(rng)
    text = passage(w, *NOTE_CHARS)
    topic_words = {x.lower() for kind in KINDS for x in w.topic.words[kind]}
    assert set(_content_stems(text)) <= topic_words
    # and topics differ: two topics share well under half of their nouns
    shared = set(TOPICS[0].words["noun"]) & set(TOPICS[1].words["noun"])
    assert len(shared) < len(TOPICS[0].words["noun"]) / 2


def test_frequent_words_of_a_topic_come_first():
    # Zipf-like weights: over many notes, a topic's first noun is used far more often than its last
    counts = {"first": 0, "last": 0}
    for seed in range(200):
        w = Writer(random.Random(seed), topic=0)
        passage(w, 300, 400)
        counts["first"] += TOPICS[0].words["noun"][0] in w.used
        counts["last"] += TOPICS[0].words["noun"][-1] in w.used
    assert counts["first"] > 4 * counts["last"]


def test_notes_are_longer_than_any_workload_continuation():
    tok = Tokenizer()
    for seed in range(10):
        doc = novel_document(random.Random(seed))
        assert len(doc) >= NOTE_CHARS[0]
    for ex in workload_examples("novel", 16, seed=4):
        assert (
            len(tok.encode(ex.reference)) >= 140
        )  # 128 tokens of continuation fit inside the note


def test_novel_prompts_start_a_document_and_are_cut_inside_the_note():
    for ex in workload_examples("novel", 32, seed=6):
        assert ex.prompt.startswith(f"{DOC}Note: ")
        assert not ex.prompt.endswith(" ") and ex.reference.startswith(" ")
        assert "\n" not in ex.prompt + ex.reference
    endings = [ex.prompt[-1] in ".!?" for ex in workload_examples("novel", 64, seed=6)]
    assert sum(endings) < 16  # most prompts end mid-sentence


def test_training_text_starts_every_document_with_the_document_token():
    text = training_text(random.Random("d"), 200_000)
    docs = text.split(DOC)
    assert docs[0] == ""  # the text starts at a document start
    assert all(d.startswith(("Text: ", "Note: ")) and d.endswith("\n") for d in docs[1:])
    notes = sum(d.startswith("Note: ") for d in docs[1:])
    assert 0.1 < notes / (len(docs) - 1) < 0.3


def test_workloads_reject_unknown_names_and_bad_counts():
    with pytest.raises(ValueError, match="name"):
        workload_prompts("poetry", 1, 0)
    with pytest.raises(ValueError, match="n must"):
        workload_prompts("copy", 0, 0)


def test_training_text_is_deterministic_and_mixes_both_kinds_of_document():
    a = training_text(random.Random("t"), 20_000)
    assert a == training_text(random.Random("t"), 20_000)
    assert "Note: " in a and ("Quote: " in a or "Repeat: " in a)
    with pytest.raises(ValueError, match="note_share"):
        training_text(random.Random("t"), 100, note_share=1.5)


def test_copy_documents_repeat_edit_or_answer_from_their_passage():
    kinds = set()
    for seed in range(60):
        doc = copy_document(random.Random(seed))
        assert doc.startswith(DOC)
        source, copy = doc.split("\n")[0], doc.split("\n")[1]
        source_text = source.split(": ", 1)[1]
        marker, body = copy.split(": ", 1)
        kinds.add(marker)
        if marker == "Edit":
            assert body == edit(source_text)
        elif marker == "Answer":
            first = re.match(r"[^.!?]+[.!?]", source_text).group(0)
            assert body.startswith(first)
        else:
            assert body == source_text
    assert kinds == {"Quote", "Repeat", "Edit", "Answer"}


def test_edit_puts_verbs_in_the_past_and_drops_adjectives_before_nouns():
    verb, noun = LEXICON["verb"][0], LEXICON["noun"][0]
    adj = LEXICON["adj"][0]
    text = f"The {adj} {noun} {verb}s the {noun}s. {adj.capitalize()} {noun}s {verb} a {noun}!"
    edited = edit(text)
    assert edited == f"The {noun} {verb}ed the {noun}s. {noun.capitalize()}s {verb}ed a {noun}!"
    for seed in range(30):  # an edit keeps the passage's order: what it keeps is a subsequence
        text = passage(Writer(random.Random(seed)), 200, 300)
        kept = iter(w.lower() for w in text.split())
        for word in edit(text).split():
            stem = word.lower().rstrip(".!?")
            assert any(stem.split("ed")[0] in k for k in kept), (text, word)


def test_answer_quotes_every_sentence_in_order_with_a_new_one_after_each():
    for seed in range(30):
        w = Writer(random.Random(seed))
        text = passage(w, 200, 300)
        body = answer(w, text)
        quoted = [s.strip() for s in re.findall(r"[^.!?]+[.!?]", text)]
        sentences = [s.strip() for s in re.findall(r"[^.!?]+[.!?]", body)]
        assert sentences[0::2][: len(quoted)] == quoted[: len(sentences[0::2])]
        assert len(sentences) >= 2 * len(quoted) - 1
        new = {
            w for w in " ".join(sentences[1::2]).lower().split() if not w.isdigit()
        } - FUNCTION_WORDS
        assert not new & set(text.lower().split())  # the new sentences use new content words


def test_content_words_of_a_note_mostly_follow_their_topic_chain():
    from specdec_lib.text.language import CHAIN

    follows = total = 0
    for seed in range(40):
        w = Writer(random.Random(seed))
        order = {kind: list(w.topic.words[kind]) for kind in KINDS}
        drawn: list[tuple[str, int]] = []
        original = w.word

        def spy(kind, original=original, drawn=drawn, order=order):
            word = original(kind)
            drawn.append((kind, order[kind].index(word)))
            return word

        w.word = spy
        passage(w, 600, 700)
        last: dict[str, int] = {}
        used: dict[str, set[int]] = {kind: set() for kind in KINDS}
        for kind, i in drawn:
            if kind in last:
                n = len(order[kind])
                step = next(d for d in range(1, n) if (last[kind] + d) % n not in used[kind])
                follows += i == (last[kind] + step) % n
                total += 1
            last[kind] = i
            used[kind].add(i)
    assert abs(follows / total - CHAIN) < 0.05


def test_a_byte_of_a_multibyte_character_is_shown_as_its_byte_not_a_replacement_character():
    tok = Tokenizer()
    pieces = [tok.piece(i) for i in tok.encode("café")]
    assert pieces[-2:] == ["<0xC3>", "<0xA9>"] and "\ufffd" not in "".join(pieces)
    assert tok.decode(tok.encode("café")) == "café"
