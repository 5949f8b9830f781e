"""Paraphrase scorers of the discriminator F: the MiniLM calibration on a hand-labelled set, fidelity of the
MiniLM embeddings to sentence-transformers, and the cross-encoder loading code on a tiny random RoBERTa."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from fedmem.audit.mr.detector import DetectorConfig, MissingAssetError, PlagiarismDetector  # noqa: E402
from fedmem.audit.mr.detector.paraphrase import (  # noqa: E402
    MINILM_MIDPOINT,
    MINILM_SLOPE,
    CrossEncoderScorer,
    MiniLMScorer,
    minilm_path,
    minilm_probability,
    paraphrase_label,
)

# Hand-labelled pairs: the calibration constants of paraphrase.py are justified by this set.
PARAPHRASES = [
    ("The patient was admitted to the hospital with severe chest pain.",
     "The patient was hospitalized because of intense pain in the chest."),
    ("John Smith moved to Paris in 2019 to study medicine.",
     "In 2019, John Smith relocated to Paris to pursue medical studies."),
    ("The telescope observed a bright gamma-ray burst from a distant galaxy.",
     "A luminous gamma-ray burst coming from a faraway galaxy was detected by the telescope."),
    ("Researchers found that the drug reduced blood pressure in most patients.",
     "The study showed that most patients had lower blood pressure after taking the drug."),
    ("I have had a headache and a fever for three days.",
     "For the past three days I have been suffering from a fever and a headache."),
    ("The company reported a sharp increase in quarterly profits.",
     "Quarterly profits at the company rose sharply, according to its report."),
    ("The committee postponed the vote until next week.",
     "The vote was delayed by the committee until the following week."),
    ("Heavy rain caused flooding in several neighborhoods of the city.",
     "Several city neighborhoods were flooded after heavy rainfall."),
    ("The proposed method outperforms previous approaches on all benchmarks.",
     "On every benchmark, the new method does better than earlier approaches."),
    ("My son has been coughing at night and cannot sleep well.",
     "My boy coughs during the night and has trouble sleeping."),
    ("The magnetic field strength decreases with distance from the star.",
     "As the distance from the star grows, the strength of the magnetic field drops."),
    ("Mary Johnson won the election by a narrow margin.",
     "Mary Johnson narrowly won the election."),
    ("The samples were stored at minus eighty degrees before analysis.",
     "Before being analysed, the samples were kept frozen at minus eighty degrees."),
    ("She has suffered from migraines since she was a teenager.",
     "Since her teenage years she has had migraines."),
]  # fmt: skip
# Same topics, different facts (the hard negatives), and unrelated pairs.
NON_PARAPHRASES = [
    ("The patient was admitted to the hospital with severe chest pain.",
     "The patient was discharged from the hospital after the surgery."),
    ("John Smith moved to Paris in 2019 to study medicine.",
     "John Smith visited Paris in 2019 for a conference on economics."),
    ("The telescope observed a bright gamma-ray burst from a distant galaxy.",
     "The telescope was built in Arizona and began operating last year."),
    ("Researchers found that the drug reduced blood pressure in most patients.",
     "Researchers found that the drug had no effect on cholesterol levels."),
    ("I have had a headache and a fever for three days.",
     "My daughter has a rash on her arms and legs."),
    ("The company reported a sharp increase in quarterly profits.",
     "The company announced that its chief executive will retire."),
    ("Heavy rain caused flooding in several neighborhoods of the city.",
     "The city plans to build a new bridge over the river."),
    ("The proposed method outperforms previous approaches on all benchmarks.",
     "We describe the dataset used to train the model."),
    ("The magnetic field strength decreases with distance from the star.",
     "The star is surrounded by a thick disk of dust and gas."),
    ("Stock markets fell sharply after the announcement.",
     "My cat likes to sleep on the windowsill."),
    ("The enzyme activity was measured at room temperature.",
     "The patient complained of persistent back pain."),
    ("The committee postponed the vote until next week.",
     "The committee approved the budget for next year."),
    ("The samples were stored at minus eighty degrees before analysis.",
     "The samples were collected from patients in three hospitals."),
    ("She has suffered from migraines since she was a teenager.",
     "She has been working as a nurse since she was a teenager."),
]  # fmt: skip


@pytest.fixture(scope="module")
def minilm() -> MiniLMScorer:
    return MiniLMScorer(batch_size=8)


def test_calibration_separates_the_labelled_set(minilm):
    para = minilm.score(PARAPHRASES)
    non = minilm.score(NON_PARAPHRASES)
    assert (para > 0.5).all(), para
    assert (non < 0.5).all(), non
    assert para.min() > 0.6 and non.max() < 0.3  # with a margin, not by a hair


def test_calibration_constants_and_shape():
    assert (MINILM_MIDPOINT, MINILM_SLOPE) == (0.75, 20.0)
    assert minilm_probability(MINILM_MIDPOINT) == pytest.approx(0.5)
    assert minilm_probability(1.0) > 0.99  # an identical sentence is skipped as identical
    assert minilm_probability(0.95) < 0.99  # a close rewording is not
    grid = np.linspace(-1, 1, 101)
    assert (np.diff(minilm_probability(grid)) > 0).all()


def test_identical_sentences_score_above_identical_threshold(minilm):
    s = "The committee postponed the vote until next week."
    assert minilm.score([(s, s)])[0] > 0.99


def test_embeddings_match_sentence_transformers(minilm):
    st = pytest.importorskip("sentence_transformers")
    sentences = [p for pair in PARAPHRASES[:6] for p in pair] + ["word " * 400]  # one longer than 256 tokens
    reference = st.SentenceTransformer(str(minilm_path()), device="cpu").encode(
        sentences, normalize_embeddings=True, convert_to_numpy=True
    )
    ours = minilm.embed(sentences)
    assert np.abs(ours - reference).max() < 1e-5


def test_embeddings_do_not_depend_on_the_batch(minilm):
    sentences = [p for pair in PARAPHRASES for p in pair]
    minilm.clear_cache()
    together = minilm.embed(sentences)
    alone = []
    for s in sentences[:5]:
        minilm.clear_cache()  # each embedded in a batch of its own, not read back from the scorer's cache
        alone.append(minilm.embed([s])[0])
    assert np.abs(together[:5] - np.stack(alone)).max() < 1e-5
    assert minilm.score([]).shape == (0,)


def test_each_sentence_is_embedded_once_per_scorer(minilm, monkeypatch):
    minilm.clear_cache()
    sentences = [p for pair in PARAPHRASES[:4] for p in pair]
    first = minilm.embed(sentences)
    calls = []
    monkeypatch.setattr(minilm, "_embed", lambda batch, dtype: calls.append(batch) or np.zeros((len(batch), 384)))
    again = minilm.embed(sentences[::-1] + ["A sentence not seen before."])
    assert calls == [["A sentence not seen before."]]  # only the new sentence reached the encoder
    assert np.array_equal(again[: len(sentences)], first[::-1])


def test_bfloat16_encoder_keeps_every_float32_decision(minilm):
    """bf16 moves cosines a little; pairs near a decision cosine are re-scored in float32, so the p > 0.5 and
    p > 0.99 decisions are float32's. Pairs straddle both thresholds: the labelled set around 0.5, identical and
    near-identical sentences around 0.99."""
    from fedmem.audit.mr.detector.paraphrase import minilm_cosine_at, resolve_encoder_dtype

    s = "The committee postponed the vote until next week."
    close = [s.replace("until next week", "to next week"), s.replace("next week", "the following week")]
    pairs = PARAPHRASES + NON_PARAPHRASES + [(s, s), (s, s.replace("postponed", "delayed"))] + [(s, c) for c in close]
    decisions = (minilm_cosine_at(0.5), minilm_cosine_at(0.99))
    assert decisions[0] == pytest.approx(MINILM_MIDPOINT) and minilm_probability(decisions[1]) == pytest.approx(0.99)
    bf16 = MiniLMScorer(batch_size=8, dtype="bfloat16", decisions=decisions)
    exact, fast = minilm.score(pairs), bf16.score(pairs)
    for threshold in (0.5, 0.99):
        assert ((fast > threshold) == (exact > threshold)).all()
    assert np.abs(fast - exact).max() < 0.05  # and the scores themselves stay close
    cos32 = minilm.cosines(pairs)
    cos16 = MiniLMScorer(batch_size=8, dtype="bfloat16").cosines(pairs)
    near = (np.abs(cos16[:, None] - np.array(decisions)[None, :]) < MiniLMScorer.REFINE_MARGIN).any(axis=1)
    assert bf16.refined == near.sum() > 0  # the close rewordings (cosines 0.987, 0.971) at least
    assert np.abs(cos16 - cos32).max() < MiniLMScorer.REFINE_MARGIN / 2  # the margin covers bf16's error
    assert resolve_encoder_dtype("float32", "cpu") == "float32"
    assert resolve_encoder_dtype("auto", "cpu") in ("float32", "bfloat16")


def test_paraphrase_label_selection():
    assert paraphrase_label({0: "not_equivalent", 1: "equivalent"}, 2) == 1
    assert paraphrase_label({0: "paraphrase", 1: "not_paraphrase"}, 2) == 0
    assert paraphrase_label({0: "LABEL_0", 1: "LABEL_1"}, 2) == 1  # MRPC convention: 1 = equivalent
    assert paraphrase_label({0: "duplicate", 1: "other", 2: "x"}, 3) == 0
    with pytest.raises(MissingAssetError, match="cross_encoder_label"):
        paraphrase_label({0: "a", 1: "b", 2: "c"}, 3)


@pytest.fixture(scope="module")
def tiny_roberta(tmp_path_factory):
    """A randomly initialised two-class RoBERTa saved as a local checkpoint (weights are random: only the
    loading and scoring code is under test, not paraphrase quality)."""
    import torch
    from transformers import (
        AutoTokenizer,
        RobertaConfig,
        RobertaForSequenceClassification,
    )

    path = tmp_path_factory.mktemp("tiny-roberta-mrpc")
    tokenizer = AutoTokenizer.from_pretrained(str(minilm_path()), local_files_only=True)
    config = RobertaConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=514,
        type_vocab_size=2,
        pad_token_id=tokenizer.pad_token_id,
        num_labels=2,
        id2label={0: "not_equivalent", 1: "equivalent"},
        label2id={"not_equivalent": 0, "equivalent": 1},
    )
    torch.manual_seed(0)
    model = RobertaForSequenceClassification(config).eval()
    model.save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    return str(path), model, tokenizer


def test_cross_encoder_scores_are_the_paraphrase_class_probability(tiny_roberta):
    import torch

    path, model, tokenizer = tiny_roberta
    scorer = CrossEncoderScorer(path, batch_size=3)
    pairs = PARAPHRASES[:4] + NON_PARAPHRASES[:3]
    got = scorer.score(pairs)
    assert scorer.label == 1
    with torch.inference_mode():
        for (left, right), prob in zip(pairs, got):
            logits = model(**tokenizer(left, right, return_tensors="pt")).logits
            assert prob == pytest.approx(torch.softmax(logits, -1)[0, 1].item(), abs=1e-5)
    # Order and duplicates do not change a pair's score; the pair order (generated, suffix) is kept.
    again = scorer.score(list(reversed(pairs)) + pairs[:2])
    assert np.allclose(again[: len(pairs)][::-1], got, atol=1e-6)
    assert np.allclose(again[len(pairs) :], got[:2], atol=1e-6)
    assert CrossEncoderScorer(path, label=0).score(pairs[:1])[0] == pytest.approx(1 - got[0], abs=1e-6)


def test_detector_runs_with_the_cross_encoder(tiny_roberta):
    path, _, _ = tiny_roberta
    detector = PlagiarismDetector(DetectorConfig(scorer="cross_encoder", cross_encoder_path=path))
    assert detector.scorer_name == "cross_encoder"
    para_gen = (
        "Yesterday the weather was cold and windy. Dr. Alice Martin moved from Boston to Chicago in 2015 to lead "
        "the cardiology department of the new university hospital. She still enjoys long walks by the lake."
    )
    para_suf = (
        "The committee met on Monday morning. In 2015 Dr. Alice Martin left Boston and moved to Chicago, where "
        "the new university hospital asked her to lead its cardiology department. Nobody expected such a career."
    )
    det = detector.detect(para_gen, para_suf)
    # The random head gives some probability; typing follows it (high above 0.5, low otherwise).
    assert det.category == ("paraphrase_high" if det.scores["paraphrase"] > 0.5 else "paraphrase_low")
    assert 0.0 <= det.scores["paraphrase"] <= 1.0


def test_cross_encoder_missing_checkpoint_is_clear(tmp_path):
    with pytest.raises(MissingAssetError, match="config.json"):
        CrossEncoderScorer(str(tmp_path))
