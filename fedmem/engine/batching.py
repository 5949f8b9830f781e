"""Padding token sequences into one batch: the single helper behind training, scoring and generation.

Training and scoring pad on the right (every sequence starts at position 0, so a token's logits sit at its own
index); generation pads on the left, so that every prompt's last token sits at the right edge where ``generate``
appends. The attention mask marks the real tokens either way.
"""

from __future__ import annotations

import torch


def pad_batch(seqs, pad_id: int, left: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(input ids, attention mask), both ``[len(seqs), longest]`` long tensors, padded with ``pad_id``."""
    width = max((len(s) for s in seqs), default=0)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(seqs), width), dtype=torch.long)
    for row, s in enumerate(seqs):
        span = slice(width - len(s), width) if left else slice(0, len(s))
        ids[row, span] = torch.tensor(list(s), dtype=torch.long)
        attention[row, span] = 1
    return ids, attention


def language_model_batch(seqs, pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(input ids, labels, attention mask) for next-token training on whole sequences, right-padded; padding is
    labelled -100, which the loss ignores."""
    ids, attention = pad_batch(seqs, pad_id)
    return ids, ids.masked_fill(attention == 0, -100), attention
