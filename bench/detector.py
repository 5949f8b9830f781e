"""Throughput of the discriminator F: per-pair ``detect`` vs ``detect_batch`` on a fixed, seeded corpus.

    python bench/detector.py [--pairs 2000] [--seed 0] [--scorer minilm]

The corpus imitates one MR audit step (SPEC §3): 200 generations (30-100 words) are each compared with the 10
"retrieved" suffixes (50-200 words) of their domain. Retrieved suffixes are topical (same domain vocabulary,
like BM25 hits) and reused across generations; for most generations one of them is really related: a verbatim
copy, an entity-preserving rewording, the same rewording with another person or place, a condensed version
(idea), or a shared sentence frame with a different meaning. All text comes from the small sentence grammar
and templates below. Both modes run on the same pairs after a warm-up that loads the models (load time is
reported apart); the batch mode must give the same categories as the per-pair mode. Last, the batch categories
are compared with an oracle that applies the seed paper's typing rule (the entity gate per sentence pair, on
lowercased sentences) plainly to the same alignment, with the gate on and with it off (targets: 100% and >= 99.8%).

Targets: batch >= 300 pairs/s with the minilm scorer on the 2-core machine, and >= 5x per-pair.
"""

from __future__ import annotations

import argparse
import os
import random
import time
from collections import Counter

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from references import seed_rule_categories

from fedmem.audit.mr.detector import DetectorConfig, PlagiarismDetector
from fedmem.audit.mr.detector.detector import STAGES

# -- a small sentence grammar per domain (shared vocabulary makes retrieved suffixes topical) ---------------
DOMAINS = {
    "medical": {
        "noun": "pain fever cough headache rash pressure medication tablet doctor clinic test result symptom "
        "infection throat chest stomach knee skin blood sugar level dose treatment therapy diet exercise sleep "
        "allergy antibiotic scan ultrasound nurse report history swelling appetite weight".split(),
        "verb": "noticed reported started prescribed recommended increased reduced checked measured suggested "
        "worsened improved caused continued stopped".split(),
        "adj": "severe mild persistent sharp dull recent chronic normal high low swollen frequent occasional "
        "daily previous".split(),
        "subject": "I, my husband, my daughter, the doctor, my mother, the nurse, my son, my wife".split(", "),
    },
    "astro": {
        "noun": "galaxy star cluster telescope emission spectrum redshift luminosity mass halo disk dust gas "
        "burst survey observation model simulation accretion jet field pulsar nebula supernova quasar flux "
        "source region population component".split(),
        "verb": "observed measured detected predicted constrained derived estimated modeled revealed confirmed "
        "reproduced suggested".split(),
        "adj": "bright faint distant massive compact extended thermal stellar galactic young old dense diffuse "
        "radio optical".split(),
        "subject": "we, the survey, our model, the data, these observations, the simulation, the team".split(", "),
    },
    "bio": {
        "noun": "cells protein expression gene mice patients tumor receptor pathway signaling mutation "
        "inhibitor tissue samples cohort trial response survival analysis assay marker activity level "
        "treatment group".split(),
        "verb": "increased decreased inhibited activated regulated induced measured compared associated "
        "correlated improved reduced".split(),
        "adj": "significant higher lower mutant primary chronic inflammatory cardiac renal hepatic clinical "
        "elevated early late".split(),
        "subject": "we, the authors, this study, our results, the analysis, the trial".split(", "),
    },
}
PATTERNS = [
    "{S} {v} the {a} {n} in the {a} {n}.",
    "The {n} of the {n} was {v} by the {a} {n}.",
    "{S} {v} {a} {n} and {a} {n} over the last {k} weeks.",
    "After the {n}, the {a} {n} {v} the {n} again.",
    "In {k} of the {n} cases the {a} {n} was {v}.",
    "{S} also {v} that the {n} and the {n} were {a}.",
    "There was a {a} {n} near the {n}, which {v} the {n}.",
    "Compared with the {a} {n}, the {n} {v} the {a} {n} and the {n}.",
]

# Entity-preserving rewordings: (generated version, suffix version), no common run of 50 characters.
REWORDINGS = [
    ("Dr. {P} moved from {C} to {D} in {Y} to lead the cardiology department of the new university hospital.",
     "In {Y} Dr. {P} left {C} and moved to {D}, where the new university hospital asked her to lead its cardiology department."),
    ("{P} was admitted to the hospital in {C} with severe chest pain and a high fever in {Y}.",
     "In {Y}, a high fever and severe chest pain brought {P} to a hospital in {C}."),
    ("The telescope in {C} observed a bright gamma-ray burst from a distant galaxy in {Y}.",
     "A luminous gamma-ray burst from a faraway galaxy was detected in {Y} by the telescope in {C}."),
    ("{P} found that the new drug reduced blood pressure in most patients treated in {C}.",
     "According to {P}, most patients treated in {C} had lower blood pressure after taking the new drug."),
    ("The committee in {C} postponed the vote on the hospital budget until {Y}, said {P}.",
     "{P} said the vote on the hospital budget was delayed by the committee in {C} until {Y}."),
    ("Heavy rain in {Y} caused flooding in several neighborhoods of {C}, according to {P}.",
     "According to {P}, several neighborhoods of {C} were flooded after the heavy rainfall of {Y}."),
    ("{P} showed that the proposed model of the galaxy cluster outperforms previous approaches on all surveys.",
     "On every survey, the galaxy cluster model proposed by {P} does better than the previous approaches."),
    ("The samples collected by {P} in {C} were stored at minus eighty degrees before the analysis.",
     "Before the analysis, the samples that {P} collected in {C} were kept frozen at minus eighty degrees."),
    ("{P} has suffered from migraines and frequent nausea since moving to {C} in {Y}.",
     "Since the move to {C} in {Y}, {P} has had frequent nausea and migraines."),
    ("Researchers led by {P} in {C} measured the protein expression of tumor cells in {Y}.",
     "In {Y}, a {C} team led by {P} measured how tumor cells express the protein."),
]  # fmt: skip
PERSONS = "Alice Martin, John Smith, Maria Garcia, Wei Zhang, Laura Chen, Omar Haddad, Anna Kowalski, Peter Brown, Sofia Rossi, David Cohen".split(", ")
CITIES = "Boston, Chicago, Denver, Madrid, Berlin, Toronto, Lyon, Osaka, Dublin, Lisbon, Vienna, Oslo".split(", ")

# Frames with a different meaning (paraphrase_low): lexical overlap, other content.
FRAMES = [
    ("Thank you for your question, I will try to answer it as well as I can.",
     "Thank you for your donation, I will try to use it as well as I can for the shelter."),
    ("Please let me know what you think about this problem and what I should do next.",
     "Please let me know what you think about the new kitchen design we should choose next."),
    ("In this paper we study the properties of the proposed algorithm in detail.",
     "In this paper we study the properties of dark matter halos around dwarf galaxies in detail."),
    ("The main results of this work are summarized in the last section of the paper.",
     "The main ingredients of this soup are summarized in the last section of the recipe book."),
]  # fmt: skip

# Long accounts and their condensed versions (idea): the key terms of 4-5 sentences in one sentence.
STORIES = [
    (["The patient reported severe chest pain after eating {F}.", "The chest pain radiated to the left arm and jaw.",
      "His blood pressure was very high at the clinic.", "The electrocardiogram showed clear signs of ischemia.",
      "Blood tests revealed elevated troponin levels."],
     "Chest pain after eating {F}, high blood pressure, ischemia and elevated troponin."),
    (["We observed the bright quasar with the radio telescope for {K} nights.", "The radio emission of the quasar varied strongly between the nights.",
      "The optical spectrum of the quasar showed broad emission lines.", "The redshift of the emission lines places the quasar at a large distance.",
      "A compact jet was resolved in the radio images."],
     "Variable radio emission, broad optical lines, a large redshift and a compact jet in the quasar."),
    (["Mutant mice received the inhibitor for {K} weeks.", "Tumor growth in the treated mice slowed markedly.",
      "Protein expression of the receptor decreased in tumor tissue.", "Survival of the treated mice improved compared with controls.",
      "No hepatic toxicity of the inhibitor was observed."],
     "The inhibitor slowed tumor growth, lowered receptor expression and improved survival of mice."),
]  # fmt: skip
FOODS = "rice, bread, spicy chicken, fried fish, cheese, chocolate, pasta".split(", ")


def grammar_sentence(rng: random.Random, domain: str) -> str:
    v = DOMAINS[domain]
    text = rng.choice(PATTERNS)
    while "{" in text:
        text = text.replace("{S}", rng.choice(v["subject"]).capitalize(), 1)
        text = text.replace("{v}", rng.choice(v["verb"]), 1)
        text = text.replace("{a}", rng.choice(v["adj"]), 1)
        text = text.replace("{n}", rng.choice(v["noun"]), 1)
        text = text.replace("{k}", str(rng.randint(2, 12)), 1)
    return text[0].upper() + text[1:]


def filler(rng: random.Random, domain: str, min_words: int, max_words: int) -> list[str]:
    target = rng.randint(min_words, max_words)
    out, n = [], 0
    while n < target:
        s = grammar_sentence(rng, domain)
        out.append(s)
        n += len(s.split())
    return out


def fill_slots(template: str, slots: dict) -> str:
    for key, value in slots.items():
        template = template.replace("{" + key + "}", value)
    return template


def insert(rng: random.Random, sentences: list[str], new: list[str]) -> str:
    k = rng.randint(0, len(sentences))
    return " ".join(sentences[:k] + new + sentences[k:])


def related_pair(rng: random.Random, domain: str, kind: str) -> tuple[str, str]:
    """A (generation, suffix) pair of the given kind, inside topical filler."""
    if kind == "verbatim":
        gen = filler(rng, domain, 30, 90)
        start = rng.randrange(len(gen))
        copy = gen[start : start + rng.randint(1, 2)]
        if len(" ".join(copy)) < 55:
            copy = gen[start : start + 3]
        return " ".join(gen), insert(rng, filler(rng, domain, 40, 170), copy)
    if kind in ("paraphrase", "entity_swap"):
        a, b = rng.choice(REWORDINGS)
        slots = {"P": rng.choice(PERSONS), "C": rng.choice(CITIES), "D": rng.choice(CITIES), "Y": str(rng.randint(1990, 2023))}
        gen_sent = fill_slots(a, slots)
        if kind == "entity_swap":
            slots["P"] = rng.choice([p for p in PERSONS if p != slots["P"]])
        return insert(rng, filler(rng, domain, 10, 70), [gen_sent]), insert(rng, filler(rng, domain, 30, 160), [fill_slots(b, slots)])
    if kind == "frame":
        a, b = rng.choice(FRAMES)
        return insert(rng, filler(rng, domain, 15, 80), [a]), insert(rng, filler(rng, domain, 35, 170), [b])
    if kind == "idea":
        facts, summary = rng.choice(STORIES)
        slots = {"F": rng.choice(FOODS), "K": str(rng.randint(3, 9))}
        gen = " ".join(fill_slots(s, slots) for s in facts) + " " + " ".join(filler(rng, domain, 5, 20))
        return gen, insert(rng, filler(rng, domain, 30, 150), [fill_slots(summary, slots)])
    raise ValueError(kind)


KINDS = {"verbatim": 0.25, "paraphrase": 0.25, "entity_swap": 0.10, "idea": 0.12, "frame": 0.10, "unrelated": 0.18}


def build_corpus(n_pairs: int, seed: int = 0, per_generation: int = 10) -> tuple[list[tuple[str, str]], list[str]]:
    """The fixed corpus: (pairs, kind of each pair). Every generation meets `per_generation` suffixes."""
    rng = random.Random(seed)
    domains = sorted(DOMAINS)
    pools = {d: [" ".join(filler(rng, d, 50, 200)) for _ in range(200)] for d in domains}
    pairs, kinds = [], []
    while len(pairs) < n_pairs:
        domain = rng.choice(domains)
        kind = rng.choices(list(KINDS), weights=list(KINDS.values()))[0]
        if kind == "unrelated":
            gen, related = " ".join(filler(rng, domain, 30, 100)), None
        else:
            gen, related = related_pair(rng, domain, kind)
        retrieved = rng.sample(pools[domain], per_generation - (related is not None))
        for suffix in retrieved:
            pairs.append((gen, suffix))
            kinds.append("retrieved")
        if related is not None:
            pos = len(pairs) - rng.randint(0, len(retrieved))
            pairs.insert(pos, (gen, related))
            kinds.insert(pos, kind)
    return pairs[:n_pairs], kinds[:n_pairs]


def run(detector: PlagiarismDetector, pairs, batched: bool):
    detector.reset_stats()
    start = time.perf_counter()
    detector.clear_caches()  # both modes start cold; per-pair calls stay cold (nothing reused from earlier pairs)
    if batched:
        results = detector.detect_batch(pairs)
    else:
        results = []
        for g, s in pairs:
            detector.clear_caches()
            results.append(detector.detect(g, s))
    return results, time.perf_counter() - start, dict(detector.timings), dict(detector.counts)


def stage_table(timings: dict, total: float) -> str:
    rows = [f"    {name:<11}{timings.get(name, 0.0):8.2f} s  {100 * timings.get(name, 0.0) / total:5.1f}%" for name in STAGES]
    other = total - sum(timings.get(name, 0.0) for name in STAGES)
    rows.append(f"    {'(python)':<11}{other:8.2f} s  {100 * other / total:5.1f}%")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scorer", default="minilm", choices=["minilm", "cross_encoder"])
    parser.add_argument("--cross-encoder-path", default=None)
    parser.add_argument("--no-oracle", action="store_true", help="skip the (slow, one pair at a time) oracle")
    args = parser.parse_args()

    pairs, kinds = build_corpus(args.pairs, args.seed)
    gen_words = [len(g.split()) for g, _ in pairs]
    suf_words = [len(s.split()) for _, s in pairs]
    print(f"corpus: {len(pairs)} pairs, {len({g for g, _ in pairs})} generations ({min(gen_words)}-{max(gen_words)} words), "
          f"{len({s for _, s in pairs})} distinct suffixes ({min(suf_words)}-{max(suf_words)} words)")
    print("pair kinds:", dict(Counter(kinds)))

    cfg = DetectorConfig(scorer=args.scorer, cross_encoder_path=args.cross_encoder_path)
    t0 = time.perf_counter()
    detector = PlagiarismDetector(cfg)
    detector.detect_batch(pairs[:40])  # loads the scorer and spaCy
    print(f"warm-up (model loading): {time.perf_counter() - t0:.1f} s; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")

    batch_res, batch_s, batch_t, batch_c = run(detector, pairs, batched=True)
    single_res, single_s, single_t, _ = run(detector, pairs, batched=False)

    same = sum(a.category == b.category for a, b in zip(batch_res, single_res))
    print(f"categories (batch): {dict(Counter(d.category for d in batch_res))}")
    by_kind = Counter((k, d.category) for k, d in zip(kinds, batch_res))
    for kind in KINDS | {"retrieved": 0}:
        row = {cat: n for (k, cat), n in by_kind.items() if k == kind}
        if row:
            print(f"    {kind:<12}{row}")
    print(f"batch == per-pair categories: {same}/{len(pairs)}")
    print(f"work: {batch_c}")
    print(f"\nper-pair detect : {len(pairs) / single_s:8.1f} pairs/s  ({single_s:.2f} s)")
    print(stage_table(single_t, single_s))
    print(f"detect_batch    : {len(pairs) / batch_s:8.1f} pairs/s  ({batch_s:.2f} s)")
    print(stage_table(batch_t, batch_s))
    print(f"\nspeed-up batch / per-pair: {single_s / batch_s:.1f}x   (targets: batch >= 300 pairs/s, >= 5x)")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    if args.no_oracle:
        return
    for gate in (True, False):
        det = detector if gate else PlagiarismDetector(DetectorConfig(**{**vars(cfg), "entity_gate": False}))
        got = batch_res if gate else det.detect_batch(pairs)
        oracle = seed_rule_categories(det, pairs, entity_gate=gate)
        agree = sum(a.category == b for a, b in zip(got, oracle))
        print(f"categories vs the seed-rule oracle, entity gate {'on' if gate else 'off'}: {agree}/{len(pairs)} "
              f"({100 * agree / len(pairs):.2f}%)")


if __name__ == "__main__":
    main()
