"""Rebuild a chat prompt with a perturbed prefix, without knowing the task's template code.

An audited sample carries its prompt ids ending with the prefix (its training context, template and instruction
included, or MR's prompt: the chat template's header with the prefix in the open user turn) and the prefix's text.
PEARL must feed the model the *same* prompt with only the prefix text perturbed. The template is another module's
business, so the prompt is split where the prefix sits:

1. decode the prompt (special tokens kept) and find the prefix text in it (its last occurrence: a system turn may
   come first);
2. keep, as token ids, the longest run of leading tokens whose decoding ends before the prefix starts
   (``head_ids``) and the longest run of trailing tokens whose decoding starts after it ends (``tail_ids``):
   the template's special tokens and role markers are therefore reused exactly, never re-tokenized;
3. the text between them (a little template text, the prefix, a little template text) is re-encoded with the
   perturbed prefix in place.

``roundtrip_exact`` tells whether re-encoding the unperturbed middle gives back the original ids (true for
byte-level BPE tokenizers in practice); intensity 0 always uses the original ``prompt_ids`` regardless.
"""

from __future__ import annotations

from dataclasses import dataclass


def _decode(tokenizer, ids) -> str:
    return tokenizer.decode(list(ids), skip_special_tokens=False)


@dataclass(frozen=True)
class PromptSplice:
    prompt_ids: tuple[int, ...]
    prefix_text: str
    head_ids: tuple[int, ...]
    before: str  # template text between head_ids and the prefix
    after: str  # template text between the prefix and tail_ids
    tail_ids: tuple[int, ...]
    roundtrip_exact: bool

    def build(self, tokenizer, prefix_text: str) -> tuple[int, ...]:
        """The prompt ids with ``prefix_text`` in place of the original prefix."""
        middle = tokenizer(self.before + prefix_text + self.after, add_special_tokens=False)["input_ids"]
        return self.head_ids + tuple(middle) + self.tail_ids


def splice_prompt(tokenizer, prompt_ids: tuple[int, ...], prefix_text: str, sample_id: str = "?") -> PromptSplice:
    """Locate ``prefix_text`` in the decoded prompt and split the prompt around it (see the module doc)."""
    ids = tuple(int(i) for i in prompt_ids)
    full = _decode(tokenizer, ids)
    start = full.rfind(prefix_text) if prefix_text else -1
    if start < 0:
        raise ValueError(
            f"PEARL: sample {sample_id}: its prefix text does not occur in its decoded prompt, so the prefix "
            "cannot be perturbed in place (the prompt must hold the prefix text verbatim)"
        )
    end = start + len(prefix_text)
    a, head_len = 0, 0  # leading tokens whose decoding is a prefix of full[:start]
    for i in range(1, len(ids) + 1):
        dec = _decode(tokenizer, ids[:i])
        if len(dec) > start:
            break
        if full.startswith(dec):
            a, head_len = i, len(dec)
    b, tail_len = len(ids), 0  # trailing tokens whose decoding is a suffix of full[end:]
    for i in range(len(ids) - 1, a - 1, -1):
        dec = _decode(tokenizer, ids[i:])
        if len(dec) > len(full) - end:
            break
        if full.endswith(dec):
            b, tail_len = i, len(dec)
    before = full[head_len:start]
    after = full[end : len(full) - tail_len]
    splice = PromptSplice(ids, prefix_text, ids[:a], before, after, ids[b:], False)
    exact = splice.build(tokenizer, prefix_text) == ids
    return PromptSplice(ids, prefix_text, ids[:a], before, after, ids[b:], exact)
