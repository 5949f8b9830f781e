"""Property tests of the discriminator F (hypothesis): verbatim copies are always found, and a pair's verdict
does not depend on what else is in the batch or in which order."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from helpers import words  # noqa: E402

# The copied text and the noise around it use disjoint letters, so they share no word.
text_word = st.text(alphabet="abcdefghijklm", min_size=3, max_size=10)
noise_word = st.text(alphabet="nopqrstuvwxyz", min_size=3, max_size=10)


def sentences(word, min_words=3, max_words=14):
    sentence = st.lists(word, min_size=min_words, max_size=max_words).map(lambda ws: " ".join(ws).capitalize() + ".")
    return sentence


def paragraph(word, min_sentences, max_sentences):
    return st.lists(sentences(word), min_size=min_sentences, max_size=max_sentences).map(" ".join)


copied_text = paragraph(text_word, 1, 6).filter(lambda t: len(t) >= 60)
noise = paragraph(noise_word, 1, 3)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=copied_text, before=noise, after=noise, generated_side=st.booleans())
def test_text_against_itself_in_noise_is_verbatim(detector, text, before, after, generated_side):
    embedded = f"{before} {text} {after}"
    generated, suffix = (embedded, text) if generated_side else (text, embedded)
    det = detector.detect(generated, suffix)
    assert det.category == "verbatim", (det, generated, suffix)
    copied = words(text)
    for case in det.cases:
        src = generated[case.src_start : case.src_end]
        susp = suffix[case.susp_start : case.susp_end]
        assert words(src) == words(susp)
        assert set(words(src)) <= set(copied)
    # Together the cases cover the whole copy (it is one run of words).
    assert max(len(words(generated[c.src_start : c.src_end])) for c in det.cases) == len(copied)


# A pool of texts whose pairs cover every category (verbatim, paraphrase high/low, idea, none).
POOL = [
    # 0-1: rewording with the same entities; 2: same rewording, another person
    "Yesterday the weather was cold and windy. Dr. Alice Martin moved from Boston to Chicago in 2015 to lead the "
    "cardiology department of the new university hospital. She still enjoys long walks by the lake.",
    "The committee met on Monday morning. In 2015 Dr. Alice Martin left Boston and moved to Chicago, where the "
    "new university hospital asked her to lead its cardiology department. Nobody expected such a rapid career.",
    "The committee met on Monday morning. In 2015 Dr. Laura Chen left Boston and moved to Chicago, where the "
    "new university hospital asked her to lead its cardiology department. Nobody expected such a rapid career.",
    # 3-4: a verbatim copy inside unrelated text
    "My neighbour bought a small wooden boat last summer. The Schwarzschild-Couder telescope is a candidate for "
    "the medium-sized telescopes of the array. Afterwards we talked about the football match for hours.",
    "The annual report of the museum was written in March. The Schwarzschild-Couder telescope is a candidate "
    "for the medium-sized telescopes of the array. The family thanked the nursing staff warmly.",
    # 5-6: a long account and its condensed version
    "The patient reported severe chest pain after eating rice. The chest pain radiated to the left arm and jaw. "
    "He also had shortness of breath during the night. His blood pressure was very high at the clinic. The "
    "doctor ordered an electrocardiogram and blood tests. The electrocardiogram showed clear signs of ischemia. "
    "Blood tests revealed elevated troponin levels. He was admitted to the cardiology ward for observation. A "
    "coronary angiography was scheduled for the next morning. The angiography showed a blocked coronary artery.",
    "Chest pain after eating rice, high blood pressure, ischemia on the electrocardiogram, elevated troponin in "
    "blood tests and a blocked coronary artery on angiography.",
    # 7-8: lexical overlap, different meaning (paraphrase_low)
    "My neighbour bought a small wooden boat last summer. Thank you for your question, I will try to answer it "
    "as well as I can. Afterwards we talked about the football match for hours.",
    "The annual report of the museum was written in March. Thank you for your donation, I will try to use it as "
    "well as I can for the shelter. The family thanked the nursing staff warmly.",
    # 9: unrelated
    "The recipe calls for two cups of flour and a pinch of salt. Knead the dough for ten minutes until it is "
    "smooth. Let it rest in a warm place for an hour before baking.",
    "",
]

pair_indices = st.tuples(st.integers(0, len(POOL) - 1), st.integers(0, len(POOL) - 1))


def signature(det):
    return det.category, tuple(det.cases)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batch=st.lists(pair_indices, min_size=1, max_size=10),
    extra=st.lists(pair_indices, min_size=0, max_size=6),
    seed=st.randoms(use_true_random=False),
)
def test_result_does_not_depend_on_batch_composition_or_order(detector, batch, extra, seed):
    pairs = [(POOL[i], POOL[j]) for i, j in batch]
    reference = detector.detect_batch(pairs)
    # Same pairs, shuffled and mixed with other pairs.
    mixed = pairs + [(POOL[i], POOL[j]) for i, j in extra]
    order = list(range(len(mixed)))
    seed.shuffle(order)
    shuffled = detector.detect_batch([mixed[k] for k in order])
    by_position = {k: shuffled[pos] for pos, k in enumerate(order)}
    for k, ref in enumerate(reference):
        other = by_position[k]
        assert signature(other) == signature(ref)
        assert other.scores.keys() == ref.scores.keys()
        for key, value in ref.scores.items():
            assert other.scores[key] == pytest.approx(value, abs=1e-5)
    # And alone.
    k = seed.randrange(len(pairs))
    assert signature(detector.detect(*pairs[k])) == signature(reference[k])


def test_pool_covers_every_category(detector):
    """The composition test above is only meaningful if its pool produces every outcome."""
    dets = detector.detect_batch([(POOL[0], POOL[1]), (POOL[3], POOL[4]), (POOL[5], POOL[6]), (POOL[7], POOL[8]),
                                  (POOL[0], POOL[2]), (POOL[9], POOL[4])])
    assert [d.category for d in dets] == ["paraphrase_high", "verbatim", "idea", "paraphrase_low", "none", "none"]
