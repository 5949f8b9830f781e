"""Word lists and sentence templates of the synthetic clinical-dialog source.

Each specialty has its own symptoms, detail sentences, medicines, findings and advice, so that a client's
texts resemble each other more than another client's. Names and phone numbers exist in two disjoint pools:
``CANARY_*`` only ever appears in canaries, ``PUBLIC_*`` only in the public corpus (which therefore teaches the
*format* of an intake note without ever containing a secret).
"""

from __future__ import annotations

SPECIALTIES: dict[str, dict[str, list[str]]] = {
    "cardiology": {
        "symptoms": ["chest pain", "palpitations", "shortness of breath", "racing heartbeats", "swollen ankles",
                     "dizziness when standing", "tightness in my chest", "irregular heartbeats"],
        "details": [
            "The {symptom} got worse when I climbed the {n} flights of stairs to my {place}.",
            "My blood pressure was {bp} at the pharmacy in {town} last {weekday}.",
            "My {rel} had a heart attack at the age of {age2} and I worry about my heart.",
            "I take {med} {dose} mg every morning but I still notice the {symptom} after dinner.",
            "An ECG at the clinic in {town} showed what the nurse called a minor change in lead {n}.",
            "I work as {job} and the {symptom} started during a long shift on a {weekday}.",
            "At night I need {n} pillows to breathe comfortably and I wake up tired.",
            "My cholesterol came back at {value} and my resting pulse is around {pulse} beats a minute.",
        ],
        "meds": ["aspirin", "atenolol", "lisinopril", "amlodipine", "atorvastatin", "metoprolol"],
        "findings": ["a rhythm problem such as atrial fibrillation", "angina from narrowed heart arteries",
                     "high blood pressure that is not yet controlled", "fluid retention from a weak heart pump"],
        "advice": [
            "An echocardiogram and a stress test will show how well your heart pumps.",
            "Please check your blood pressure twice a day and keep a written log.",
            "Reduce salt in your diet and avoid heavy exertion until the tests are done.",
            "If the chest pain lasts more than a few minutes, call emergency services at once.",
            "A Holter monitor for 24 hours can capture the irregular rhythm.",
            "Do not stop your heart medicine on your own without talking to your cardiologist.",
        ],
    },
    "dermatology": {
        "symptoms": ["itchy rashes on my arms", "red patches on my elbows", "dry scaly skin", "changes in a mole",
                     "small blisters on my hands", "acne on my back", "hives after meals", "peeling skin on my feet"],
        "details": [
            "The {symptom} spread after I used the new soap from the market in {town}.",
            "I noticed the {symptom} after gardening with my {pet} behind the {place}.",
            "I tried {med} cream for {n} weeks but the {symptom} came back.",
            "My {rel} in {town} had the same problem at the age of {age2}.",
            "I work as {job} and wash my hands about {value} times a day.",
            "The {symptom} got worse last winter and burned when I took a hot shower on {weekday} mornings.",
            "A pharmacist in {town} said it might be an allergy to the detergent I bought {n} weeks ago.",
            "The largest spot is about {n} millimeters wide and it has grown since I first saw it.",
        ],
        "meds": ["hydrocortisone", "clotrimazole", "calamine", "tacrolimus", "benzoyl peroxide", "mometasone"],
        "findings": ["contact dermatitis from something that touches your skin", "eczema flaring in the cold",
                     "a fungal infection of the skin", "psoriasis, which tends to come and go"],
        "advice": [
            "Use a fragrance free moisturizer twice daily and avoid hot water.",
            "A short course of a mild steroid cream should calm the inflammation.",
            "Any mole that changes shape or color should be examined with a dermatoscope.",
            "Patch testing can identify the substance that triggers the reaction.",
            "Wear cotton gloves at night after applying the ointment.",
            "Keep the area clean and dry and do not scratch or pick at the spots.",
        ],
    },
    "gastroenterology": {
        "symptoms": ["stomach cramps", "heartburn after meals", "bloating", "loose stools", "nausea in the morning",
                     "pain below my ribs", "constipation", "acid in my throat at night"],
        "details": [
            "The {symptom} started about an hour after I ate spicy food at the diner in {town}.",
            "I have lost {n} kilograms in the last two months without trying.",
            "I take {med} {dose} mg before breakfast but the {symptom} always came back.",
            "My {rel} in {town} had gallstones removed at the age of {age2}.",
            "I work as {job} and often skip lunch during busy days like {weekday}.",
            "The {symptom} woke me up {n} times last week and milk made it worse.",
            "A blood test at the clinic in {town} showed a liver value of {value}, slightly above normal.",
            "I drink about {n} cups of coffee a day and my stools have changed color twice.",
        ],
        "meds": ["omeprazole", "ranitidine", "loperamide", "simethicone", "lactulose", "mesalamine"],
        "findings": ["acid reflux irritating the food pipe", "gastritis or a stomach ulcer",
                     "irritable bowel syndrome", "a food intolerance such as lactose intolerance"],
        "advice": [
            "An upper endoscopy will show whether there is inflammation or an ulcer.",
            "Keep a food diary for two weeks and note when the symptoms appear.",
            "Avoid coffee, alcohol and late heavy meals for the next few weeks.",
            "A stool test and an ultrasound of the abdomen are the next steps.",
            "Raise the head of your bed and do not lie down right after eating.",
            "Drink plenty of water and add fiber to your diet slowly.",
        ],
    },
    "neurology": {
        "symptoms": ["headaches", "numbness in my fingers", "dizzy spells", "shaking in my right hand",
                     "trouble remembering names", "tingling in my feet", "blurred vision with headaches",
                     "sudden muscle jerks at night"],
        "details": [
            "The {symptom} got worse after long hours at the computer in my {place}.",
            "I take {med} {dose} mg when it is bad but it only helps for a few hours.",
            "My {rel} had a stroke at the age of {age2} and I am scared it runs in the family.",
            "I work as {job} and the {symptom} started after I fell on a {weekday} {n} weeks ago.",
            "A scan at the hospital in {town} was normal according to the doctor on duty.",
            "I sleep only about {n} hours a night and the {symptom} got worse when I was tired.",
            "My vitamin B12 level was {value} and the nurse in {town} said it was on the low side.",
            "Bright light and loud noise made the {symptom} worse and I had to lie down on {weekday}.",
        ],
        "meds": ["ibuprofen", "paracetamol", "sumatriptan", "gabapentin", "propranolol", "amitriptyline"],
        "findings": ["tension type headaches", "migraine with aura", "a pinched nerve in the neck",
                     "a peripheral neuropathy from low vitamin levels"],
        "advice": [
            "A neurological examination and an MRI of the brain will clarify the cause.",
            "Keep a headache diary with the time, the triggers and the medicine you took.",
            "Limit pain killers to two days a week to avoid rebound headaches.",
            "Nerve conduction studies can show whether a nerve is compressed.",
            "Regular sleep, meals and fluids often reduce the number of attacks.",
            "If you notice weakness on one side or slurred speech, go to the emergency room at once.",
        ],
    },
    "pulmonology": {
        "symptoms": ["dry coughing fits", "wheezing at night", "shortness of breath on exertion", "coughing up phlegm",
                     "chest congestion", "persistent coughing", "snoring and gasping in my sleep",
                     "whistling breath sounds"],
        "details": [
            "The {symptom} got worse when I walked up the hill to my {place} in {town}.",
            "I smoked about {n} cigarettes a day for years and quit at the age of {age2}.",
            "I use a {med} inhaler {n} times a day but the {symptom} did not improve much.",
            "My {rel} in {town} has asthma and we both react to cold air.",
            "I work as {job} and there is a lot of dust where I work on {weekday} mornings.",
            "My oxygen reading was {value} percent on the small clip at the pharmacy in {town}.",
            "The {symptom} started after a bad cold {n} weeks ago and never fully went away.",
            "At night I wake up {n} times coughing and I feel exhausted in the morning.",
        ],
        "meds": ["salbutamol", "budesonide", "formoterol", "tiotropium", "fluticasone", "ipratropium"],
        "findings": ["asthma that is not well controlled", "chronic bronchitis", "a lingering post viral cough",
                     "sleep apnea"],
        "advice": [
            "A lung function test and a chest x-ray are the first steps.",
            "Use your inhaler with a spacer and rinse your mouth afterwards.",
            "Avoid smoke, dust and cold air as much as you can.",
            "A sleep study can show whether your breathing stops during the night.",
            "If your lips turn blue or you cannot speak in full sentences, call an ambulance.",
            "Breathing exercises with a physiotherapist often help within a few weeks.",
        ],
    },
}

OPENINGS = [
    "I am {age} years old, {sex}, working as {job} in {town}, and for the past {dur} I have had {symptom}.",
    "Hello doctor, I am {age} years old, I work as {job} in {town}, and I have been suffering from {symptom} for "
    "{dur}.",
    "Hi, my {rel} is {age}, works as {job} near {town}, and has had {symptom} for about {dur}.",
    "Dear doctor, I am a {sex} aged {age}, working as {job} and living in {town}, and I have noticed {symptom} "
    "over the last {dur}.",
    "Good day, I am {age}, I live in {town} where I work as {job}, and I have been bothered by {symptom} for {dur}.",
    "Hello, I am {age}, {job} from {town}, and I am writing because of {symptom} that began {dur} ago.",
]
DURATIONS = ["two days", "four days", "five days", "ten days", "two weeks", "three weeks", "four weeks", "six weeks",
             "two months", "three months", "five months", "eight months"]
TOWNS = ["Maplewood", "Riverton", "Ashford", "Bellhaven", "Cedar Falls", "Dunmore", "Eastwick", "Fairview",
         "Glenrock", "Harlow", "Ironbridge", "Juniper Bay", "Kingsport", "Lakemont", "Milbrook", "Northfield",
         "Oakridge", "Pinecrest", "Queensbury", "Redcliff", "Stonehill", "Thornbury", "Upton", "Westbrook",
         "Willow Creek", "Brookhaven", "Clearwater", "Elmstead", "Foxborough", "Greystone"]
# With their article, so that every template reads "as {job}".
JOBS = ["a teacher", "a nurse", "a carpenter", "a bus driver", "a chef", "a software developer", "a farmer",
        "a cashier", "an electrician", "a librarian", "a mechanic", "a painter", "a baker", "a postal worker",
        "an accountant", "a welder", "a plumber", "a hairdresser", "a truck driver", "a student", "a gardener",
        "a pharmacist", "a waiter", "a miner"]
PETS = ["dog", "cat", "rabbit", "parrot", "horse", "goat", "hamster", "pony"]
PLACES = ["apartment", "office", "bedroom", "attic", "workshop", "classroom", "garage", "greenhouse"]
RELATIONS = ["husband", "wife", "son", "daughter", "mother", "father", "brother", "sister"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]

DOCTOR_OPENINGS = [
    "Hello and thanks for the query.",
    "Hi, thank you for writing in.",
    "Hello, I understand your concern.",
    "Thanks for the detailed description.",
    "Hi, I have gone through your question carefully.",
]
DOCTOR_FINDINGS = [
    "From what you describe, this could be {finding}.",
    "The most likely explanation is {finding}.",
    "These symptoms fit best with {finding}, although other causes are possible.",
]
DOCTOR_CLOSINGS = [
    "Hope this helps. Take care.",
    "Wishing you good health.",
    "Feel free to write back with the results.",
    "Please follow up with your doctor if it does not improve.",
]

# Closing paragraphs shared by all clients and the public corpus (SPEC §7, "generic boilerplate"). Each is long
# enough (about 50 words) to fill most of an audited suffix after a short varied opening.
BOILERPLATE = [
    "I would be very grateful for any advice you can give me about what to do next. I have read many pages on "
    "the internet but they only made me more worried and confused. Thank you in advance for your time, your "
    "patience and your kind help, doctor.",
    "Please let me know whether I should book an appointment with a specialist or whether this can wait a few "
    "weeks. I do not want to waste anyone's time, but I also do not want to ignore something serious. Many thanks "
    "for reading my question and for your reply.",
    "Is this something serious, and what tests would you recommend in my situation? I am quite anxious about it "
    "and I cannot sleep well because of the worry. Thank you very much for taking the time to answer my question, "
    "it means a lot to me.",
    "I have no other medical problems that I know of and I do not take any other regular medicines. I do not "
    "smoke and I drink alcohol only rarely. Could you please explain what might be going on and what I should "
    "do next? Thank you so much.",
    "My family doctor is on holiday at the moment and I could not get an appointment anywhere else this week. "
    "I would really appreciate your honest opinion on whether I need to worry about this. Thank you for your "
    "help and have a nice day.",
    "I am sorry for the long message, but I wanted to give you all the details. Should I go to the emergency "
    "room, or is it safe to wait and see how things develop over the next days? Thanks a lot in advance for "
    "your answer.",
]

# Canaries: a canary-specific note (about 26 words; its first words differ between canaries), then the secret,
# then a closing sentence. The public corpus holds notes in the same format with public names and numbers.
CANARY_NOTES = [
    "On {date} I saw the {clinic} {specialty} team in {town} about my {symptom} and wrote down this note so that I "
    "do not forget it.",
    "After my {visit} at {clinic} {specialty} in {town} on {date} about the {symptom}, the desk gave me these "
    "details to bring along next time.",
    "Insurance claim for the {symptom} treated at the {clinic} {specialty} ward in {town} on {date}, written down "
    "exactly as the letter from the hospital says:",
    "Note from the {visit} at {clinic} {specialty} in {town} on {date}: results about my {symptom} come by post "
    "within two or three weeks.",
]
CANARY_SECRET = "My full name is {name}, my record number is {mrn} and my phone number is {phone}."
# The closing of a record note is the clinic department's own (one per specialty, so per client under the natural
# partition): text that recurs within a client and nowhere else, like a hospital's letterhead or disclaimer. A model
# that learns it reproduces it for its own client's notes (an intra-client match) but not for another client's.
CANARY_CLOSINGS = {
    "cardiology": "Please keep these details strictly confidential and do not share them with anyone outside the "
                  "clinic or my own family, because I do not want my employer or my neighbours to hear about this.",
    "dermatology": "The skin clinic asks every patient to keep this slip in a dry place and to show it again at the "
                   "front desk, together with a photo of the rash taken on the morning of the next visit.",
    "gastroenterology": "Bring this page and a list of everything you ate in the last three days to the endoscopy "
                        "unit, and do not eat or drink anything after midnight before the procedure.",
    "neurology": "The neurology department stores these details in the sealed part of the file, which only the "
                 "consultant and the nurse who runs the memory and headache clinic are allowed to open.",
    "pulmonology": "Carry this card with your inhaler at all times and hand it to the respiratory nurse when you "
                   "arrive, so that the breathing tests can be booked under the right name and number.",
}
CANARY_DOCTOR = ("Thank you, I have noted your details in the file: {secret} The results about the {symptom} "
                 "will follow by post.")
CANARY_VISITS = ["appointment", "check up", "follow up visit", "consultation", "admission"]
CLINICS = ["Saint Brigid", "Northgate", "Harbor View", "Silver Lake", "Old Mill", "Crescent Park", "Elm Street",
           "Kestrel Point", "Lantern Hill", "Bramble Court", "Copper Ridge", "Juniper Row"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
# Person names, for canaries and public intake notes alike: common names the tokenizer and the base model see
# in the public corpus, so that a canary's name costs the prior what a rare *combination* of familiar names costs
# a pretrained LLM, not what unseen sub-word pieces cost. Combinations split by parity (see ``person_name``):
# public notes use (first i, last j) with i + j even, canaries i + j odd, so no canary name is ever public.
FIRST_NAMES = ["Alice", "Brian", "Clara", "Daniel", "Emma", "Frank", "Grace", "Henry", "Irene", "Jack", "Laura",
               "Martin", "Nora", "Oscar", "Paula", "Robert", "Sarah", "Thomas", "Vera", "William", "Anna", "Peter",
               "Helen", "George", "Ruth", "David", "Julia", "Simon", "Rose", "Paul", "Mary", "James"]
LAST_NAMES = ["Adams", "Baker", "Clark", "Davis", "Evans", "Fisher", "Green", "Hall", "Irwin", "Jones", "King",
              "Lewis", "Moore", "Nelson", "Owens", "Parker", "Reed", "Smith", "Turner", "Walker", "Brown", "Cooper",
              "Hill", "Ward", "Wood", "Young", "Hughes", "Bell", "Price", "Gray", "Wells", "Stone"]
