"""What the shipped target writes: "novel" continuations stay in their note and do not loop.

The full measurement (64 prompts, greedy and T = 1, both drafters, paired intervals) is
``benchmarks/novel_workload.py``; these tests hold the same properties on a smaller
sample from a seed of their own, so a retrained model that breaks one fails here.
"""

import pytest
import torch
from measures import draft_agreement, greedy_round_openings, replay_position_counts

from specdec_lib import (
    DraftModelDrafter,
    NgramDrafter,
    SamplingParams,
    SpeculationStats,
    generate,
    speculative_generate,
    workload_prompts,
)
from specdec_lib.analysis.intervals import paired_tokens_per_pass_difference, position_acceptance
from specdec_lib.analysis.novelty import (
    distinct_ngram_share,
    stays_in_document,
    unique_opening_share,
)
from specdec_lib.text.language import word_class

SEED = 8080
N = 16
TOKENS = 128


@pytest.fixture(scope="module")
def novel(tok):
    return [tok.encode(p) for p in workload_prompts("novel", N, SEED)]


@pytest.fixture(scope="module")
def greedy_outputs(target, novel):
    return [generate(target, ids, SamplingParams(max_tokens=TOKENS)) for ids in novel]


def test_greedy_novel_continuations_stay_in_the_note_and_do_not_loop(greedy_outputs):
    assert sum(map(stays_in_document, greedy_outputs)) >= 0.95 * N
    assert min(distinct_ngram_share(o) for o in greedy_outputs) >= 0.9
    assert unique_opening_share(greedy_outputs, 16) >= 0.95


def test_sampled_novel_continuations_stay_in_the_note(target, novel):
    params = SamplingParams(temperature=1.0, max_tokens=TOKENS)
    outs = [
        generate(target, ids, params, torch.Generator().manual_seed(i))
        for i, ids in enumerate(novel)
    ]
    assert sum(map(stays_in_document, outs)) >= 0.95 * N


def test_the_ngram_drafter_finds_little_on_novel(target, novel, greedy_outputs):
    stats = SpeculationStats()
    for ids, ref in zip(novel, greedy_outputs, strict=True):
        out = speculative_generate(
            target, NgramDrafter(), ids, SamplingParams(max_tokens=TOKENS), k=4, stats=stats
        )
        assert out == ref
    assert stats.tokens_per_pass <= 1.5


def test_novelty_measures_on_known_sequences():
    assert distinct_ngram_share(list(range(20))) == 1.0
    loop = [1, 2, 3, 4, 5, 6, 7] * 18  # a 7-token loop over 126 tokens
    assert distinct_ngram_share(loop) == pytest.approx(7 / 123)
    assert unique_opening_share([[1, 2], [1, 2], [3, 4]], 2) == pytest.approx(1 / 3)
    assert stays_in_document([300, 301]) and not stays_in_document([300, 10, 301])
    with pytest.raises(ValueError, match="n must"):
        distinct_ngram_share([1, 2, 3], n=0)
    with pytest.raises(ValueError, match="at least n"):
        distinct_ngram_share([1, 2], n=4)


def test_paired_difference_and_position_acceptance_intervals():
    def stats(emitted, passes, accepted, proposed):
        s = SpeculationStats(emitted=emitted, target_passes=passes)
        s.position_accepted, s.position_proposed = list(accepted), list(proposed)
        return s

    a = [stats(30, 10, [8], [10]) for _ in range(10)]
    b = [stats(12, 10, [1], [10]) for _ in range(10)]
    diff = paired_tokens_per_pass_difference(a, b)
    assert diff.value == pytest.approx(1.8) and diff.resolves(0.0)
    est = position_acceptance(a)
    assert est[0].value == pytest.approx(0.8) and est[0].low <= 0.8 <= est[0].high
    with pytest.raises(ValueError, match="one stats object per prompt"):
        paired_tokens_per_pass_difference(a, b[:3])


def test_draft_acceptance_per_position_is_the_replay_of_its_token_by_token_guesses(
    target, draft, novel, greedy_outputs
):
    """At every k, the engine's per-position counts follow from one k-free agreement vector."""
    for ids, ref in list(zip(novel, greedy_outputs, strict=True))[:4]:
        agreement = draft_agreement(draft, ids, ref)
        for k in (1, 3, 6):
            stats = SpeculationStats()
            out = speculative_generate(
                target,
                DraftModelDrafter(draft),
                ids,
                SamplingParams(max_tokens=TOKENS),
                k=k,
                stats=stats,
            )
            assert out == ref
            assert replay_position_counts(agreement, k) == (
                stats.position_proposed,
                stats.position_accepted,
            )


def test_round_replay_on_a_known_agreement_vector():
    # Agreement 1 1 0 1 1 1 1 at k = 2: rounds open at 0 (2 accepted), 3 (2 accepted), 6 (end).
    agreement = [True, True, False, True, True, True, True]
    assert greedy_round_openings(agreement, 2) == [(0, 2), (3, 2)]
    assert replay_position_counts(agreement, 2) == ([2, 2], [2, 2])
    # At k = 3 the first round drafts 3 and is stopped at the miss.
    assert greedy_round_openings(agreement, 3) == [(0, 3), (3, 3)]
    assert replay_position_counts(agreement, 3) == ([2, 2, 2], [2, 2, 1])
    with pytest.raises(ValueError, match="k must"):
        greedy_round_openings(agreement, 0)


def test_draft_agreement_refuses_empty_or_overlong_input(draft):
    with pytest.raises(ValueError, match="prompt and continuation"):
        draft_agreement(draft, [], [1])
    with pytest.raises(ValueError, match="context"):
        draft_agreement(draft, [1] * draft.config.block_size, [1])


def test_word_classes_of_the_grammar():
    assert word_class("The") == word_class(" the") == "function"
    assert word_class(" 12") == "number" and word_class("!") == "punctuation"
    assert word_class("<|doc|>") == "other"
    from specdec_lib.text.language import LEXICON

    assert word_class(" " + LEXICON["noun"][0] + "s") == "noun"
    assert word_class(LEXICON["verb"][0] + "ed") == "verb"
    assert word_class(LEXICON["name"][0]) == "name"
    assert word_class(LEXICON["adj"][0].capitalize()) == "adj"


def test_continued_tokens_mark_what_continues_a_span_of_the_context():
    from specdec_lib.analysis.novelty import continued_tokens, span_lengths

    prompt = [1, 2, 3, 4, 5, 6]
    # 2 and 3 after 6 are new 3-grams (5 6 2, 6 2 3); 4 and 5 continue the prompt's
    # span (2 3 4, 3 4 5); 9 breaks it, 5 and 6 after 9 are new (4 5 9, 5 9 5, 9 5 6);
    # then 2 3 repeat 3-grams the output itself wrote (5 6 2, 6 2 3).
    output = [2, 3, 4, 5, 9, 5, 6, 2, 3]
    flags = continued_tokens(prompt, output)
    assert flags == [False, False, True, True, False, False, False, True, True]
    assert span_lengths(flags) == [2, 2]
    assert span_lengths([True, True]) == [2] and span_lengths([False]) == []
    assert continued_tokens([], [7, 7, 7, 7]) == [False, False, False, True]
    with pytest.raises(ValueError, match="n must be an integer >= 2"):
        continued_tokens(prompt, output, n=1)


def test_repeated_content_words_count_a_word_in_any_form_once_said(tok):
    from specdec_lib.analysis.novelty import repeated_content_words
    from specdec_lib.text.language import LEXICON

    noun, verb = LEXICON["noun"][0], LEXICON["verb"][0]
    other = LEXICON["noun"][1]
    prompt = tok.encode(f"The {noun} {verb}ed the {other}.")
    output = tok.encode(f" The {noun}s {verb}s a {LEXICON['noun'][2]}.")
    assert [tok.piece(t) for t in output][1:3] == [f" {noun}s", f" {verb}s"]
    # " The" and " a" and "." are not content words; the plural and the verb form are
    # the prompt's words again; the third noun is new, then said again in the output
    assert repeated_content_words(prompt, output, tok) == [None, True, True, None, False, None]
    again = tok.encode(f" the {LEXICON['noun'][2]}s")
    assert repeated_content_words(prompt, output + again, tok)[-2:] == [None, True]
    assert repeated_content_words([], [], tok) == []


def test_rule_hits_compare_an_edit_position_by_position_and_an_answer_by_sentences():
    from specdec_lib import Tokenizer, workload_examples
    from specdec_lib.analysis.novelty import rule_hits
    from specdec_lib.text.language import sentences

    tok = Tokenizer()
    edit = workload_examples("edit", 1, seed=77)[0]
    ref = tok.encode(edit.reference)[:20]
    assert rule_hits(edit, ref, tok) == (20, 20)
    assert rule_hits(edit, ref[:10] + [ref[0]] * 10, tok)[0] < 20
    answer = workload_examples("answer", 1, seed=77)[0]
    ref = tok.encode(answer.reference)
    hits, trials = rule_hits(answer, ref, tok)
    assert hits == trials == len(sentences(answer.prompt.split("\n")[0].split(": ", 1)[1]))
    first_only = tok.encode(" " + sentences(answer.reference)[0])
    assert rule_hits(answer, first_only, tok) == (1, 1)
    novel = workload_examples("novel", 1, seed=77)[0]
    with pytest.raises(ValueError, match="example must be a Quote:, Edit: or Answer: prompt"):
        rule_hits(novel, ref, tok)


def test_answer_sentence_kinds_tell_a_quote_with_a_word_dropped_from_a_new_sentence():
    from specdec_lib import Tokenizer, workload_examples
    from specdec_lib.analysis.novelty import answer_sentence_kinds
    from specdec_lib.text.language import sentences

    tok = Tokenizer()
    answer = workload_examples("answer", 1, seed=77)[0]
    passage = sentences(answer.prompt.split("\n")[0].split(": ", 1)[1])
    reference = sentences(answer.reference)
    # the generator's answer: each passage sentence quoted, then one new sentence
    kinds = [k for k, _ in answer_sentence_kinds(answer, tok.encode(answer.reference), tok)]
    assert kinds[0::2] == ["quote"] * len(kinds[0::2]) and "new" in kinds[1::2]
    words = passage[0].split()
    dropped = " ".join(words[:1] + words[2:])  # the sentence without its second word
    written = tok.encode(" " + dropped + " " + reference[1])
    assert [k for k, _ in answer_sentence_kinds(answer, written, tok)][0] == "near-quote"
    cut = tok.encode(" " + passage[0][:-1])  # no closing mark: not a whole sentence
    assert answer_sentence_kinds(answer, cut, tok) == []
    with pytest.raises(ValueError, match="near must lie in"):
        answer_sentence_kinds(answer, written, tok, near=0)
    novel = workload_examples("novel", 1, seed=77)[0]
    with pytest.raises(ValueError, match="example must be an Answer: prompt"):
        answer_sentence_kinds(novel, written, tok)
