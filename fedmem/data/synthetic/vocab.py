"""Word lists of the synthetic clinical-dialog source: per-specialty vocabulary, shared fillers, the doctor's
phrases, boilerplate closings, and the canary format.

Each specialty has its own symptoms, body sites, triggers, medicines, tests, readings, family conditions, worries,
findings and advice, so that a client's texts resemble each other in topic more than another client's. The lists
are long and the sentence grammar (:mod:`story`) combines many small draws, so that two patients rarely tell a
sentence alike. Names and phone numbers exist in two disjoint pools: ``CANARY_*`` only ever appears in canaries,
public names and numbers only in the public corpus (which therefore teaches the *format* of an intake note
without ever containing a secret).
"""

from __future__ import annotations

SPECIALTIES: dict[str, dict[str, list[str]]] = {
    "cardiology": {
        # the complaint of the opening: "I have had {symptom}"
        "symptoms": ["chest pain", "palpitations", "shortness of breath", "racing heartbeats", "swollen ankles",
                     "dizziness when standing", "tightness in my chest", "irregular heartbeats",
                     "a pounding heart at night", "pressure behind my breastbone", "fainting spells",
                     "a skipping heartbeat", "breathlessness when lying flat", "cold sweats with chest discomfort",
                     "a heavy feeling in my chest", "fluttering in my chest"],
        "associated": ["sweating", "nausea", "a dry cough at night", "tired legs", "cold fingers",
                       "light headedness", "an ache in my jaw", "numbness in my left arm", "a sense of dread",
                       "blurred vision for a moment", "ringing in my ears", "puffy eyelids", "swollen feet",
                       "a pale face", "bluish lips"],
        "sites": ["behind my breastbone", "on the left side of my chest", "under my left collarbone",
                  "in the middle of my chest", "between my shoulder blades", "around my heart", "in my upper back",
                  "at the base of my throat", "under my ribs on the left", "deep inside my chest"],
        "qualities": ["pressing", "squeezing", "fluttering", "heavy", "burning", "tight", "crushing", "thumping",
                      "aching", "sharp", "dull", "jumpy"],
        "spreads": ["spreads into my left arm", "moves up into my jaw", "radiates to my back", "stays in one spot",
                    "creeps up my neck", "shoots into my shoulder", "fades into my stomach"],
        "triggers": ["climbing stairs", "carrying shopping bags", "cold wind", "a heavy dinner", "stress at work",
                     "strong coffee", "running for the bus", "an argument", "lying on my left side", "bending over",
                     "a hot shower", "a night of little sleep", "salty food", "walking uphill"],
        "reliefs": ["sitting still", "resting on the sofa", "breathing slowly", "extra pillows",
                    "a glass of cold water", "stopping for a rest", "loosening my collar", "lying on my back",
                    "fresh air", "sitting upright"],
        "meds": ["aspirin {dose} mg", "atenolol {dose} mg", "lisinopril {dose} mg", "amlodipine {dose} mg",
                 "atorvastatin {dose} mg", "metoprolol {dose} mg", "ramipril {dose} mg", "bisoprolol {dose} mg",
                 "furosemide {dose} mg", "losartan {dose} mg", "digoxin tablets", "a nitroglycerin spray"],
        "tests": ["an ECG", "a treadmill stress test", "a heart ultrasound", "a Holter recording",
                  "a cholesterol check", "a chest x-ray", "a cardiac CT scan", "a blood pressure diary"],
        "readings": ["my blood pressure was {bp}", "my resting pulse was {pulse}", "my cholesterol was {chol}",
                     "my pulse reached {pulse_high} on a treadmill", "my LDL value was {ldl}",
                     "the monitor counted {beats} extra beats in a day"],
        "conditions": ["a heart attack", "atrial fibrillation", "high blood pressure", "a stroke", "heart failure",
                       "a leaking valve", "angina", "high cholesterol", "a bypass operation", "an enlarged heart",
                       "a blood clot in the lung", "a pacemaker fitted"],
        "worries": ["my heart is failing", "I could collapse at work", "the pills are too weak",
                    "I inherited a weak heart", "this is more than stress", "I should stop driving",
                    "an artery is blocked", "I need a stent", "a valve is leaking", "my pacemaker days are near",
                    "my heart skips dangerously", "I had a silent attack"],
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
                     "small blisters on my hands", "acne on my back", "hives after meals", "peeling skin on my feet",
                     "a crusty spot on my nose", "dark patches on my cheeks", "cracked skin on my knuckles",
                     "an itchy scalp with flakes", "a ring shaped rash on my leg", "brittle yellow toenails",
                     "painful bumps in my armpits", "sunburn that never fades"],
        "associated": ["oozing at night", "bleeding when I scratch", "hair loss in patches", "swollen eyelids",
                       "a burning feeling in the sun", "tiny white flakes on my clothes", "sore lips",
                       "thickened nails", "a stinging feeling after washing", "red streaks", "dark scars",
                       "itching between my fingers", "a mild fever", "cracks at the corners of my mouth"],
        "sites": ["on the backs of my hands", "along my hairline", "behind my knees", "on my forearms",
                  "around my ankles", "across my shoulders", "on my neck", "between my toes", "under my watch strap",
                  "on my eyelids"],
        "qualities": ["itchy", "raw", "stinging", "tender", "rough", "prickly", "sore", "tingling", "hot", "tight",
                      "bumpy", "burning"],
        "spreads": ["spreads to my wrists", "creeps up my arms", "jumps to new spots every week", "stays in one patch",
                    "moves down to my ankles", "appears on both sides at once", "leaves a dark mark behind"],
        "triggers": ["hot water", "a wool jumper", "the new washing powder", "sweating at the gym", "strong sunshine",
                     "bleach", "shaving", "my cat", "cheap jewellery", "wearing latex gloves", "chlorine in the pool",
                     "spicy food", "a stressful week", "perfumed lotion"],
        "reliefs": ["a cool compress", "an oatmeal bath", "plain petroleum jelly", "loose cotton clothing",
                    "an antihistamine", "staying out of the sun", "a fragrance free cream", "cold air",
                    "keeping my nails short", "aloe vera gel"],
        "meds": ["hydrocortisone cream", "clotrimazole cream", "calamine lotion", "tacrolimus ointment",
                 "benzoyl peroxide gel", "mometasone cream", "cetirizine {dose} mg", "terbinafine {dose} mg",
                 "doxycycline {dose} mg", "isotretinoin {dose} mg", "fexofenadine {dose} mg", "betamethasone ointment"],
        "tests": ["a skin scraping", "a patch test", "a mole check with a dermatoscope", "a small biopsy",
                  "an allergy blood test", "a fungal culture", "a photo review by a skin nurse",
                  "a swab of the blisters"],
        "readings": ["the largest spot measured {mm} millimetres", "my allergy score was {ige}",
                     "the rash covered {pct} percent of my back", "the mole measured {mm} millimetres",
                     "my vitamin D level was {vitd}", "my skin swab grew {spots} colonies"],
        "conditions": ["eczema", "psoriasis", "skin cancer", "a nickel allergy", "rosacea", "vitiligo", "severe acne",
                       "shingles", "hay fever with hives", "a melanoma removed", "a fungal nail infection",
                       "chronic hives"],
        "worries": ["it is contagious", "the mole is cancer", "it will leave scars", "my children will catch it",
                    "I am allergic to work", "the cream thins my skin", "it will reach my face", "it never goes away",
                    "it is a fungus", "my liver is involved", "it is scabies", "it means psoriasis"],
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
                     "pain below my ribs", "constipation", "acid in my throat at night", "a gnawing ache under my ribs",
                     "blood in my stool", "trouble swallowing bread", "sudden urges to run to the toilet",
                     "a sour taste every morning", "a swollen belly by evening", "pale greasy stools",
                     "burping all day long"],
        "associated": ["a bitter taste", "wind", "loss of appetite", "weight loss", "dark urine", "hiccups",
                       "a feeling of fullness after a few bites", "mucus in my stool", "a hoarse voice",
                       "vomiting", "itchy skin", "yellowish eyes", "rumbling noises", "a coated tongue"],
        "sites": ["just under my ribs on the right", "around my belly button", "in my lower belly",
                  "high up behind my breastbone", "on the left side of my belly", "deep in my stomach",
                  "across my whole belly", "near my right hip", "at the top of my stomach", "in my lower back"],
        "qualities": ["gnawing", "cramping", "burning", "bloated", "knotted", "stabbing", "dull", "sour", "twisting",
                      "heavy", "griping", "hollow"],
        "spreads": ["moves around to my back", "climbs up into my chest", "settles low in my belly",
                    "travels to my right shoulder", "stays in one place", "shifts from side to side",
                    "comes in waves before the toilet"],
        "triggers": ["spicy curry", "fried fish", "milk in my tea", "red wine", "fresh bread", "raw onion",
                     "a late dinner", "black coffee", "a fizzy drink", "skipping breakfast", "a stressful meeting",
                     "cheese on toast", "orange juice", "lying down after eating"],
        "reliefs": ["a hot water bottle", "peppermint tea", "eating small portions", "a short walk after meals",
                    "sleeping propped up", "plain rice", "a ginger biscuit", "an antacid tablet",
                    "lying on my left side", "skipping dinner"],
        "meds": ["omeprazole {dose} mg", "ranitidine {dose} mg", "loperamide {dose} mg", "simethicone drops",
                 "lactulose syrup", "mesalamine {dose} mg", "lansoprazole {dose} mg", "domperidone {dose} mg",
                 "mebeverine {dose} mg", "ondansetron {dose} mg", "pantoprazole {dose} mg", "senna tablets"],
        "tests": ["an upper endoscopy", "a stool test", "an ultrasound of my belly", "a breath test",
                  "a colonoscopy", "a liver blood test", "a gluten blood test", "a CT scan of my abdomen"],
        "readings": ["my liver value was {liver}", "my weight was down {kg} kilograms", "my iron level was {iron}",
                     "the stool sample scored {calpro}", "my weight was {weight} kilograms",
                     "my amylase was {amylase}"],
        "conditions": ["gallstones", "a stomach ulcer", "bowel cancer", "coeliac disease", "Crohn's disease",
                       "ulcerative colitis", "a hiatus hernia", "fatty liver", "an inflamed pancreas",
                       "lactose intolerance", "reflux", "polyps in the colon"],
        "worries": ["I have an ulcer", "it is bowel cancer", "my liver is damaged", "bread is poisoning me",
                    "the pills hide something", "I need an operation", "it is my gallbladder",
                    "the weight loss is bad news", "my pancreas is failing", "it is coeliac disease",
                    "I swallowed something", "it is a hernia"],
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
                     "sudden muscle jerks at night", "a drooping eyelid", "weakness in my left leg",
                     "a buzzing feeling in my head", "slurred words when I am tired", "flashing lights before my eyes",
                     "a stiff neck with pounding headaches", "clumsy hands", "pins and needles in my arms"],
        "associated": ["sensitivity to light", "ringing in my ears", "nausea", "word finding trouble",
                       "double vision", "a heavy arm", "a twitching eyelid", "poor balance", "restless legs",
                       "foggy thinking", "a metallic taste", "cold feet", "neck stiffness", "trouble concentrating"],
        "sites": ["behind my right eye", "at the back of my head", "in both temples", "along my left arm",
                  "in the tips of my fingers", "across my forehead", "in the soles of my feet", "down my spine",
                  "around my left ear", "in my lower legs"],
        "qualities": ["throbbing", "pounding", "electric", "numb", "pulsing", "stabbing", "buzzing", "dull", "heavy",
                      "pins and needles like", "shooting", "pressing"],
        "spreads": ["shoots down my arm", "spreads over my scalp", "moves from one side to the other",
                    "stays behind one eye", "travels down to my toes", "wraps around my head like a band",
                    "climbs up from my neck"],
        "triggers": ["a bright screen", "loud music", "skipping meals", "red wine", "lack of sleep", "strong perfume",
                     "a long drive", "hot weather", "stress at home", "cheese", "flickering light",
                     "looking down at my phone", "turning my head quickly", "standing up too fast"],
        "reliefs": ["a dark quiet room", "a cold flannel", "a short nap", "stretching my neck", "strong tea",
                    "a warm bath", "fresh air", "closing my eyes", "a head massage", "drinking plenty of water"],
        "meds": ["ibuprofen {dose} mg", "paracetamol {dose} mg", "sumatriptan {dose} mg", "gabapentin {dose} mg",
                 "propranolol {dose} mg", "amitriptyline {dose} mg", "topiramate {dose} mg", "pregabalin {dose} mg",
                 "naproxen {dose} mg", "rizatriptan {dose} mg", "carbamazepine {dose} mg", "levetiracetam {dose} mg"],
        "tests": ["a brain MRI", "a nerve conduction study", "an EEG", "a CT scan of my head", "an eye test",
                  "a vitamin blood panel", "a neck x-ray", "a memory questionnaire"],
        "readings": ["my vitamin B12 level was {b12}", "my memory test score was {memory}",
                     "my sleep tracker showed {sleep} hours a night", "my headache diary listed {attacks} attacks",
                     "my blood sugar was {sugar}", "the nerve speed was {ncv} metres per second"],
        "conditions": ["migraines", "a stroke", "epilepsy", "Parkinson's disease", "multiple sclerosis", "dementia",
                       "a brain tumour", "trigeminal neuralgia", "cluster headaches", "a slipped disc in the neck",
                       "carpal tunnel syndrome", "Bell's palsy"],
        "worries": ["I have a brain tumour", "it is an early stroke", "I am losing my memory", "the tablets cause it",
                    "it is multiple sclerosis", "I will lose my licence", "a nerve is trapped", "it runs in my blood",
                    "it is epilepsy", "my spine is damaged", "it is Parkinson's", "a vessel might burst"],
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
                     "whistling breath sounds", "a tight chest in cold air", "coughing up specks of blood",
                     "a cough that wakes me", "breathlessness on the stairs", "a rattling chest",
                     "a hoarse cough after meals", "noisy breathing", "a tickle in my throat that never stops"],
        "associated": ["night sweats", "a sore throat", "a runny nose", "tiredness all day", "a hoarse voice",
                       "morning headaches", "a crackling sound when I breathe", "green phlegm", "chest soreness",
                       "a blocked nose", "pale fingertips", "dry mouth on waking", "a bitter taste of phlegm",
                       "swollen glands in my neck"],
        "sites": ["deep in my chest", "at the top of my lungs", "in my throat", "under my breastbone",
                  "on the right side of my chest", "in my lower ribs", "behind my windpipe", "across my upper back",
                  "in both lungs", "at the back of my nose"],
        "qualities": ["raw", "wheezy", "rattling", "tight", "scratchy", "heavy", "burning", "barking", "hacking",
                      "crackly", "sore", "gurgling"],
        "spreads": ["settles in my throat", "moves down into my chest", "spreads across my back", "stays on one side",
                    "comes up from deep down", "climbs into my ears", "sits behind my breastbone"],
        "triggers": ["cold air", "dust in the garage", "cigarette smoke", "cut grass", "a damp room", "paint",
                     "climbing a hill", "laughing hard", "my neighbour's bonfire", "pollen", "perfume",
                     "air conditioning", "chopping onions", "the cat's fur"],
        "reliefs": ["steam from a hot shower", "sitting upright", "honey and lemon", "a humidifier",
                    "breathing through my nose", "my inhaler", "a warm drink", "sleeping on extra pillows", "sea air",
                    "a throat lozenge"],
        "meds": ["a salbutamol inhaler", "a budesonide inhaler", "formoterol", "tiotropium", "a fluticasone spray",
                 "ipratropium", "montelukast {dose} mg", "prednisolone {dose} mg", "a beclometasone inhaler",
                 "carbocisteine {dose} mg", "azithromycin {dose} mg", "amoxicillin {dose} mg"],
        "tests": ["a lung function test", "a chest x-ray", "a sleep study", "a CT scan of my chest", "a sputum sample",
                  "a peak flow diary", "an allergy skin test", "a walking oxygen test"],
        "readings": ["my oxygen reading was {oxygen} percent", "my peak flow was {peak}",
                     "my walking test reached {metres} metres", "the sleep study counted {pauses} pauses an hour",
                     "my breathing rate was {resp} a minute", "my inhaler counter showed {puffs} puffs in a day"],
        "conditions": ["asthma", "chronic bronchitis", "tuberculosis", "lung cancer", "sleep apnea", "emphysema",
                       "pneumonia", "cystic fibrosis", "a collapsed lung", "hay fever", "lung scarring",
                       "whooping cough"],
        "worries": ["my lungs are damaged", "it is lung cancer", "I caught tuberculosis", "I will need oxygen",
                    "the mould did it", "my asthma is back", "dust at work harms me", "I stop breathing at night",
                    "it is pneumonia", "my lung collapsed", "it is emphysema", "the cough is whooping cough"],
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

# Shared fillers: any patient's life, whatever the specialty.
TOWNS = ["Maplewood", "Riverton", "Ashford", "Bellhaven", "Cedar Falls", "Dunmore", "Eastwick", "Fairview",
         "Glenrock", "Harlow", "Ironbridge", "Juniper Bay", "Kingsport", "Lakemont", "Milbrook", "Northfield",
         "Oakridge", "Pinecrest", "Queensbury", "Redcliff", "Stonehill", "Thornbury", "Upton", "Westbrook",
         "Willow Creek", "Brookhaven", "Clearwater", "Elmstead", "Foxborough", "Greystone", "Hollybrook", "Ivydale",
         "Kestrel Cove", "Larkspur", "Moorfield", "Netherby", "Orchard Hill", "Pebble Beach", "Rosedale", "Saltmarsh",
         "Tamworth", "Valleyview", "Whitby Green", "Yarrow", "Ambleside", "Birchwood", "Coldwater", "Dovecote",
         "Emberton", "Fernhill", "Goldcrest", "Highmoor", "Kelso Park", "Lindenfield", "Marsh End", "Newhaven",
         "Oldcastle", "Primrose Vale", "Ravenscar", "Silverdale"]
# With their article, so that every template reads "as {job}".
JOBS = ["a teacher", "a nurse", "a carpenter", "a bus driver", "a chef", "a software developer", "a farmer",
        "a cashier", "an electrician", "a librarian", "a mechanic", "a painter", "a baker", "a postal worker",
        "an accountant", "a welder", "a plumber", "a hairdresser", "a truck driver", "a student", "a gardener",
        "a pharmacist", "a waiter", "a miner", "a roofer", "a dentist", "a security guard", "a florist",
        "a call centre agent", "a warehouse picker", "a social worker", "a taxi driver", "a butcher", "a tailor",
        "a lab technician", "a firefighter", "a police officer", "a cleaner", "a fisherman", "a bricklayer",
        "a translator", "a journalist", "a nanny", "a shop manager", "a forklift driver", "a dairy farmer",
        "a lawyer", "an architect", "a gym instructor", "a care assistant", "a sales representative", "a potter",
        "a joiner", "a veterinary nurse", "a printer", "a glazier", "a museum guide", "a railway guard",
        "a beekeeper", "a night porter"]
RELATIONS = ["husband", "wife", "son", "daughter", "mother", "father", "brother", "sister", "aunt", "uncle",
             "grandmother", "grandfather", "cousin", "twin brother", "older sister", "stepfather"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
PLACES = ["the supermarket", "my office", "the gym", "church", "the bus stop", "my allotment", "the library",
          "a wedding party", "my sister's house", "the post office", "the swimming pool", "the train station",
          "the football ground", "a garden centre", "the bakery", "our village hall", "the school gate",
          "a petrol station", "the farmers market", "the dentist", "the cinema", "my daughter's flat",
          "the hardware store", "the town square", "the car wash", "a friend's barbecue", "the launderette",
          "the harbour", "the ski slope", "the bowling alley"]
# Gerund phrases: "while {activity}", "soon after {activity}".
ACTIVITIES = ["climbing the stairs", "carrying shopping bags", "mowing the lawn", "cycling to work", "playing tennis",
              "walking the dog", "painting the fence", "shovelling snow", "hanging out the washing",
              "lifting a heavy box", "dancing at a party", "swimming laps", "chopping firewood", "vacuuming the house",
              "jogging in the park", "pushing a wheelbarrow", "cleaning the windows", "driving home",
              "watching television", "cooking dinner", "reading in bed", "queuing at the bank", "repairing my bike",
              "planting potatoes", "playing with my grandchildren", "unloading the van", "ironing shirts",
              "sweeping the yard", "washing the car", "singing in the choir", "stacking shelves", "hiking uphill",
              "typing a report", "fishing by the river", "moving furniture", "picking apples", "feeding the chickens",
              "decorating the nursery", "kneading dough", "pruning roses"]
EVENTS = ["a long flight", "my daughter's wedding", "a family holiday", "our house move", "my final exams",
          "a run of night shifts", "a bad flu", "Easter", "Christmas", "a charity run", "our anniversary dinner",
          "a funeral", "a job interview", "a camping trip", "the harvest", "a business trip", "a birthday party",
          "a long drive", "the school holidays", "a football tournament", "a dental operation", "a heat wave",
          "my retirement party", "a skiing trip"]
HOBBIES = ["my evening walks", "football with my son", "gardening", "choir practice", "swimming", "ballroom dancing",
           "fishing", "knitting", "my yoga class", "cycling with friends", "baking for the church", "hiking",
           "playing the piano", "volunteering", "bowling", "woodwork", "tennis",
           "babysitting", "painting landscapes", "bird watching", "rowing", "darts at the pub",
           "my pottery course", "camping"]
# "{adviser} suggested ..."
ADVISERS = ["a pharmacist in {town}", "my neighbour, a retired nurse,", "a colleague", "the walk-in clinic",
            "my {rel}", "a locum doctor", "our family doctor", "a nurse on the phone line",
            "a friend who had the same problem", "the school nurse", "a herbalist at the market", "my physiotherapist"]
CLINIC_PLACES = ["the local clinic", "a private lab", "the hospital", "a health centre", "the pharmacy",
                 "a mobile screening van", "my workplace", "the university hospital", "a sports clinic",
                 "the emergency department", "a travel clinic", "the community hospital"]
DAYPARTS = ["in the early morning", "after lunch", "late at night", "around midnight", "at dawn", "in the afternoon",
            "before breakfast", "after dinner", "at weekends", "towards the end of my shift", "on cold days",
            "on hot days", "during long meetings", "on Sunday evenings"]
NUMBER_WORDS = ["two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"]

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
