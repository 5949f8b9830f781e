"""The discriminator F of SPEC §4: PAN2014 text alignment with Lee et al.'s typing, for single pairs or batches.

``PlagiarismDetector.detect_batch`` runs the pipeline stage by stage over the whole batch:

1. preprocess every distinct text once (sentences, stems), then number the batch's terms;
2. seeding for all pairs in one vectorized pass (:mod:`.seeding`); pairs without seeds are ``none`` here;
3. per seeded pair: extension + filtering (:mod:`.align`), verbatim test, idea test (summary re-run);
4. named entities of every sentence of the remaining aligned cases, lowercased, in batched spaCy passes
   (:mod:`.ner`), each distinct sentence tagged once; the entity gate of each sentence pair (SPEC §4.5: neither
   sentence has an entity, or both have and one set contains the other);
5. paraphrase probabilities of the sentence pairs that pass the gate, in one scorer call.

The category of a pair is decided in the order verbatim, idea, paraphrase (SPEC §4.5). The gate works per
sentence pair on lowercased sentences, as the seed paper's code applies it, so an entity elsewhere in a fragment
never vetoes a paraphrase. It runs before the paraphrase model: a sentence pair that fails it cannot count
whatever its score, so scoring it would be wasted work (the outcome is the same as scoring first and gating
after). ``entity_gate: false`` lets every sentence pair through (the entities then only annotate). The two
stages run one after the other, not concurrently (spaCy in one thread, torch in another): run together, every
case's pairs would have to be scored, not only those whose entities match, and the stages would contend for the
same cores. The generated-side units are not tagged in the spaCy helper while this process seeds and aligns:
the gain is small next to the run-to-run spread of a whole batch, and it would need a strict protocol with the
helper (collect every answer, also on errors).

Memory and repeated work: a batch is typed in chunks of ``CHUNK_PAIRS`` pairs, so a paper-scale round (hundreds
of thousands of pairs) holds one chunk's seeding arrays at a time. What a text or sentence yields on its own is
kept across chunks and calls (:mod:`.cache`), so a run's suffixes, which recur in every chunk and every round, are
preprocessed, tagged and embedded once: the sentences and stems of each text, the entities of each lowercased
sentence, and (in the scorer) each sentence's embedding.

The outcome of a pair depends only on the pair: each text is preprocessed on its own, terms are numbered in
lexicographic order, the seeding sums run in the same order in any batch, and the models see each sentence /
unit on its own (only floating-point rounding of the paraphrase model can differ with padding: rounding-level in
float32, more in bfloat16, where the float32 re-scoring near the thresholds keeps it out of every decision).
``detect(g, s)`` is ``detect_batch([(g, s)])[0]``.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from .align import AlignedCase, PairSpace, align, char_span
from .cache import memoized
from .config import NONE, DetectorConfig
from .ner import entities_match, ner_workers, parallel_entity_sets, require_ner
from .paraphrase import build_scorer
from .preprocess import PreparedText, Preprocessor, vectorize
from .seeding import Seeds, batch_seeds
from .verbatim import verbatim_spans

STAGES = ("preprocess", "seeding", "align", "ner", "paraphrase")
CHUNK_PAIRS = 20_000  # pairs typed together: bounds the seeding arrays (tens of bytes per entry of each pair)


@dataclass(frozen=True)
class Case:
    """One aligned passage: ``generated[src_start:src_end]`` matches ``suffix[susp_start:susp_end]``."""

    src_start: int
    src_end: int
    susp_start: int
    susp_end: int


@dataclass
class Detection:
    """The verdict of F for one (generated, suffix) pair: a category, its cases, and the numbers behind it."""

    category: str  # one of CATEGORIES or "none"
    cases: list[Case] = field(default_factory=list)
    scores: dict[str, float] = field(default_factory=dict)

    @property
    def detected(self) -> bool:
        return self.category != NONE


@dataclass
class _Pending:
    """A pair waiting for paraphrase typing: its aligned cases and the scores gathered so far."""

    a: PreparedText
    b: PreparedText
    cases: list[AlignedCase]
    scores: dict[str, float]


class PlagiarismDetector:
    """F(generated, suffix). Models (paraphrase scorer, spaCy) are checked now and loaded once, on first use."""

    def __init__(self, cfg: DetectorConfig | None = None):
        self.cfg = cfg or DetectorConfig()
        self.scorer = build_scorer(self.cfg)  # raises MissingAssetError when the model is absent
        require_ner(self.cfg.ner_model)
        ner_workers(self.cfg.ner_model, self.cfg.ner_workers)  # started now: they load spaCy in the background
        self.preprocessor = Preprocessor(self.cfg.min_sentlen, self.cfg.rem_sw)
        self._units: dict[str, object] = {}  # text -> its sentences and stems (TextUnits)
        self._entities: dict[str, frozenset[str]] = {}  # lowercased sentence -> its entities
        self.timings: dict[str, float] = defaultdict(float)  # cumulative seconds per stage
        self.counts: dict[str, int] = defaultdict(int)  # cumulative work counters

    @property
    def scorer_name(self) -> str:
        return self.scorer.name

    def reset_stats(self) -> None:
        self.timings.clear()
        self.counts.clear()

    def detect(self, generated: str, suffix: str) -> Detection:
        return self.detect_batch([(generated, suffix)])[0]

    def clear_caches(self) -> None:
        """Forget every text, sentence and embedding seen so far (as a fresh detector would)."""
        self._units.clear()
        self._entities.clear()
        getattr(self.scorer, "clear_cache", lambda: None)()

    def detect_batch(self, pairs: list[tuple[str, str]],
                     progress: Callable[[int], object] | None = None) -> list[Detection]:
        """``progress(k)``: called after each chunk of pairs typed with its number of pairs."""
        for k, pair in enumerate(pairs):
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and all(isinstance(t, str) for t in pair)):
                raise TypeError(f"detect_batch expects (generated, suffix) string pairs; item {k} is {pair!r}")
        self.counts["pairs"] += len(pairs)
        results: list[Detection] = []
        for start in range(0, len(pairs), CHUNK_PAIRS):
            chunk = pairs[start : start + CHUNK_PAIRS]
            results += self._detect_chunk(chunk)
            if progress is not None:
                progress(len(chunk))
        return results

    def _detect_chunk(self, pairs: list[tuple[str, str]]) -> list[Detection]:
        cfg = self.cfg
        clock = time.perf_counter()
        distinct = list(dict.fromkeys(t for pair in pairs for t in pair))
        memoized(self._units, distinct, lambda texts: [self.preprocessor.units(t) for t in texts])
        prepared = dict(zip(distinct, vectorize([self._units[t] for t in distinct])))
        clock = self._tick("preprocess", clock)

        prepped_pairs = [(prepared[g], prepared[s]) for g, s in pairs]
        seeds = batch_seeds(prepped_pairs, cfg.th1, cfg.th2)
        clock = self._tick("seeding", clock)

        results: list[Detection | None] = [None] * len(pairs)
        pending: dict[int, _Pending] = {}
        for k, (a, b) in enumerate(prepped_pairs):
            if len(seeds[k]) == 0:
                results[k] = Detection(NONE, [], {"seeds": 0.0})
                continue
            self.counts["seeded_pairs"] += 1
            typed = self._align_and_type(a, b, seeds[k])
            if isinstance(typed, Detection):
                results[k] = typed
            else:
                pending[k] = typed
        clock = self._tick("align", clock)

        if pending:
            gate = self._entity_gate(pending)
            clock = self._tick("ner", clock)
            for k, det in self._paraphrase(pending, gate).items():
                results[k] = det
            clock = self._tick("paraphrase", clock)
        return results  # type: ignore[return-value]

    def _tick(self, stage: str, since: float) -> float:
        now = time.perf_counter()
        self.timings[stage] += now - since
        return now

    # -- step 3-5 for one seeded pair -------------------------------------------------------------------------
    def _align_and_type(self, a: PreparedText, b: PreparedText, seeds: Seeds) -> Detection | _Pending:
        cfg = self.cfg
        space = PairSpace(a, b)
        scores = {"seeds": float(len(seeds)), "max_seed_cosine": float(seeds.cosine.max())}
        cases = align(space, seeds, cfg.src_gap, cfg.susp_gap, cfg.th3, cfg.min_plaglen)
        scores["cases"] = float(len(cases))
        if cases:
            fragments = [char_span(a, c.src_lo, c.src_hi) + char_span(b, c.susp_lo, c.susp_hi) for c in cases]
            spans = verbatim_spans(a, b, fragments, cfg.verbatim_minlen)
            if spans:
                scores["verbatim_chars"] = float(max(min(s[1] - s[0], s[3] - s[2]) for s in spans))
                return Detection("verbatim", [Case(*s) for s in spans], scores)
        summary = align(space, seeds, cfg.src_gap_summary, cfg.susp_gap_summary, cfg.th3, cfg.min_plaglen)
        src_chars = sum(_length(char_span(a, c.src_lo, c.src_hi)) for c in summary)
        susp_chars = sum(_length(char_span(b, c.susp_lo, c.susp_hi)) for c in summary)
        scores["summary_src_chars"] = float(src_chars)
        scores["summary_susp_chars"] = float(susp_chars)
        if src_chars > 0 and src_chars >= cfg.summary_ratio * susp_chars:
            return Detection("idea", [_to_case(a, b, c) for c in summary], scores)
        if not cases:
            return Detection(NONE, [], scores)
        return _Pending(a, b, cases, scores)

    def _entity_gate(self, pending: dict[int, _Pending]) -> dict[tuple[str, str], bool]:
        """(generated sentence, suffix sentence) -> does the pair pass the entity gate, for every sentence pair of
        the pending cases. Each distinct sentence is tagged once per batch, lowercased (the seed code's input to
        spaCy): the same suffix is compared with many generations, so its sentences recur."""
        pairs = list(dict.fromkeys(pair for p in pending.values() for c in p.cases for pair in _sentence_pairs(p, c)))
        if not self.cfg.entity_gate:
            return dict.fromkeys(pairs, True)
        ents = self._entities
        tagged = memoized(ents, (s.lower() for pair in pairs for s in pair),
                          lambda todo: parallel_entity_sets(self.cfg.ner_model, todo, self.cfg.ner_workers))
        self.counts["ner_units"] += len(tagged)
        return {(a, b): entities_match(ents[a.lower()], ents[b.lower()]) for a, b in pairs}

    def _paraphrase(self, pending: dict[int, _Pending], gate: dict[tuple[str, str], bool]) -> dict[int, Detection]:
        """A case counts when a sentence pair that passes the gate is not identical: paraphrase_high when such a
        pair scores above ``paraphrase_high``, else paraphrase_low."""
        cfg = self.cfg
        keys = [pair for pair, ok in gate.items() if ok]
        self.counts["scored_sentence_pairs"] += len(keys)
        self.counts["scored_sentences"] += len({s for pair in keys for s in pair})
        refined = self.scorer.refined
        prob = dict(zip(keys, (float(x) for x in self.scorer.score(keys))))
        self.counts["refined_sentence_pairs"] += self.scorer.refined - refined  # bf16: re-scored in float32
        out: dict[int, Detection] = {}
        for k, p in pending.items():
            best, kept, passed = -1.0, [], False
            for c in p.cases:
                probs = [prob[pair] for pair in _sentence_pairs(p, c) if gate[pair]]
                passed = passed or bool(probs)
                probs = [x for x in probs if x <= cfg.identical]  # identical sentences are skipped
                if probs:
                    kept.append(c)
                    best = max(best, max(probs))
            p.scores["ner_match"] = float(passed)
            if not kept:
                out[k] = Detection(NONE, [], p.scores)
                continue
            p.scores["paraphrase"] = best
            category = "paraphrase_high" if best > cfg.paraphrase_high else "paraphrase_low"
            out[k] = Detection(category, [_to_case(p.a, p.b, c) for c in kept], p.scores)
        return out


def _length(span: tuple[int, int]) -> int:
    return span[1] - span[0]


def _to_case(a: PreparedText, b: PreparedText, c: AlignedCase) -> Case:
    return Case(*char_span(a, c.src_lo, c.src_hi), *char_span(b, c.susp_lo, c.susp_hi))


def _sentence_pairs(p: _Pending, c: AlignedCase) -> list[tuple[str, str]]:
    return [
        (p.a.sentence(i), p.b.sentence(j))
        for i in range(c.src_lo, c.src_hi + 1)
        for j in range(c.susp_lo, c.susp_hi + 1)
    ]

