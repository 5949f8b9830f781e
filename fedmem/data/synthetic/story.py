"""The grammar of an ordinary patient text: an opening (greeting, age, job, town, the main symptom and since
when) and detail sentences, each telling two facets of the patient's story (onset, character, triggers, medicine,
tests, family history, habits, routine, work, associated complaints, impact, worries, visits).

A clause is a frame of a few fixed words around slots; a slot is filled by a phrase drawn from a list, and a
phrase may hold slots of its own (``{town}``, a number). The memorization detector seeds a match on a sentence
pair that shares about a third of its words, and calls it verbatim on a common run of 50 characters; so frames
keep their own words few and short, every slot draws from a list of its own, and two facets share a sentence.
Two patients' sentences then rarely match, even within a specialty: the specialty shows in the vocabulary of its
slots (:mod:`vocab`), not in shared sentences.
"""

from __future__ import annotations

import random
import re
from collections import ChainMap

from fedmem.data.synthetic import vocab

# The opening: greeting, who and where, the main symptom and how long it has lasted.
OPENINGS = [
    "{greeting} I am {age}, {sex}, working as {job} in {town}, and {complaint}.",
    "{greeting} I am {age}, a {sex} patient from {town} who works as {job}, and {complaint}.",
    "{greeting} I live in {town}, I am {age} and work as {job}, and {complaint}.",
    "{greeting} I am {job} aged {age}, living near {town}, and {complaint}.",
    "{greeting} I am writing from {town}: I am {age}, I work as {job}, and {complaint}.",
    "{greeting} as {job} of {age} from {town}, I need advice because {complaint}.",
]
GREETINGS = ["Hello doctor,", "Hi,", "Dear doctor,", "Good evening,", "Doctor,", "Hello,", "Good morning doctor,",
             "Hi there,", "Dear sir or madam,", "Greetings,"]
# The symptom comes after a varied part (a duration, a month) or a short lead, so that two openings of one
# specialty rarely share a 50-character run.
COMPLAINTS = [
    "for {dur} I have had {symptom}",
    "I have had {symptom} for {dur}",
    "{dur} ago I noticed {symptom}",
    "I get {symptom}, on and off for {dur}",
    "since {month} I have had {symptom}",
    "since {event} I have had {symptom}",
]

# Detail clauses, by facet. A text tells a few facets, each once, two to a sentence (JOINERS), as patients write
# in long sentences: a sentence then shares a third of its words with another patient's only if both of its
# facets do. A frame is mostly slots: its own words are few and short, its slots many and independent (each adds
# a word or two from a list of its own), and nearly every clause carries specifics of its own (a date, a clock
# time, a dose, a reading, an age). Frames start in lower case; the sentence capitalizes its first letter.
FACETS: dict[str, list[str]] = {
    "onset": [
        "{onset} on {date}, {context}",
        "on {date}, {activity} {at_place}, I {felt_it}",
        "{context}, it {began} {when}",
    ],
    "character": [
        "it feels {quality} {site} and {lasts}",
        "{scale_lead} {score} out of 10 {when_often}",
        "the {sensation} {site} feels {quality} and {spread}",
    ],
    "triggers": [
        "{trigger} {makes_worse} within {minutes} minutes, {relief_clause}",
        "{relief} {helps} for {digit} hours, yet {trigger} {makes_worse}",
        "{trigger} {made_worse} {when} {where}",
    ],
    "medicine": [
        "{med_start} {med} {freq} {when}, {med_effect}",
        "{adviser} suggested {med} {freq}; {med_effect}",
        "since {date} I have taken {med} {freq}, {med_effect}",
    ],
    "tests": [
        "{test} at {clinic_place} {when} {test_said}",
        "{reading} at {clinic_place} {when}",
        "{tester} found that {reading} {when}",
    ],
    "history": [
        "my {elder} {had} {condition} at {age2} {where_care}",
        "at {age2} my {elder} {had} {condition} {when_past}",
        "in {year} I {had_self} {condition} {where_care}",
    ],
    "habits": [
        "I {drink_habit} {per}, {smoke_clause}",
        "{beverage} {bev_role} {per_past}, {smoke_clause}",
    ],
    "routine": [
        "I {sleep_clause}, {sport_clause}",
        "most {wday_plural} I {sport}, then I {sleep_clause}",
    ],
    "work": [
        "as {job} I {work_task} {job_when}",
        "my {workplace} in {town} {work_change} {when}",
    ],
    "associated": [
        "{assoc_since} I also get {associated} {when_often}",
        "{associated} {joined} {when} {where}",
    ],
    "impact": [
        "{impact_lead} {hobby} {impact_since}",
        "I {missed} {digit} days of {work_word} in {month} and {digit} more in {month}",
    ],
    "worry": [
        "{worry_lead} {worry}, {worry_reason}",
        "{when} my {rel} {said_verb} {worry}",
    ],
    "visit": [
        "I saw {clinician} {when_visit}, who {visit_said}",
        "{clinician} in {town} {visit_said} {when_visit}",
    ],
}

# Between two facets told in one sentence.
JOINERS = [", and ", "; ", ", and also ", ", plus ", "; besides, ", "; meanwhile ", " and "]

PIECES: dict[str, list[str]] = {
    "greeting": GREETINGS,
    "complaint": COMPLAINTS,
    "dur": ["{about} {numw} {unit}", "{numw} {unit}"],
    "about": ["about", "nearly", "almost", "roughly", "more than", "just over", "close to"],
    "unit": ["days", "weeks", "months"],
    "sex": ["male", "female"],
    "date": ["{day} {month}", "{month} {day}"],
    # a time: when something happened
    "when": ["on {date}", "last {weekday}", "{digit} {unit} ago", "in late {month}", "in early {month}",
             "back in {month} {year}", "around {clock} one {weekday}", "after {event}", "during {event}",
             "before {event}", "on {weekday} at {clock}", "in mid {month}", "{digit} days before {event}",
             "{digit} weeks after {event}", "at {clock} on {date}"],
    "when_visit": ["on {date}", "last {weekday}", "{digit} {unit} ago", "in late {month}", "in early {month}",
                   "on {weekday} at {clock}", "after {event}", "at {clock} on {date}", "in mid {month}"],
    "when_past": ["in {year}", "back in {year}", "in {month} {year}", "{digit} years ago", "around {year}",
                  "after {event}"],
    # a time: when something tends to happen
    "when_often": ["{daypart}", "mostly {daypart}", "especially {daypart}", "usually {daypart}", "at {clock}",
                   "on {weekday} nights", "every {weekday}", "{digit} times a week", "since {date}", "around {clock}",
                   "since {event}", "twice in {month}", "often {daypart}", "on {wday_plural}"],
    "where": ["at {place}", "in {town}", "at work", "at home", "near {place}", "on a trip to {town}",
              "at {clinic_place}", "in {town} hospital", "while visiting {town}", "outside {place}"],
    "where_care": ["at {clinic_place}", "in {town}", "in {town} hospital", "while living in {town}",
                   "at {clinic_place} in {town}", "abroad"],
    # onset
    "onset": ["it began", "it first hit me", "it all started", "the trouble began", "I first felt it", "it came on",
              "it crept up on me", "my first bout came", "the first attack struck", "it showed up",
              "I first noticed it", "it kicked in", "it set in", "it woke me", "it flared up"],
    "felt_it": ["felt it first", "noticed it", "had my first attack", "first got it", "had to stop", "sat down",
                "felt sick", "called my {rel}", "went pale", "knew something was wrong"],
    "context": ["while I was {activity} {at_place}", "right after {activity}", "during {event} in {town}",
                "as I was {activity}", "at {place} in {town}", "on my way to {place}", "halfway through {event}",
                "just after {activity} {at_place}", "minutes into {activity}", "at {clock} in {town}"],
    "began": ["began", "first started", "came on out of nowhere", "first showed up", "crept up on me",
              "suddenly struck", "flared up", "kicked in", "hit me", "returned"],
    "at_place": ["at {place}", "near {place}", "outside {place}", "in {place}", "by {place}", "behind {place}"],
    # character
    "sensation": ["feeling", "ache", "discomfort", "sensation", "pressure", "soreness", "pain", "twinge"],
    "score": ["3", "4", "5", "6", "7", "8", "9", "10"],
    "lasts": ["lasts {minutes} minutes", "stays for {digit} hours", "eases within {minutes} minutes",
              "goes on for {digit} days", "lingers {digit} or so hours", "fades by {clock}",
              "peaks at {clock}", "returns every {digit} hours", "clears in {minutes} minutes"],
    "scale_lead": ["I would score it", "at worst it reaches", "my pain score is", "it hits", "on bad days it rates",
                   "most days it is", "my diary gives it"],
    # triggers
    "makes_worse": ["makes it worse", "sets it off", "brings it straight back", "always triggers it",
                    "seems to start it", "makes it flare", "doubles it", "stirs it up", "provokes it",
                    "turns it nasty"],
    "made_worse": ["made it worse", "set it off", "brought it straight back", "triggered it", "started it again",
                   "made it flare", "doubled it", "stirred it up"],
    "relief_clause": ["while {relief} {helps}", "though {relief} {helps}", "yet {relief} {helps}",
                      "whereas {relief} {helps}"],
    "helps": ["helps a little", "eases it", "calms it down", "gives me some relief", "takes the edge off",
              "settles it", "soothes it", "dampens it", "works best", "brings relief"],
    # medicine
    "med_start": ["I started", "I was given", "I tried", "I bought", "my doctor put me on", "I was prescribed",
                  "a nurse gave me", "I switched to"],
    "freq": ["once a day", "twice daily", "every morning", "at bedtime", "with breakfast", "when needed",
             "every {digit} hours", "three times a day", "every other day", "after meals", "on weekdays"],
    "med_effect": ["but it barely helps", "which helped for a while", "and it makes me drowsy",
                   "though the effect wears off", "and it worked at first", "which upsets my stomach",
                   "but I often forget a dose", "and I feel no real difference", "which seems to help",
                   "but the side effects worry me", "and my mouth goes dry", "which gave me a rash",
                   "and the relief is patchy", "yet nothing changed", "and I sleep better", "which cost a fortune",
                   "but my dizziness got worse", "and my {rel} noticed a change", "since {event}",
                   "but only for {digit} days", "with {digit} doses missed"],
    "adviser": vocab.ADVISERS,
    "dose": ["5", "10", "20", "25", "40", "50", "75", "80", "100", "150", "200", "250", "400", "500"],
    "bp": ["{systolic}/{diastolic}"],
    # tests
    "test_said": ["showed nothing unusual", "came back borderline", "was mildly abnormal", "must be repeated",
                  "was normal but one value", "showed a small change", "was never explained", "got lost",
                  "looked fine to the nurse", "worried the registrar", "found something minor", "was unclear"],
    "tester": ["a nurse", "the pharmacist", "my {rel}", "the company doctor", "a paramedic", "my physiotherapist",
               "a trainee doctor", "a locum", "the night nurse", "a student nurse"],
    # history
    "elder": ["mother", "father", "grandmother", "grandfather", "aunt", "uncle", "older brother", "older sister",
              "cousin", "godmother"],
    "had": ["had", "was treated for", "was diagnosed with", "struggled with", "battled", "lived with",
            "was tested for"],
    "had_self": ["was treated for", "had", "was told I had", "recovered from", "was tested for"],
    # habits
    "drink_habit": ["drink {digit} cups of {hot_drink}", "have {digit} glasses of {wine}",
                    "get through {digit} cans of {soda}", "enjoy {digit} pints of {beer}", "eat {digit} chocolate bars",
                    "sip {digit} mugs of {hot_drink}", "down {digit} bottles of {beer}"],
    "hot_drink": ["coffee", "tea", "espresso", "cocoa", "green tea", "herbal tea", "hot chocolate"],
    "wine": ["red wine", "white wine", "rosé", "port", "sherry"],
    "soda": ["cola", "lemonade", "energy drink", "ginger ale", "tonic"],
    "beer": ["lager", "ale", "cider", "stout", "bitter"],
    "beverage": ["coffee", "tea", "cola", "wine", "beer", "cider", "espresso", "cocoa", "lemonade", "whisky",
                 "green tea", "gin", "sweet sherry"],
    "bev_role": ["was my weakness", "became a habit", "kept me going", "was all I drank", "replaced meals",
                 "helped me cope", "got out of hand", "ruled my {decade}", "cost me {digit} pounds a day",
                 "was my {rel}'s idea", "kept me awake"],
    "per": ["a day", "daily", "each evening", "per shift", "on {wday_plural}", "at weekends", "every morning",
            "a week", "with lunch", "before bed", "at {clock}", "after work"],
    "per_past": ["for {digit} years", "until {year}", "since {year}", "in my {decade}", "at university",
                 "after {event}", "until my {rel} objected", "while living in {town}", "until {month}"],
    "decade": ["twenties", "thirties", "forties", "fifties"],
    "smoke_clause": ["and I smoke {digit} cigarettes a day", "but I quit in {year}", "and I vape {digit} times a day",
                     "though I stopped smoking {digit} years ago", "and I never smoked",
                     "and I roll my own, {digit} a day", "and I smoke cigars on {wday_plural}",
                     "and my {rel} smokes indoors", "and I chew nicotine gum since {month}", "but I smoke at parties",
                     "and I smoke {digit} pipes a week", "yet I quit smoking after {event}"],
    # routine
    "sleep_clause": ["sleep {digit} hours", "go to bed at {late}", "wake at {early}", "nap for {minutes} minutes",
                     "lie awake until {late}", "get up at {early}", "doze off by {late}",
                     "wake {digit} times a night"],
    "late": ["{late_hour} pm", "midnight", "{small_hour} am"],
    "early": ["{early_hour} am", "dawn"],
    "sport_clause": ["and I {sport} {per}", "but I still {sport} {per}", "and my {rel} and I {sport} {per}",
                     "then I {sport}"],
    "sport": ["swim {digit} lengths", "jog {digit} kilometres", "cycle {digit} miles", "walk {digit} miles",
              "row for {minutes} minutes", "dance for {minutes} minutes", "hike {digit} miles",
              "skate for {minutes} minutes", "stretch for {minutes} minutes", "lift weights for {minutes} minutes",
              "play squash for {minutes} minutes", "do {digit}0 push-ups", "play badminton for {minutes} minutes",
              "ride my horse for {minutes} minutes"],
    "wday_plural": ["Mondays", "Tuesdays", "Wednesdays", "Thursdays", "Fridays", "Saturdays", "Sundays"],
    # work
    "work_task": ["lift heavy crates", "stack pallets", "drive a forklift", "sit at a screen", "stand at a till",
                  "climb ladders", "kneel on concrete", "carry trays", "scrub floors", "mix chemicals",
                  "answer calls", "unload lorries", "sort parcels", "serve customers", "push trolleys", "weld pipes",
                  "lay bricks", "dig trenches", "type reports", "cook over hot stoves", "wash dishes", "fix engines",
                  "paint walls", "clean offices", "lift patients", "carry toddlers", "mark homework",
                  "walk long corridors", "handle cold meat", "drive at night"],
    "job_when": ["{digit} days a week", "on {digit} night shifts a month", "for {digit} hours a day", "every weekend",
                 "until {clock}", "from {clock}", "on {wday_plural}", "all day long", "in {digit} hour shifts"],
    "workplace": ["employer", "manager", "warehouse", "workshop", "shop", "office", "factory", "depot", "firm",
                  "school", "kitchen", "yard"],
    "work_change": ["changed my hours", "moved me to nights", "cut my breaks", "closed for repairs",
                    "brought in new chemicals", "got a new boss", "doubled my rounds", "installed air conditioning",
                    "started weekend shifts", "laid off my colleague"],
    # associated
    "assoc_since": ["since {date}", "for {digit} {unit}", "lately", "after {event}", "ever since {month}",
                    "twice this {unit2}", "from {date}"],
    "unit2": ["week", "month"],
    "joined": ["joined in", "appeared", "started", "turned up", "arrived", "came along"],
    # impact
    "impact_lead": ["I have given up", "I can no longer manage", "I have stopped", "I have cut back on",
                    "I keep skipping", "I have missed", "I miss out on", "I have dropped"],
    "impact_since": ["since {month}", "for {digit} weeks now", "since {date}", "since {event}",
                     "{digit} times this month", "since attack number {digit}", "from {month} on"],
    "missed": ["missed", "lost", "took off", "called in sick for"],
    "work_word": ["work", "school", "college", "my shifts", "training", "my course"],
    # worry
    "worry_lead": ["I am afraid", "what worries me is that", "I keep thinking", "honestly I fear", "I read online that",
                   "part of me suspects", "my worst fear is that", "a friend in {town} said"],
    "worry_reason": ["as my {elder} had it at {age2}", "since a forum post in {month}", "like a neighbour in {town}",
                     "after {event}", "and it keeps me up until {clock}", "since nobody examined me on {date}",
                     "and I am only {age}", "since reading about it on {date}"],
    "said_verb": ["said", "insisted", "suggested", "warned me", "told me", "thought"],
    # visit
    "clinician": ["my family doctor", "a locum", "a nurse practitioner", "the out of hours doctor", "a consultant",
                  "a private specialist", "the practice nurse", "a junior doctor", "my physiotherapist",
                  "a pharmacist", "the walk-in clinic"],
    "visit_said": ["told me to rest", "sent me home with painkillers", "wanted more tests", "said it was stress",
                   "booked a scan", "found nothing", "referred me on", "changed my tablets", "suggested a diary",
                   "prescribed {med}", "took {digit} blood samples", "said to wait {digit} weeks",
                   "blamed my {blamed}"],
    "blamed": ["weight", "age", "job", "diet", "nerves", "posture"],
    "clock": ["{hour} am", "{hour} pm"],
    # shared word lists (vocab)
    "town": vocab.TOWNS,
    "job": vocab.JOBS,
    "rel": vocab.RELATIONS,
    "weekday": vocab.WEEKDAYS,
    "month": vocab.MONTHS,
    "place": vocab.PLACES,
    "activity": vocab.ACTIVITIES,
    "event": vocab.EVENTS,
    "hobby": vocab.HOBBIES,
    "clinic_place": vocab.CLINIC_PLACES,
    "daypart": vocab.DAYPARTS,
    "numw": vocab.NUMBER_WORDS,
}
# Per-specialty slots: the specialty's own list (vocab.SPECIALTIES) under the slot's name.
SPECIALTY_SLOTS = {"symptom": "symptoms", "associated": "associated", "site": "sites", "quality": "qualities",
                   "spread": "spreads", "trigger": "triggers", "relief": "reliefs", "med": "meds", "test": "tests",
                   "reading": "readings", "condition": "conditions", "worry": "worries"}

# Number slots, each drawn uniformly from (low, high) wherever it occurs; readings use the specialty's own.
NUMBERS = {
    "age": (18, 85), "age2": (35, 88), "digit": (2, 9), "minutes": (5, 45), "year": (1995, 2023),
    "day": (1, 28), "hour": (1, 12), "late_hour": (8, 11), "small_hour": (1, 4), "early_hour": (4, 9),
    "systolic": (112, 188), "diastolic": (68, 114),
    "pulse": (48, 118), "pulse_high": (120, 175), "chol": (160, 310), "ldl": (90, 220), "beats": (200, 4000),
    "mm": (3, 19), "ige": (120, 900), "pct": (5, 60), "spots": (3, 40), "vitd": (12, 80),
    "liver": (45, 160), "kg": (2, 14), "iron": (5, 30), "calpro": (60, 900), "weight": (48, 125), "amylase": (110, 600),
    "b12": (140, 420), "memory": (18, 30), "sleep": (3, 6), "attacks": (2, 20), "sugar": (70, 190), "ncv": (28, 55),
    "oxygen": (86, 97), "peak": (180, 560), "metres": (150, 520), "pauses": (6, 60), "resp": (14, 32), "puffs": (4, 16),
}

_SLOT = re.compile(r"\{(\w+)\}")


def expand(rng: random.Random, frame: str, slots, fixed: dict) -> str:
    """``frame`` with every ``{slot}`` replaced: a ``fixed`` value (the patient's own), a number drawn from its
    range, or a phrase drawn from ``slots``, itself expanded."""
    def fill(match: re.Match) -> str:
        name = match.group(1)
        if name in fixed:
            return fixed[name]
        if name in NUMBERS:
            return str(rng.randint(*NUMBERS[name]))
        return expand(rng, rng.choice(slots[name]), slots, fixed)

    return _SLOT.sub(fill, frame)


def sentence(text: str) -> str:
    """``text`` with its first letter in upper case (frames start in lower case)."""
    return text[:1].upper() + text[1:]


def slots_for(specialty: str) -> ChainMap:
    """The slots of a specialty's patients: its own word lists (vocab.SPECIALTIES) over the shared pieces."""
    spec = vocab.SPECIALTIES[specialty]
    return ChainMap({slot: spec[key] for slot, key in SPECIALTY_SLOTS.items()}, PIECES)


class Story:
    """One patient: a specialty, and a main symptom, job and age that every sentence of theirs shares."""

    def __init__(self, rng: random.Random, specialty: str):
        self.rng = rng
        self.slots = slots_for(specialty)
        self.person = {"symptom": rng.choice(self.slots["symptom"]), "job": rng.choice(vocab.JOBS),
                       "age": str(rng.randint(*NUMBERS["age"]))}

    def fill(self, frame: str) -> str:
        return expand(self.rng, frame, self.slots, self.person)

    def opening(self) -> str:
        return sentence(self.fill(self.rng.choice(OPENINGS)))

    def details(self, k: int, per_sentence: int = 2) -> list[str]:
        """``k`` detail sentences, each telling ``per_sentence`` different facets joined into one sentence; no
        facet twice in a text."""
        facets = self.rng.sample(sorted(FACETS), k * per_sentence)
        out = []
        for i in range(k):
            clauses = [self.fill(self.rng.choice(FACETS[f])) for f in facets[i * per_sentence:(i + 1) * per_sentence]]
            text = clauses[0]
            for clause in clauses[1:]:
                text += self.rng.choice(JOINERS) + clause
            out.append(sentence(text) + ".")
        return out
