import random

import pytest

from specdec_lib import Tokenizer, workload_examples, workload_prompts
from specdec_lib.text.language import LEXICON, copy_document, light_edit, passage, training_text


def test_words_of_the_language_are_single_tokens_and_suffixes_split_off():
    tok = Tokenizer()
    noun, verb = LEXICON["noun"][0], LEXICON["verb"][0]
    text = f"Text: The {noun} {verb}ed 12 {noun}s."
    pieces = [tok.piece(i) for i in tok.encode(text)]
    assert pieces == [
        "Text",
        ":",
        " The",
        f" {noun}",
        f" {verb}",
        "ed",
        " 12",
        f" {noun}",
        "s",
        ".",
    ]


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


def test_generated_text_takes_about_four_bytes_per_token():
    tok = Tokenizer()
    text = training_text(random.Random("t"), 20_000)
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert 3.5 < len(text.encode()) / len(ids) < 4.5
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
        assert ex.prompt == f"Text:{ex.reference}\nQuote:"
        assert len(Tokenizer().encode(ex.reference)) >= 64  # long enough for a 64-token quote


def test_novel_continuations_do_not_repeat_the_prompt():
    for ex in workload_examples("novel", 8, seed=0):
        assert ex.reference[:40] not in ex.prompt


def test_workloads_reject_unknown_names_and_bad_counts():
    with pytest.raises(ValueError, match="name"):
        workload_prompts("poetry", 1, 0)
    with pytest.raises(ValueError, match="n must"):
        workload_prompts("copy", 0, 0)


def test_training_text_is_deterministic_and_mixes_both_kinds_of_document():
    a = training_text(random.Random("t"), 20_000)
    assert a == training_text(random.Random("t"), 20_000)
    assert "Note: " in a and ("Quote: " in a or "Repeat: " in a)


def test_copy_documents_repeat_their_passage():
    doc = copy_document(random.Random(3))
    source, copy = doc.split("\n")[0], doc.split("\n")[1]
    source_text, copied = source.split(": ", 1)[1], copy.split(": ", 1)[1]
    differing = sum(a != b for a, b in zip(source_text.split(), copied.split(), strict=True))
    assert differing <= 1


def test_light_edit_changes_exactly_one_word():
    rng = random.Random(0)
    text = passage(rng, 200, 300)
    edited = light_edit(rng, text)
    assert sum(a != b for a, b in zip(text.split(), edited.split(), strict=True)) == 1
