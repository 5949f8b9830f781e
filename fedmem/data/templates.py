"""The paper's chat templates (Table 6 / SPEC §2) and their rendering through a tokenizer's chat template."""

from __future__ import annotations

from dataclasses import dataclass

from fedmem.data.records import Record


@dataclass(frozen=True)
class Template:
    user: str  # format string over the task's fields
    assistant: str
    mem_field: str  # which field is the memorization text


TEMPLATES = {
    "summarization": Template("Please summarize the following abstract into a title. {abstract}", "{title}", "abstract"),
    "dialog": Template(
        "If you are a doctor, please answer the medical questions based on the patient's description. {patient}",
        "{doctor}",
        "patient",
    ),
    "qa": Template("{question} {context}", "{answer}", "context"),
    "classification": Template(
        "Please classify the following passage into one of the following categories: BACKGROUND, OBJECTIVE, "
        "METHODS, RESULTS, or CONCLUSIONS. {passage}",
        "{label}",
        "passage",
    ),
}


def render(task: str, fields: dict[str, str], rid: str, client: int | None = None, label: str | None = None,
           tags: dict | None = None) -> Record:
    t = TEMPLATES[task]
    fields = {k: " ".join(str(v).split()) for k, v in fields.items()}  # one line, single spaces
    return Record(
        id=rid,
        user=t.user.format(**fields),
        assistant=t.assistant.format(**fields),
        mem_text=fields[t.mem_field],
        client=client,
        label=label,
        tags=dict(tags or {}),
    )


def _messages(user: str, assistant: str | None = None) -> list[dict]:
    msgs = [{"role": "user", "content": user}]
    if assistant is not None:
        msgs.append({"role": "assistant", "content": assistant})
    return msgs


def format_prompt(tokenizer, user: str) -> str:
    """The user turn up to the generation prompt: the tokenizer's chat template if it has one, else
    ``"User: {user}\\nAssistant:"`` (a documented plain fallback for base models without a template)."""
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(_messages(user), tokenize=False, add_generation_prompt=True)
    return f"User: {user}\nAssistant:"


def format_example(tokenizer, user: str, assistant: str) -> str:
    """The whole conversation as trained on (ends with the end-of-turn / end-of-sequence token)."""
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(_messages(user, assistant), tokenize=False)
    return f"User: {user}\nAssistant: {assistant}{tokenizer.eos_token or ''}"
