"""Audit samples in the context the model was trained in (SPEC §6): the training sequence up to the prefix's end.

Training renders a record with ``fedmem.data.templates.format_example`` (the chat template over the task's
instruction and memorization text and the answer, or plain text) and tokenizes the whole rendering
(``fedmem.engine.train.tokenize_examples``). The prefix the model saw is therefore the first ``prefix_len`` tokens of the
memorization text *as tokenized inside that sequence*, after the template and the instruction, and the suffix is the
memorization text's tokens that followed them there. They can differ from the memorization text tokenized alone (a
token may hold the space before the text), so they are cut from the trained ids themselves: the rendering is
tokenized with character offsets (a fast tokenizer's offset mapping), the memorization text's tokens are those whose
characters overlap it, and the context is a literal slice of the trained ids, so that decoding it gives the trained
text up to that point.

A :class:`TrainingFrame` is the rendered training text around one record's memorization text. Any other text put in
its place is that text in the same training context: the rendering of the same record with that text as its
memorization text (the templates insert the user's text verbatim; ``fedmem.data.templates`` flattens it first).
Prior-Aware puts its generic calibration sentences there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from fedmem.common.fields import option
from fedmem.data.templates import format_example

# Where a method scores a suffix: "train", in the training sequence up to the prefix's end (SPEC §6); "prompt", in
# MR's prompt (the prefix alone in the open user turn, SPEC §3), which the model never saw in training.
ScoringContext = Literal["train", "prompt"]


def context_option(what: str):
    """The ``context`` setting of a method that scores suffixes (one help text for all of them): ``what`` is scored
    in the training context (the default) or in MR's prompt."""
    return option("train", f"{what}: train (the training sequence up to the prefix's end, task template and "
                           "instruction included: the text as trained) or prompt (MR's prompt: the prefix alone in "
                           "the open user turn, never seen in training)")


@dataclass(frozen=True)
class TrainingForm:
    """A text's prefix and suffix as trained: literal slices of the trained ids."""

    context_ids: tuple[int, ...]  # the trained ids up to and including the prefix's last token
    suffix_ids: tuple[int, ...]  # the trained ids of the rest of the text (or the next ``suffix_len`` of them)
    prefix_text: str  # the text's characters that the prefix's tokens cover


def has_offsets(tokenizer) -> bool:
    """Whether the tokenizer reports character offsets (a fast tokenizer), which locating a text in the trained ids
    needs."""
    return bool(getattr(tokenizer, "is_fast", False))


@dataclass(frozen=True)
class TrainingFrame:
    """The rendered training text before and after one record's memorization text."""

    before: str  # the template's header and the task's instruction, as training renders them
    after: str  # the rest of the user turn, the assistant turn and the closing tokens

    @classmethod
    def of(cls, tokenizer, record, plain: bool = False) -> TrainingFrame | None:
        """The frame of ``record`` (a ``fedmem.data.Record``) as training renders it, or None when the rendering does
        not hold its memorization text verbatim (a chat template that rewrites the user's text). The user text is
        found in the rendering (its first occurrence: the user turn comes before the answer), and the memorization
        text at its last occurrence in the user text (every task template puts it last)."""
        text = format_example(tokenizer, record.user, record.assistant, plain)
        user_at, mem_at = text.find(record.user), record.user.rfind(record.mem_text)
        if user_at < 0 or mem_at < 0 or not record.mem_text:
            return None
        start = user_at + mem_at
        return cls(text[:start], text[start + len(record.mem_text):])

    def tokens(self, tokenizer, text: str) -> tuple[list[int], list[tuple[int, int]], int, int]:
        """(the trained ids of the frame around ``text``, their character offsets in the rendering, the index of the
        text's first token, the index past its last): the text's tokens are those whose characters overlap it, so a
        token holding the space before the text, or the text's end and what follows, counts as the text's."""
        if not has_offsets(tokenizer):
            raise ValueError("the tokenizer reports no character offsets (not a fast tokenizer), so the memorization "
                             "text cannot be located in the trained ids")
        # the call of fedmem.engine.train.tokenize_examples, with the offsets
        enc = tokenizer(self.before + text + self.after, add_special_tokens=False, return_offsets_mapping=True)
        offsets = [tuple(o) for o in enc["offset_mapping"]]
        start, end = len(self.before), len(self.before) + len(text)
        inside = [i for i, (a, b) in enumerate(offsets) if a < end and b > start]
        if not inside:
            raise ValueError(f"no token of the text {text[:40]!r} was found in its training rendering")
        return list(enc["input_ids"]), offsets, inside[0], inside[-1] + 1

    def form(self, tokenizer, text: str, prefix_len: int, suffix_len: int | None = None) -> TrainingForm:
        """``text`` in this frame: the trained ids up to its first ``prefix_len`` tokens, and its following tokens
        (all, or the next ``suffix_len``)."""
        ids, offsets, first, stop = self.tokens(tokenizer, text)
        cut = min(first + prefix_len, stop)
        end = stop if suffix_len is None else min(stop, cut + suffix_len)
        covered = min(offsets[cut - 1][1] - len(self.before), len(text))
        return TrainingForm(tuple(ids[:cut]), tuple(ids[cut:end]), text[:covered])


def check_training_forms(samples, key: str) -> None:
    """Every sample a method scores in the training context must carry its training form: a clear error naming the
    method's ``context`` key otherwise."""
    missing = [s.id for s in samples if not s.train_context_ids]
    if missing:
        raise ValueError(f"{key}=train scores each sample in the sequence it was trained in, but {len(missing)} "
                         f"audited sample(s) (first: {missing[0]}) have no training form (not built from a record, a "
                         "tokenizer without character offsets, or a chat template that rewrites the user's text): "
                         f"set {key}=prompt")
