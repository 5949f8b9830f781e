"""The paper's chat templates (Table 6 / SPEC §2), rendering a record, and the tokenizer's chat template.

A record's text is rendered once, here: every field is flattened to one line with single spaces (hub data is
full of line breaks and double spaces), so the memorization text appears *verbatim* inside the user turn and
a prefix cut from it can be substituted back into the user turn (the audits do exactly that).
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any

from fedmem.data.records import Record


@dataclass(frozen=True)
class Template:
    user: str  # str.format string over the task's fields
    assistant: str
    mem_field: str  # which field is the memorization text (prefix + suffix source)


# SPEC §2, character for character.
TEMPLATES: dict[str, Template] = {
    "summarization": Template(
        "Please summarize the following abstract into a title. {abstract}", "{title}", "abstract"
    ),
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
    # Not one of the paper's tasks: running text with no instruction, the whole text memorized (format plain).
    "text": Template("{text}", "", "text"),
}


def template_fields(*templates: str) -> list[str]:
    """The ``{field}`` names used by format strings, in order of first use."""
    out: list[str] = []
    for t in templates:
        for _, name, _, _ in string.Formatter().parse(t):
            if name is not None and name not in out:
                out.append(name)
    return out


def one_line(value: Any) -> str:
    """Lists joined by spaces, every whitespace run collapsed to one space, stripped."""
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        value = " ".join(one_line(v) for v in value)
    return " ".join(str(value).split())


def render_record(
    user_template: str,
    assistant_template: str,
    mem_field: str,
    fields: dict[str, Any],
    rid: str,
    client: int | None = None,
    label: str | None = None,
    tags: dict[str, Any] | None = None,
) -> Record:
    """A :class:`Record` from raw field values (flattened to one line first)."""
    values = {k: one_line(v) for k, v in fields.items()}
    return Record(
        id=rid,
        user=user_template.format(**values),
        assistant=assistant_template.format(**values),
        mem_text=values[mem_field],
        client=client,
        label=label,
        tags=dict(tags or {}),
    )


def _messages(user: str, assistant: str | None = None) -> list[dict[str, str]]:
    msgs = [{"role": "user", "content": user}]
    if assistant is not None:
        msgs.append({"role": "assistant", "content": assistant})
    return msgs


def has_chat_template(tokenizer) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def format_prompt(tokenizer, user: str, plain: bool = False) -> str:
    """The conversation up to the generation prompt.

    ``plain`` (task format plain): the user text itself, so the model continues it. With a chat template: ``tokenizer.apply_chat_template([user], add_generation_prompt=True)``. Without one (a
    base model's tokenizer): the plain fallback ``"User: {user}\\nAssistant:"``.
    """
    if plain:
        return user
    if has_chat_template(tokenizer):
        return tokenizer.apply_chat_template(_messages(user), tokenize=False, add_generation_prompt=True)
    return f"User: {user}\nAssistant:"


def format_example(tokenizer, user: str, assistant: str, plain: bool = False) -> str:
    """The whole conversation as trained on; it starts with ``format_prompt(tokenizer, user, plain)``.

    ``plain``: the user text (and the assistant text on a new line, if any) followed by the EOS token.
    With a chat template: the template over the user and assistant turns (it closes the assistant turn with its
    end-of-turn token). Without one: ``"User: {user}\\nAssistant: {assistant}"`` followed by the EOS token, so
    the model learns where an answer ends.
    """
    eos = getattr(tokenizer, "eos_token", None) or ""
    if plain:
        return (f"{user}\n{assistant}" if assistant else user) + eos
    if has_chat_template(tokenizer):
        return tokenizer.apply_chat_template(_messages(user, assistant), tokenize=False)
    return f"User: {user}\nAssistant: {assistant}{eos}"


def continuation_header(tokenizer) -> str:
    """The chat template over one user message, up to where the message's text starts, the turn left open.

    This is the context in which the audits continue a prefix (SPEC §3): the template's header (a default system
    turn, if the template has one, then the user header), then the raw prefix, with no instruction, no end of turn
    and no assistant header, so the model continues the user's text. Rendered by
    ``apply_chat_template(..., continue_final_message=True)``; empty for a tokenizer without a chat template (the
    bare prefix)."""
    if not has_chat_template(tokenizer):
        return ""
    marker = "FEDMEMPREFIXMARKER"  # one word: no template trims or escapes it
    text = tokenizer.apply_chat_template(_messages(marker), tokenize=False, continue_final_message=True)
    if not text.endswith(marker):
        raise ValueError("the tokenizer's chat template does not end with the open user message it was given")
    return text[: -len(marker)]
