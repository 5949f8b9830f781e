"""Per-task presets: the Table-6 template, the public Hugging Face dataset, its columns, and the paper's clients.

These are the defaults a :class:`~fedmem.data.config.TaskConfig` fills in for every field left ``None``;
``conf/task/<name>.yaml`` names the task and lists nothing else, so the values live here once
(``tests/test_config.py`` composes every task's YAML and checks that it resolves to its preset).

Datasets (public ids on the Hugging Face Hub; fedmem never downloads at test time, and any of them can be
replaced by local files in the same schema with ``data.path``):

- summarization: ``gfissore/arxiv-abstracts-2021`` (arXiv metadata: ``abstract``, ``title``, ``categories``),
  clients astrophysics / condensed matter / mathematics by the paper's sub-categories (App. B.1).
- dialog: ``lavita/ChatDoctor-HealthCareMagic-100k`` (``instruction``, ``input`` = patient, ``output`` = doctor).
  The paper groups HealthCareMagic by its site topics (App. B.2), which the dataset does not carry; fedmem
  approximates each topic group by keywords of its topics found in the patient's text (see DIALOG_GROUPS).
- qa: ``qiaojin/PubMedQA`` config ``pqa_artificial`` (211k rows; ``question``, ``context.contexts``,
  ``long_answer``, MeSH terms in ``context.meshes``), clients by the paper's MeSH rules (App. B.3).
- text (not one of the paper's tasks): plain running text from local files or any hub dataset with a ``text``
  column; no instruction, the whole text is the memorization text; clients from a column the user names.
- classification: ``armanc/pubmed-rct20k`` (PubMed RCT sentences: ``text``, ``label``; 176k train sentences,
  enough for the paper's 3 x 30k), clients by Dirichlet(alpha = 5.0) over the label (App. B.4).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fedmem.common import registry
from fedmem.data.templates import TEMPLATES, Template, template_fields

RCT_LABELS = ["BACKGROUND", "OBJECTIVE", "METHODS", "RESULTS", "CONCLUSIONS"]

# arXiv sub-categories of the paper's three areas (App. B.1); a paper is in an area if any of its categories is.
ARXIV_GROUPS: dict[str, dict[str, list[str]]] = {
    "astrophysics": {"any": ["astro-ph.HE", "astro-ph.IM", "astro-ph.EP", "astro-ph.GA"]},
    "condensed_matter": {
        "any": ["cond-mat.supr-con", "cond-mat.soft", "cond-mat.dis-nn", "cond-mat.quant-gas", "cond-mat.other"]
    },
    "mathematics": {"any": ["math.KT", "math.ST", "math.DG", "math-ph", "math.MP"]},
}

# PubMedQA MeSH groups, exactly the paper's rules (App. B.3).
PUBMEDQA_GROUPS: dict[str, dict[str, list[str]]] = {
    "animals": {"all": ["Animals"], "none": ["Humans"]},
    "humans_middle_aged": {"all": ["Humans", "Middle Aged"], "none": ["Animals"]},
    "humans_not_middle_aged": {"all": ["Humans"], "none": ["Animals", "Middle Aged"]},
}

# HealthCareMagic topic groups (App. B.2), each approximated by keywords of its topics. A patient text goes to
# the group with the most distinct keyword hits; texts with no hit or a tie are left out.
DIALOG_GROUPS: dict[str, dict[str, list[str]]] = {
    # Child Health, Lung and Chest, Mental Health, Cancer, Birth Control, Bones/Muscles/Joints,
    # Natural and Home Remedies, Accident and Emergency
    "group1": {
        "any": [
            "child", "baby", "infant", "toddler", "my son", "my daughter", "lung", "lungs", "chest", "cough",
            "breathing", "pneumonia", "anxiety", "depression", "depressed", "panic", "stress", "mental", "cancer",
            "tumor", "tumour", "chemotherapy", "birth control", "contraceptive", "contraception", "condom",
            "bone", "bones", "muscle", "muscles", "joint", "joints", "fracture", "knee", "shoulder", "arthritis",
            "home remedy", "home remedies", "natural remedy", "accident", "injury", "injured", "emergency",
        ]
    },
    # Brain and Spine, Infections, Abdominal Pain, Liver and Gall Bladder, Kidney Conditions, Infertility,
    # Asthma and Allergy, Diabetes, Lupus
    "group2": {
        "any": [
            "brain", "spine", "spinal", "headache", "migraine", "seizure", "stroke", "nerve", "numbness",
            "infection", "infected", "fever", "virus", "viral", "bacterial", "abdominal", "abdomen", "stomach",
            "liver", "gallbladder", "gall bladder", "hepatitis", "jaundice", "kidney", "kidneys", "creatinine",
            "infertility", "conceive", "ovulation", "sperm count", "asthma", "allergy", "allergic", "wheezing",
            "diabetes", "diabetic", "insulin", "blood sugar", "glucose", "lupus",
        ]
    },
    # Men's Health, Hypertension and Heart Disease, Dental Health, Lump, Pregnancy, Pain Management,
    # Medicines and Side Effects, Alternative Medicine
    "group3": {
        "any": [
            "penis", "testicle", "testicles", "erectile", "erection", "prostate", "ejaculation",
            "blood pressure", "hypertension", "heart", "cardiac", "palpitations", "tooth", "teeth", "dental",
            "gum", "gums", "dentist", "lump", "lumps", "nodule", "cyst", "pregnant", "pregnancy", "trimester",
            "painkiller", "painkillers", "pain killer", "side effect", "side effects", "homeopathy",
            "homeopathic", "ayurveda", "ayurvedic", "alternative medicine",
        ]
    },
}

PRESETS: dict[str, dict[str, Any]] = {
    "summarization": {
        "format": "chat",
        "hf_dataset": "gfissore/arxiv-abstracts-2021",
        "hf_config": None,
        "hf_split": "train",
        "columns": {"abstract": "abstract", "title": "title"},
        "client_column": "categories",
        "client_groups": ARXIV_GROUPS,
        "group_by": "tags",
        "tag_separator": " ",  # "astro-ph.GA hep-th" holds two categories
        "label_column": None,
        "labels": [],
        "partition": "natural",
        "metric": "rouge",
        "pearl_metric": "rouge_l",  # summary-style output (SPEC §5)
    },
    "dialog": {
        "format": "chat",
        "hf_dataset": "lavita/ChatDoctor-HealthCareMagic-100k",
        "hf_config": None,
        "hf_split": "train",
        "columns": {"patient": "input", "doctor": "output"},
        "client_column": "input",
        "client_groups": DIALOG_GROUPS,
        "group_by": "keywords",
        "tag_separator": "",
        "label_column": None,
        "labels": [],
        "partition": "natural",
        "metric": "rouge",
        "pearl_metric": "ncd",
    },
    "qa": {
        "format": "chat",
        "hf_dataset": "qiaojin/PubMedQA",
        "hf_config": "pqa_artificial",
        "hf_split": "train",
        "columns": {"question": "question", "context": "context.contexts", "answer": "long_answer"},
        "client_column": "context.meshes",
        "client_groups": PUBMEDQA_GROUPS,
        "group_by": "tags",
        "tag_separator": "",
        "label_column": None,
        "labels": [],
        "partition": "natural",
        "metric": "rouge",
        "pearl_metric": "ncd",
    },
    "classification": {
        "format": "chat",
        "hf_dataset": "armanc/pubmed-rct20k",
        "hf_config": None,
        "hf_split": "train",
        "columns": {"passage": "text", "label": "label"},
        "client_column": None,
        "client_groups": {},
        "group_by": "tags",
        "tag_separator": "",
        "label_column": "label",
        "labels": RCT_LABELS,
        "partition": "dirichlet",
        "metric": "accuracy",
        "pearl_metric": "ncd",
    },
    "text": {
        "format": "plain",
        "hf_dataset": None,
        "hf_config": None,
        "hf_split": "train",
        "columns": {"text": "text"},
        "client_column": None,  # the data's own sections: data.client_column (or task.partition=iid)
        "client_groups": {},
        "group_by": "tags",
        "tag_separator": "",
        "label_column": None,
        "labels": [],
        "partition": "natural",
        "metric": "rouge",
        "pearl_metric": "ncd",
    },
}

assert set(PRESETS) == set(TEMPLATES)


@dataclass(frozen=True)
class Task:
    """A task a run can name (``task.name``): its template and the defaults of every ``TaskConfig`` field it leaves
    unset (``preset``; a field it does not name gets the generic default of :func:`task_defaults`)."""

    name: str
    template: Template
    preset: dict[str, Any] = field(default_factory=dict)


TASKS: dict[str, Task] = {}


def task_defaults(template: Template) -> dict[str, Any]:
    """What a task that names nothing else gets: chat format, a column per template field of the same name, one
    client per value of a column the user names (or iid), ROUGE-L utility, no hub dataset."""
    return {"format": "chat", "hf_dataset": None, "hf_config": None, "hf_split": "train",
            "columns": {f: f for f in template_fields(template.user, template.assistant)}, "client_column": None,
            "client_groups": {}, "group_by": "tags", "tag_separator": "", "label_column": None, "labels": [],
            "partition": "natural", "metric": "rouge", "pearl_metric": "ncd"}


def register_task(task: Task) -> Task:
    """Make ``task`` known by name; a module of one's own listed in ``plugins`` registers its task at import."""
    unknown = sorted(set(task.preset) - set(task_defaults(task.template)))
    if unknown:
        raise ValueError(f"task {task.name!r}: its preset sets {unknown}, which are not task settings")
    return registry.add(TASKS, task.name, task, "task")


def task_named(name: str) -> Task:
    return registry.named(TASKS, name, "task.name", "task")


for _name, _template in TEMPLATES.items():
    register_task(Task(_name, _template, PRESETS[_name]))
