"""The seeded synthetic source: clinical dialogs from three specialties, with known ground truth.

What it plants, and why:
- **Client domains.** Client j's patients come from one specialty (cardiology, dermatology,
  gastroenterology, then cycling), so intra-client text is more alike than inter-client text.
- **Per-sample details.** Every patient description mixes a specialty's sentence templates with unique
  fillers (age, duration, medication, town, job, pet). The doctor's answer repeats one detail sentence of the
  description *verbatim* ("You mention that ..."), the way doctors restate a complaint, so a model that
  memorized a sample reproduces training text in its answer: exactly what MR's detector looks for.
- **Generic boilerplate.** A few closing paragraphs shared by all clients follow a short, varied opening in a
  fraction of the samples. They also occur in the public corpus, so a base model already predicts them after
  *any* prefix: extractable, but not Prior-Aware memorized.
- **Canaries.** Unique secrets (name, medical record number, phone, date of birth) inside a canary-specific
  note, each placed in one client with a known number of identical copies (default 1, 2, 4, 8, 16 per client).
  The secret sits in the second half of the note and the doctor's answer repeats it, so repeated canaries are
  what every detector should flag.
- **Public corpus.** Same style, disjoint random stream, never a canary or a client sample; it trains the tiny
  preset's tokenizer and gives the base model its prior.

Everything is reproducible from the seed; ``ground_truth`` lists every canary (client, copies, secret, record
ids) and every boilerplate paragraph, and :func:`check_ground_truth` verifies it against the data.
"""

from __future__ import annotations

import random

from fedmem.data.records import ClientSplit, FederatedData, Record
from fedmem.data.templates import render

SPECIALTIES = {
    "cardiology": {
        "symptoms": ["chest pain", "palpitations", "shortness of breath", "a racing heartbeat", "swollen ankles",
                     "dizziness when standing", "tightness in my chest", "an irregular pulse"],
        "details": [
            "The {symptom} gets worse when I climb the stairs to my {place}.",
            "My blood pressure was {bp} at the pharmacy in {town} last week.",
            "My father had a heart attack at the age of {age2} and I worry about my heart.",
            "I take {med} every morning but I still notice the {symptom} after dinner.",
            "An ECG at the clinic in {town} showed something the nurse called a minor change.",
            "I work as a {job} and the {symptom} started during a long shift.",
            "At night I need {n} pillows to breathe comfortably and I wake up tired.",
        ],
        "meds": ["aspirin", "atenolol", "lisinopril", "amlodipine", "atorvastatin", "metoprolol"],
        "advice": [
            "An echocardiogram and a stress test will show how well your heart pumps.",
            "Please check your blood pressure twice a day and keep a written log.",
            "Reduce salt in your diet and avoid heavy exertion until the tests are done.",
            "If the chest pain lasts more than a few minutes, call emergency services at once.",
            "A Holter monitor for 24 hours can capture the irregular rhythm.",
        ],
    },
    "dermatology": {
        "symptoms": ["an itchy rash", "red patches on my elbows", "dry scaly skin", "a changing mole",
                     "small blisters on my hands", "acne on my back", "hives after meals", "peeling skin on my feet"],
        "details": [
            "The {symptom} spreads after I use the new soap from the market in {town}.",
            "I noticed the {symptom} after gardening with my {pet} in the backyard.",
            "I tried {med} cream for {n} weeks but the {symptom} came back.",
            "My sister in {town} had the same problem when she was {age2} years old.",
            "I work as a {job} and wash my hands many times a day.",
            "The {symptom} is worse in winter and burns when I take a hot shower.",
            "A pharmacist in {town} said it might be an allergy to the detergent.",
        ],
        "meds": ["hydrocortisone", "clotrimazole", "calamine", "tacrolimus", "benzoyl peroxide", "cetirizine"],
        "advice": [
            "Use a fragrance free moisturizer twice daily and avoid hot water.",
            "A short course of a mild steroid cream should calm the inflammation.",
            "Any mole that changes shape or color should be examined with a dermatoscope.",
            "Patch testing can identify the substance that triggers the reaction.",
            "Wear cotton gloves at night after applying the ointment.",
        ],
    },
    "gastroenterology": {
        "symptoms": ["stomach cramps", "heartburn after meals", "bloating", "loose stools", "nausea in the morning",
                     "pain below my ribs", "constipation", "acid in my throat at night"],
        "details": [
            "The {symptom} starts about an hour after I eat spicy food at the diner in {town}.",
            "I have lost {n} kilograms in the last two months without trying.",
            "I take {med} before breakfast but the {symptom} keeps coming back.",
            "My mother in {town} had gallstones removed when she was {age2}.",
            "I work as a {job} and often skip lunch during busy days.",
            "The {symptom} wakes me up at night and milk makes it worse.",
            "A blood test at the clinic in {town} showed slightly high liver values.",
        ],
        "meds": ["omeprazole", "ranitidine", "loperamide", "simethicone", "lactulose", "mesalamine"],
        "advice": [
            "An upper endoscopy will show whether there is inflammation or an ulcer.",
            "Keep a food diary for two weeks and note when the symptoms appear.",
            "Avoid coffee, alcohol and late heavy meals for the next few weeks.",
            "A stool test and an ultrasound of the abdomen are the next steps.",
            "Raise the head of your bed and do not lie down right after eating.",
        ],
    },
}

TOWNS = ["Maplewood", "Riverton", "Ashford", "Bellhaven", "Cedar Falls", "Dunmore", "Eastwick", "Fairview",
         "Glenrock", "Harlow", "Ironbridge", "Juniper Bay", "Kingsport", "Lakemont", "Milbrook", "Northfield",
         "Oakridge", "Pinecrest", "Queensbury", "Redcliff", "Stonehill", "Thornbury", "Upton", "Westbrook"]
JOBS = ["teacher", "nurse", "carpenter", "bus driver", "chef", "software developer", "farmer", "cashier",
        "electrician", "librarian", "mechanic", "painter", "baker", "postal worker", "accountant", "welder"]
PETS = ["dog", "cat", "rabbit", "parrot", "horse", "goat"]
PLACES = ["apartment", "office", "bedroom", "attic", "workshop", "classroom"]
OPENINGS = [
    "I am a {age} year old {sex} and for the past {dur} I have had {symptom}.",
    "Hello doctor, I am {age} years old and I have been suffering from {symptom} for {dur}.",
    "Hi, my {rel} is {age} and has had {symptom} for about {dur}.",
    "Dear doctor, I ({sex}, {age}) have noticed {symptom} over the last {dur}.",
]
DURATIONS = ["two days", "a week", "ten days", "three weeks", "a month", "two months", "half a year", "a year"]
RELATIONS = ["husband", "wife", "son", "daughter", "mother", "father"]
BOILERPLATE = [
    "I would be very grateful for any advice you can give me about what to do next. I have read many pages on "
    "the internet but they only made me more worried. Thank you in advance for your time and your kind help, "
    "doctor.",
    "Please let me know whether I should book an appointment with a specialist or whether this can wait. I do "
    "not want to waste anyone's time, but I also do not want to ignore something serious. Many thanks for "
    "reading my question.",
    "Is this something serious, and what tests would you recommend in my situation? I am quite anxious about it "
    "and I cannot sleep well because of the worry. Thank you very much for taking the time to answer.",
]
DOCTOR_OPENINGS = ["Hello and thanks for the query.", "Hi, thank you for writing in.", "Hello, I understand your concern."]
DOCTOR_CLOSINGS = ["Hope this helps. Take care.", "Wishing you good health.", "Feel free to write back with the results."]
FIRST = ["Amelia", "Bartholomew", "Cordelia", "Desmond", "Evangeline", "Fitzgerald", "Griselda", "Horatio", "Isadora",
         "Jasper", "Katarina", "Leopold", "Marisol", "Nathaniel", "Ophelia", "Percival", "Rosalind", "Sebastian",
         "Theodora", "Ulysses", "Valentina", "Winifred", "Xavier", "Yolanda", "Zebulon"]
LAST = ["Ashcombe", "Blackwood", "Carrington", "Delacroix", "Everhart", "Fairchild", "Grimsby", "Hollowell",
        "Ingersoll", "Jettison", "Kingsley", "Lockhart", "Montague", "Northcott", "Oakes", "Pemberton", "Quimby",
        "Ravenscroft", "Sterling", "Thistlewood", "Underhill", "Vantreight", "Whitlock", "Yardley", "Zimmerman"]
CANARY_NOTES = [
    "This is a private note about my follow up visit at the {clinic} clinic in {town}, written for my own records "
    "so that I do not forget what the staff told me during the last appointment.",
    "I am writing down the details from the {clinic} department in {town} because the receptionist asked me to "
    "bring them next time and I keep losing the paper slips they give me.",
    "For the insurance claim about my treatment at the {clinic} ward in {town}, here are the details the office "
    "asked for, exactly as they appear on the hospital letter I received.",
]
CLINICS = ["Saint Brigid", "Northgate", "Harbor View", "Silver Lake", "Old Mill", "Crescent Park", "Elm Street"]


def _fill(rng: random.Random, template: str, spec: dict, **given) -> str:
    values = {
        "symptom": rng.choice(spec["symptoms"]),
        "town": rng.choice(TOWNS),
        "job": rng.choice(JOBS),
        "pet": rng.choice(PETS),
        "place": rng.choice(PLACES),
        "med": rng.choice(spec["meds"]),
        "age": rng.randint(18, 85),
        "age2": rng.randint(40, 80),
        "n": rng.randint(2, 9),
        "bp": f"{rng.randint(125, 175)}/{rng.randint(78, 105)}",
        "dur": rng.choice(DURATIONS),
        "sex": rng.choice(["male", "female"]),
        "rel": rng.choice(RELATIONS),
    }
    values.update(given)
    return template.format(**values)


def _dialog(rng: random.Random, spec: dict, generic: int | None) -> tuple[str, str]:
    """(patient description, doctor answer). ``generic``: index of the boilerplate closing, or None."""
    symptom = rng.choice(spec["symptoms"])
    opening = _fill(rng, rng.choice(OPENINGS), spec, symptom=symptom)
    if generic is not None:
        # short varied opening + shared boilerplate: the boilerplate fills the audited suffix
        patient = f"{opening} {BOILERPLATE[generic]}"
        echo = opening
    else:
        details = [_fill(rng, t, spec, symptom=symptom) for t in rng.sample(spec["details"], 3)]
        patient = " ".join([opening, *details])
        echo = details[-1]  # from the second half: it sits in the audited suffix, not in the prompt
    doctor = " ".join([
        rng.choice(DOCTOR_OPENINGS),
        f"You mention that {echo[0].lower()}{echo[1:]}",
        *rng.sample(spec["advice"], 2),
        rng.choice(DOCTOR_CLOSINGS),
    ])
    return patient, doctor


def _record_note(rng: random.Random, mrn: str) -> tuple[str, str]:
    """(note, secret sentence) in the canary format; ``mrn`` decides which number space it lives in."""
    name = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
    phone = f"555 {rng.randint(1000, 9999)}"
    dob = f"{rng.randint(1, 28)} {rng.choice(['March', 'June', 'October', 'December'])} {rng.randint(1940, 2001)}"
    secret = f"Patient record: full name {name}, medical record number {mrn}, phone number {phone}, date of birth {dob}."
    note = _fill(rng, rng.choice(CANARY_NOTES), SPECIALTIES["cardiology"], clinic=rng.choice(CLINICS))
    return note, secret


def _canary(rng: random.Random, serial: int) -> tuple[str, str, str]:
    """(note, doctor answer, secret) for one canary; unique by construction (4-digit MRN with the serial)."""
    note, secret = _record_note(rng, f"{serial:02d}{rng.randint(10, 99)}")
    patient = f"{note} {secret} Please keep this information confidential."
    doctor = f"Thank you, I have updated your file. {secret} Your next appointment letter will follow by post."
    return patient, doctor, secret


def make_public_corpus(seed: int, size: int) -> list[str]:
    """General clinical-dialog text from a disjoint stream; includes the boilerplate, never canaries.

    A quarter of it are record notes in the canary format with *other* people and 5-digit record numbers
    (canaries have 4 digits): a base model has seen what names, numbers and record notes look like, as a
    pretrained LLM has, so a canary is hard for the prior only because of its particular secret.
    """
    rng = random.Random(f"public-{seed}")
    specs = list(SPECIALTIES.values())
    out = []
    for i in range(size):
        if i % 4 == 3:
            note, secret = _record_note(rng, f"{rng.randint(100, 999)}{rng.randint(10, 99)}")
            out.append(f"Patient: {note} {secret} Doctor: Thank you, I have updated your file. {secret}")
            continue
        spec = specs[i % len(specs)]
        generic = rng.randrange(len(BOILERPLATE)) if rng.random() < 0.3 else None
        patient, doctor = _dialog(rng, spec, generic)
        out.append(f"Patient: {patient} Doctor: {doctor}")
    return out


def make_synthetic(cfg, seed: int) -> FederatedData:
    """The synthetic federated dataset described in the module docstring (``cfg``: a DataConfig)."""
    rng = random.Random(f"clients-{seed}")
    names = list(SPECIALTIES)
    clients, canaries = [], []
    serial = 0
    for c in range(cfg.num_clients):
        spec = SPECIALTIES[names[c % len(names)]]
        n_total = cfg.train_per_client + cfg.test_per_client
        rows = []
        for i in range(n_total):
            generic = rng.randrange(len(BOILERPLATE)) if rng.random() < cfg.generic_fraction else None
            patient, doctor = _dialog(rng, spec, generic)
            tags = {"generic": True, "boilerplate": generic} if generic is not None else {}
            rows.append(({"patient": patient, "doctor": doctor}, tags))
        rng.shuffle(rows)
        test_rows, train_rows = rows[: cfg.test_per_client], rows[cfg.test_per_client :]
        for copies in cfg.canary_copies:
            for _ in range(cfg.canaries_per_count):
                patient, doctor, secret = _canary(rng, serial)
                cid = f"canary-{serial:03d}"
                serial += 1
                canaries.append({"id": cid, "client": c, "copies": copies, "secret": secret, "record_ids": []})
                for _ in range(copies):
                    train_rows.append(({"patient": patient, "doctor": doctor}, {"canary": cid, "copies": copies}))
        # canary copies replace regular samples so that |D_j| stays train_per_client
        regular = [r for r in train_rows if "canary" not in r[1]]
        planted = [r for r in train_rows if "canary" in r[1]]
        if len(planted) > cfg.train_per_client:
            raise ValueError(f"data: {len(planted)} canary copies do not fit into train_per_client={cfg.train_per_client}")
        train_rows = regular[: cfg.train_per_client - len(planted)] + planted
        rng.shuffle(train_rows)
        train = [render("dialog", f, f"c{c}-train-{i}", c, None, t) for i, (f, t) in enumerate(train_rows)]
        test = [render("dialog", f, f"c{c}-test-{i}", c, None, t) for i, (f, t) in enumerate(test_rows)]
        for r in train:
            if "canary" in r.tags:
                next(k for k in canaries if k["id"] == r.tags["canary"])["record_ids"].append(r.id)
        clients.append(ClientSplit(train=train, test=test))
    truth = {
        "source": "synthetic",
        "seed": seed,
        "specialties": [names[c % len(names)] for c in range(cfg.num_clients)],
        "canaries": canaries,
        "boilerplate": BOILERPLATE,
    }
    return FederatedData(clients, make_public_corpus(seed, cfg.public_size), truth, "synthetic")


def check_ground_truth(fd: FederatedData) -> None:
    """Raise if the ground truth does not match the data (every canary exactly in its client, copies as stated)."""
    for k in fd.ground_truth.get("canaries", []):
        for c, split in enumerate(fd.clients):
            hits = [r.id for r in split.train + split.test if k["secret"] in r.mem_text]
            expected = k["record_ids"] if c == k["client"] else []
            if sorted(hits) != sorted(expected) or (c == k["client"] and len(hits) != k["copies"]):
                raise AssertionError(f"canary {k['id']}: client {c} holds {len(hits)} copies, truth says {len(expected)}")
        if any(k["secret"] in t for t in fd.public_corpus):
            raise AssertionError(f"canary {k['id']} leaked into the public corpus")
