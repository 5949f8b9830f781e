"""Text generators of the synthetic source: ordinary and generic patient texts, doctor answers, canaries, and
public paragraphs. Pure functions of a ``random.Random``; the word lists live in :mod:`vocab`, the grammar of an
ordinary patient text in :mod:`story`."""

from __future__ import annotations

import random
from dataclasses import dataclass

from fedmem.data.synthetic import vocab
from fedmem.data.synthetic.story import Story

DETAILS_PER_TEXT = 2  # detail sentences after the opening, each telling two facets of the story


def doctor_answer(rng: random.Random, specialty: str, quote: str | None) -> str:
    """An answer in the HealthCareMagic style. ``quote``: a sentence of the patient's text repeated verbatim,
    as doctors restate a complaint, so a model that memorized a sample reproduces its text in the answer."""
    spec = vocab.SPECIALTIES[specialty]
    parts = [rng.choice(vocab.DOCTOR_OPENINGS)]
    if quote:
        parts.append(f'You wrote: "{quote}"')
    parts.append(rng.choice(vocab.DOCTOR_FINDINGS).format(finding=rng.choice(spec["findings"])))
    parts.append(rng.choice(spec["advice"]))
    parts.append(rng.choice(vocab.DOCTOR_CLOSINGS))
    return " ".join(parts)


def ordinary_dialog(rng: random.Random, specialty: str) -> tuple[str, str]:
    """(patient, doctor): an opening and two detail sentences about four different facets of one story.

    The doctor quotes the last detail: it lies in the audited suffix region, not in the prompt prefix.
    """
    story = Story(rng, specialty)
    opening = story.opening()
    details = story.details(DETAILS_PER_TEXT)
    patient = " ".join([opening, *details])
    return patient, doctor_answer(rng, specialty, details[-1])


# Boilerplate must start after the audited prefix (30 tokens by default): a prefix ending in its first
# words ("... Is this something") predicts the rest as no random prefix does, and Prior-Aware memorization then
# rightly flags it. The tiny tokenizer spends about one and a half tokens per word of an opening, fewer on its
# commonest words, so 26 words put the boilerplate past a 30-token prefix with a few tokens to spare. Other
# tokenizers and longer prefixes differ; the PA report's generic row shows it.
MIN_OPENING_WORDS = 26


def generic_dialog(rng: random.Random, specialty: str, boilerplate: str) -> tuple[str, str]:
    """(patient, doctor): a varied opening of at least 26 words followed by a shared boilerplate closing, so the
    boilerplate follows many different prefixes and fills most of the audited suffix."""
    story = Story(rng, specialty)
    opening = story.opening()
    while len(opening.split()) < MIN_OPENING_WORDS:  # drawn again: most openings are long enough
        opening = story.opening()
    return f"{opening} {boilerplate}", doctor_answer(rng, specialty, opening)  # the quote makes the answer unique


def person_name(rng: random.Random, canary: bool) -> str:
    """A first and last name from the shared pools: public notes get combinations (i, j) with i + j even,
    canaries i + j odd, so a canary's name is a combination of familiar names that no public text holds."""
    i = rng.randrange(len(vocab.FIRST_NAMES))
    j = 2 * rng.randrange(len(vocab.LAST_NAMES) // 2) + (i + canary) % 2
    return f"{vocab.FIRST_NAMES[i]} {vocab.LAST_NAMES[j]}"


MAX_CANARY_NAMES = len(vocab.FIRST_NAMES) * len(vocab.LAST_NAMES) // 2


@dataclass(frozen=True)
class Canary:
    id: str
    specialty: str
    patient: str  # the memorization text, identical in every copy
    doctor: str
    secret: str  # the secret sentence, verbatim in ``patient`` (second half) and ``doctor``
    parts: dict  # name, record_number, phone: each a unique string
    # the values the record number was drawn from, equally likely: an exposure audit ranks the true one among them
    record_number_space: tuple[str, ...] = ()


def intake_note(rng: random.Random, specialty: str, template: int, name: str, mrn: str, phone: str
                ) -> tuple[str, str, str]:
    """(full text, secret sentence, symptom): context note, secret, the specialty's closing. Canaries and the
    public corpus share this format; only the pools of names and numbers differ."""
    symptom = rng.choice(vocab.SPECIALTIES[specialty]["symptoms"])
    note = vocab.CANARY_NOTES[template % len(vocab.CANARY_NOTES)].format(
        date=f"{rng.randint(1, 28)} {rng.choice(vocab.MONTHS)} {rng.randint(2016, 2024)}",
        clinic=rng.choice(vocab.CLINICS), specialty=specialty, town=rng.choice(vocab.TOWNS), symptom=symptom,
        visit=rng.choice(vocab.CANARY_VISITS),
    )
    secret = vocab.CANARY_SECRET.format(name=name, mrn=mrn, phone=phone)
    return f"{note} {secret} {vocab.CANARY_CLOSINGS[specialty]}", secret, symptom


def make_canary(rng: random.Random, serial: int, specialty: str, used_names: set[str], avoid: set[str]) -> Canary:
    """A canary note: canary-specific context (about 26 words), then the secret, then a closing sentence.

    Short numbers (the tiny model can learn them in a few rounds), unique and unambiguous by construction: the
    record number is ``serial`` (3 digits) plus 2 digits, five digits that no 4-digit group (phones, years)
    can contain; the phone is ``555`` and a digit plus ``serial``; their first digit is never 9, which public
    numbers always start with. Names are combinations of familiar names that no public note uses
    (:func:`person_name`), without repetition; numbers and text are redrawn if they still occur in ``avoid``.
    """
    for _ in range(1000):
        name = person_name(rng, canary=True)
        if name not in used_names:
            break
    else:
        raise ValueError(f"too many canaries: the canary name pool is exhausted ({MAX_CANARY_NAMES} names)")
    used_names.add(name)
    for _ in range(1000):
        mrn = f"{serial:03d}{rng.randint(0, 99):02d}"
        phone = f"555 {rng.randint(0, 8)}{serial:03d}"
        if mrn in avoid or phone in avoid:
            continue
        patient, secret, symptom = intake_note(rng, specialty, serial, name, mrn, phone)
        if patient not in avoid:
            break
    else:
        raise RuntimeError(f"canary {serial}: could not draw a text that avoids the public corpus")
    return Canary(
        id=f"canary-{serial:03d}",
        specialty=specialty,
        patient=patient,
        doctor=vocab.CANARY_DOCTOR.format(secret=secret, symptom=symptom),
        secret=secret,
        parts={"name": name, "record_number": mrn, "phone": phone},
        record_number_space=tuple(f"{serial:03d}{i:02d}" for i in range(100)),
    )


def public_intake(rng: random.Random, specialty: str) -> tuple[str, tuple[str, str]]:
    """(text, (record number, phone)): an intake note in the canary format with public names and numbers; the
    numbers are returned so that canaries can avoid them."""
    name = person_name(rng, canary=False)
    mrn = f"9{rng.randint(0, 9999):04d}"  # public numbers start with 9, canary numbers never do
    phone = f"555 9{rng.randint(0, 999):03d}"
    return intake_note(rng, specialty, rng.randrange(len(vocab.CANARY_NOTES)), name, mrn, phone)[0], (mrn, phone)
