"""PEARL perturbations: identity at k = 0, exact bit-flip counts, synonym substitution on real spaCy + WordNet."""

import numpy as np
import pytest
from helpers import make_sample, tiny_tokenizer

from fedmem.audit.pearl.perturb import (
    bitflip,
    change_shares,
    default_replacer,
    flip_bits,
    flip_count,
    sample_rng,
    synonym,
)
from fedmem.audit.pearl.prompt_splice import splice_prompt
from fedmem.audit.pearl.wordnet import WordNet, WordNetMissing

TEXT = (
    "In the end, Barack Obama will remember not the words of our enemies in Paris, "
    "but the silence of our friends. The patient complains of severe headaches after taking the new medication."
)


def hamming(a: bytes, b: bytes) -> int:
    return int(np.unpackbits(np.bitwise_xor(np.frombuffer(a, np.uint8), np.frombuffer(b, np.uint8))).sum())


def test_intensity_zero_is_identity():
    assert bitflip(TEXT, 0, sample_rng(0, "x")) == TEXT
    assert synonym(TEXT, 0, sample_rng(0, "x")) == TEXT
    assert flip_bits(b"abc", 0, sample_rng(0, "x")) == b"abc"


@pytest.mark.parametrize("k", [1, 2, 3, 5, 12.5])
def test_flipped_bit_fraction_matches_k(k):
    data = TEXT.encode("utf-8")
    n_bits = 8 * len(data)
    flipped = flip_bits(data, k, sample_rng(3, "s"))
    assert len(flipped) == len(data)
    d = hamming(data, flipped)
    assert d == flip_count(n_bits, k) == round(k / 100 * n_bits)
    assert abs(d / n_bits - k / 100) <= 0.5 / n_bits


def test_bitflip_decodes_the_flipped_bytes_with_replacement():
    rng_a, rng_b = sample_rng(1, "s"), sample_rng(1, "s")
    out = bitflip(TEXT, 4, rng_a)
    assert out == flip_bits(TEXT.encode(), 4, rng_b).decode("utf-8", errors="replace")
    assert out != TEXT


def test_bitflip_is_seeded_and_nested_across_intensities():
    raw = TEXT.encode("utf-8")
    assert bitflip(TEXT, 3, sample_rng(0, "a")) == bitflip(TEXT, 3, sample_rng(0, "a"))
    assert bitflip(TEXT, 3, sample_rng(0, "a")) != bitflip(TEXT, 3, sample_rng(0, "b"))
    positions = []
    for k in range(1, 6):
        x = np.bitwise_xor(np.frombuffer(raw, np.uint8), np.frombuffer(flip_bits(raw, k, sample_rng(0, "a")), np.uint8))
        positions.append(set(np.flatnonzero(np.unpackbits(x)).tolist()))
    assert all(a < b for a, b in zip(positions, positions[1:]))  # strictly growing, each contains the previous


def test_change_shares_by_hand():
    # "the cat sat" -> "the bat sat": 10 of 11 characters matched, 2 of 3 words
    assert change_shares("the cat sat", "the bat sat") == pytest.approx((1 / 11, 1 / 3))
    assert change_shares(TEXT, TEXT) == (0.0, 0.0)
    assert change_shares("", "") == (0.0, 0.0)
    assert change_shares("abc def", "") == (1.0, 1.0)
    # long texts: autojunk would leave the frequent space unmatched and report changes that are not there
    long = " ".join(TEXT.split()[::-1]) * 3
    one_letter = long.replace("silence", "silencE", 1)
    assert change_shares(long, one_letter) == pytest.approx((1 / len(long), 1 / len(long.split())))


def test_bitflip_change_shares_grow_with_k_and_are_zero_at_k0():
    shares = [change_shares(TEXT, bitflip(TEXT, k, sample_rng(0, "a"))) for k in range(6)]
    chars, words = zip(*shares)
    assert shares[0] == (0.0, 0.0)
    assert all(0 <= x <= 1 for x in chars + words)
    assert all(a < b for a, b in zip(chars, chars[1:]))  # nested flips: more characters differ at every k
    assert all(a <= b for a, b in zip(words, words[1:])) and words[1] > 0
    # each flipped bit of ASCII text changes one character at most
    assert TEXT.isascii() and chars[1] * len(TEXT) <= flip_count(8 * len(TEXT), 1)


def test_synonym_replaces_exactly_k_eligible_words_and_keeps_named_entities():
    rep = default_replacer()
    pieces, slots = rep.analyse(TEXT)
    eligible = {s.index: s for s in slots}
    assert len(eligible) >= 5
    words = [p.strip() for p in pieces]
    assert not any(w in ("Barack", "Obama", "Paris") for w in (s.word for s in slots))
    assert not any(w.lower() in ("the", "of", "our", "will", "not") for w in (s.word for s in slots))
    doc = rep.nlp(TEXT)
    ents = {t.i for t in doc if t.ent_type_}
    assert ents  # spaCy found the named entities this test relies on
    for k in range(1, 6):
        out, changed = rep.replace(TEXT, k, sample_rng(0, f"s{k}"))
        assert len(changed) == k
        new_words = [t.text for t in rep.nlp(out)]
        # Same token count here (single-word synonyms); exactly the k changed positions differ.
        assert len(new_words) == len(words)
        diff = [i for i, (a, b) in enumerate(zip(words, new_words)) if a != b]
        assert diff == changed
        for i in diff:
            assert i in eligible and i not in ents
            assert new_words[i].lower() in eligible[i].synonyms
        assert all(new_words[i] == words[i] for i in ents)
        assert synonym(TEXT, k, sample_rng(0, f"s{k}")) == out  # the module function is the same operation


def test_synonym_caps_k_at_the_eligible_words_and_is_nested():
    rep = default_replacer()
    text = "The dog barked loudly."
    n = len(rep.eligible(text))
    assert n >= 1
    out, changed = rep.replace(text, n + 3, sample_rng(0, "z"))
    assert len(changed) == n
    sets = [set(rep.replace(TEXT, k, sample_rng(0, "same"))[1]) for k in range(1, 6)]
    assert all(a < b for a, b in zip(sets, sets[1:]))


def test_wordnet_lookup_and_clear_error_when_missing(tmp_path):
    wn = WordNet()
    assert "foe" in wn.synonyms("enemy", "n", senses=2)
    assert "recall" in wn.synonyms("remember", "v")
    assert wn.synonyms("qwzxv", "n") == []
    with pytest.raises(WordNetMissing, match="apt-get install wordnet-base"):
        WordNet(str(tmp_path))


def test_prompt_splice_rebuilds_the_prompt_with_the_perturbed_prefix():
    tok = tiny_tokenizer()
    s = make_sample(tok, "The patient reported a severe headache after three weeks. Our team observed the faint "
                    "signal near the old bridge.", 0, "train", 0, prefix_len=12, suffix_len=8)
    sp = splice_prompt(tok, s.prompt_ids, s.prefix_text)
    assert sp.roundtrip_exact and sp.build(tok, s.prefix_text) == s.prompt_ids
    # the open user turn: the template's header is kept as ids, nothing follows the prefix
    assert sp.head_ids == s.prompt_ids[: len(sp.head_ids)] and sp.head_ids and sp.tail_ids == ()
    new = sp.build(tok, "HELLO perturbed prefix")
    want = tok.decode(list(s.prompt_ids), skip_special_tokens=False).replace(s.prefix_text, "HELLO perturbed prefix")
    assert tok.decode(list(new), skip_special_tokens=False) == want
    assert new[: len(sp.head_ids)] == sp.head_ids
    with pytest.raises(ValueError, match="does not occur"):
        splice_prompt(tok, s.prompt_ids, "a prefix that is not there")
