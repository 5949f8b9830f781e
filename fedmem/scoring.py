"""Teacher-forced log-probabilities log P(s | p) for many (prefix, suffix) pairs, in batches.

One forward pass per batch over the concatenation p + s (right-padded, padding masked); the suffix tokens'
log-probabilities are gathered from the log-softmax and summed in log space. Pairs are sorted by length so
batches carry little padding. Shared by every method that needs log-probabilities.
"""

from __future__ import annotations

import numpy as np
import torch


def _pad_id(model) -> int:
    pid = getattr(model.config, "pad_token_id", None)
    return 0 if pid is None else int(pid)


@torch.inference_mode()
def token_logprobs(model, pairs, batch_size: int = 32) -> list[np.ndarray]:
    """Per-token log P(s_t | p, s_<t) for each pair; result[i] has len(s_i) entries.

    The prefix must be non-empty: the first suffix token is predicted from the last prefix token.
    """
    device = next(model.parameters()).device
    pad = _pad_id(model)
    order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
    out: list[np.ndarray | None] = [None] * len(pairs)
    was_training = model.training
    model.eval()
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        seqs = [list(pairs[i][0]) + list(pairs[i][1]) for i in idx]
        if any(len(pairs[i][0]) == 0 for i in idx):
            raise ValueError("log P(s|p) needs a non-empty prefix p")
        width = max(len(s) for s in seqs)
        ids = torch.full((len(idx), width), pad, dtype=torch.long)
        att = torch.zeros((len(idx), width), dtype=torch.long)
        for row, s in enumerate(seqs):
            ids[row, : len(s)] = torch.tensor(s, dtype=torch.long)
            att[row, : len(s)] = 1
        logits = model(input_ids=ids.to(device), attention_mask=att.to(device)).logits.float()
        logp = torch.log_softmax(logits[:, :-1], dim=-1)
        tok = logp.gather(-1, ids[:, 1:].to(device).unsqueeze(-1)).squeeze(-1).cpu().numpy()
        for row, i in enumerate(idx):
            lp, ls = len(pairs[i][0]), len(pairs[i][1])
            out[i] = tok[row, lp - 1 : lp - 1 + ls].astype(np.float64)
    if was_training:
        model.train()
    return out  # type: ignore[return-value]


def sequence_logprobs(model, pairs, batch_size: int = 32) -> np.ndarray:
    """log P(s | p) = sum_t log P(s_t | p, s_<t) for each (p, s) pair."""
    return np.array([lp.sum() for lp in token_logprobs(model, pairs, batch_size)], dtype=np.float64)
