import random

import pytest

from specdec_lib import Tokenizer, workload_examples, workload_prompts
from specdec_lib.data import copy_document, light_edit, passage, training_text


def test_tokenizer_round_trips_text_as_bytes():
    tok = Tokenizer()
    text = "Text: The dova sopes 12 takus.\nQuote: "
    assert tok.encode(text) == list(text.encode())
    assert tok.decode(tok.encode(text)) == text


def test_tokenizer_rejects_ids_outside_the_byte_range():
    with pytest.raises(ValueError, match=r"\[0, 255\]"):
        Tokenizer().decode([65, 256])


def test_workloads_are_deterministic_in_seed_and_differ_across_seeds():
    assert workload_prompts("copy", 3, seed=7) == workload_prompts("copy", 3, seed=7)
    assert workload_prompts("copy", 3, seed=7) != workload_prompts("copy", 3, seed=8)
    assert workload_prompts("novel", 2, seed=1) == workload_prompts("novel", 2, seed=1)


def test_copy_prompts_contain_the_passage_their_continuation_repeats():
    for ex in workload_examples("copy", 8, seed=0):
        assert ex.prompt.startswith(f"Text: {ex.reference}\n")
        assert ex.prompt.endswith("Quote: ")
        assert len(ex.reference) >= 256  # long enough for a 256-token quote


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
