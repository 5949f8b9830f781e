"""Teacher-forced log-probabilities log P(s | p) for many (prefix, suffix) pairs, in batches.

Two entry points, both in log space throughout (log-softmax, sums of logs; never a product of probabilities):

- :func:`sequence_logprobs` / :func:`token_logprobs` score a list of (p, s) pairs. One forward pass per batch
  over the concatenation p + s, right-padded, padding masked; the suffix tokens' log-probabilities are gathered
  and summed. Pairs are sorted by length so batches carry little padding. Shared by every method that needs
  log-probabilities (PA's P(s|p), the perplexity membership comparison, utility loss).

- :func:`prior_logprobs` scores *every* combination of c prefixes q_i and S suffixes s_j (Prior-Aware's
  P̂(s) = mean_i P(s | q_i)). Scheme — **prefix KV-cache reuse**:

  1. Prefixes are deduplicated and grouped by length (the audit's prefixes all have ``prefix_len`` tokens, so
     there is normally one group and no prefix padding at all; grouping by exact length is what lets us avoid
     left padding, whose fully-masked rows would otherwise need special care).
  2. For a block of P prefixes, ONE forward pass over the prefixes (``use_cache=True``, ``logits_to_keep=1``)
     yields their past key/values and the distribution of the first suffix token.
  3. For a block of S suffixes (sorted by length, right-padded), a copy of that prefix cache is expanded
     prefix-major over the suffixes with ``Cache.batch_repeat_interleave(S)`` (a fresh copy per suffix block:
     the forward pass appends the suffix's keys/values to the cache it is given), and one forward pass runs
     over the P x S suffix rows only, with ``position_ids`` continuing after the prefix and an attention mask
     of ones over the cached prefix followed by the suffix's padding mask. Only ``s[:-1]`` is fed: the
     prefix's last logits already predict ``s[0]``.
  P x S is at most ``batch_size`` rows. Each prefix is encoded once per block of suffixes' worth of rows
  instead of once per pair, and the work per pair is the suffix tokens alone.

  Right padding of suffixes is safe: padded positions come after every real token of their row, so causal
  attention never lets a real token see them, and their own outputs are discarded by the mask.

The prefix must be non-empty everywhere: the first suffix token is predicted from the last prefix token.
An empty suffix has log-probability 0.
"""

from __future__ import annotations

import copy

import numpy as np
import torch


def _pad_id(model) -> int:
    pid = getattr(model.config, "pad_token_id", None)
    return 0 if pid is None else int(pid)


def _device(model) -> torch.device:
    return next(model.parameters()).device


_HEAD_ROWS = 128  # positions per log-softmax chunk: a chunk of logits stays in cache (2 MB at 4k vocab)


def _target_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log softmax(logits)[..., target] computed over row chunks.

    Chunking keeps each log-softmax in cache and never materialises a second vocabulary-sized tensor for the
    whole batch (about 2x faster than gather - logsumexp over the full batch on CPU).
    """
    shape = targets.shape
    flat, tgt = logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
    out = torch.empty(tgt.shape, dtype=torch.float32, device=logits.device)
    for i in range(0, flat.shape[0], _HEAD_ROWS):
        chunk = torch.log_softmax(flat[i : i + _HEAD_ROWS].float(), dim=-1)
        out[i : i + _HEAD_ROWS] = chunk.gather(-1, tgt[i : i + _HEAD_ROWS, None]).squeeze(-1)
    return out.view(shape)


class _eval_mode:
    """Run in eval mode (no dropout), restoring the caller's mode afterwards."""

    def __init__(self, model):
        self.model, self.was_training = model, model.training

    def __enter__(self):
        self.model.eval()

    def __exit__(self, *exc):
        if self.was_training:
            self.model.train()


@torch.inference_mode()
def token_logprobs(model, pairs, batch_size: int = 32) -> list[np.ndarray]:
    """Per-token log P(s_t | p, s_<t) for each pair; result[i] has len(s_i) entries."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if any(len(p) == 0 for p, _ in pairs):
        raise ValueError("log P(s|p) needs a non-empty prefix p")
    device = _device(model)
    pad = _pad_id(model)
    order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
    out: list[np.ndarray | None] = [None] * len(pairs)
    with _eval_mode(model):
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            seqs = [list(pairs[i][0]) + list(pairs[i][1]) for i in idx]
            width = max(len(s) for s in seqs)
            ids = torch.full((len(idx), width), pad, dtype=torch.long)
            att = torch.zeros((len(idx), width), dtype=torch.long)
            for row, s in enumerate(seqs):
                ids[row, : len(s)] = torch.tensor(s, dtype=torch.long)
                att[row, : len(s)] = 1
            if width < 2:  # only empty suffixes in this batch
                tok = np.zeros((len(idx), 0))
            else:
                ids, att = ids.to(device), att.to(device)
                logits = model(input_ids=ids, attention_mask=att).logits
                tok = _target_logprobs(logits[:, :-1], ids[:, 1:]).cpu().numpy()
            for row, i in enumerate(idx):
                lp, ls = len(pairs[i][0]), len(pairs[i][1])
                out[i] = tok[row, lp - 1 : lp - 1 + ls].astype(np.float64)
    return out  # type: ignore[return-value]


def sequence_logprobs(model, pairs, batch_size: int = 32) -> np.ndarray:
    """log P(s | p) = sum_t log P(s_t | p, s_<t) for each (p, s) pair."""
    return np.array([lp.sum() for lp in token_logprobs(model, pairs, batch_size)], dtype=np.float64)


def _blocks(n: int, size: int):
    for start in range(0, n, size):
        yield range(start, min(start + size, n))


@torch.inference_mode()
def prior_logprobs(model, prefixes, suffixes, batch_size: int = 32) -> np.ndarray:
    """log P(s_j | q_i) for every prefix q_i and suffix s_j: an array of shape [len(prefixes), len(suffixes)].

    Equal to ``sequence_logprobs`` on every (q_i, s_j) combination, computed with prefix KV-cache reuse (see the
    module docstring). ``batch_size`` bounds the rows (prefix x suffix combinations) of one forward pass.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    prefixes = [tuple(int(t) for t in q) for q in prefixes]
    suffixes = [tuple(int(t) for t in s) for s in suffixes]
    if any(len(q) == 0 for q in prefixes):
        raise ValueError("log P(s|q) needs non-empty prefixes q")
    result = np.zeros((len(prefixes), len(suffixes)), dtype=np.float64)
    if not prefixes or not suffixes:
        return result

    # Deduplicate: prefixes sampled with replacement repeat, and the same suffix may be audited twice.
    uniq_q = list(dict.fromkeys(prefixes))
    uniq_s = [s for s in dict.fromkeys(suffixes) if len(s) > 0]  # empty suffixes keep log P = 0
    if not uniq_s:
        return result
    q_pos = {q: i for i, q in enumerate(uniq_q)}
    s_pos = {s: j for j, s in enumerate(uniq_s)}
    table = np.zeros((len(uniq_q), len(uniq_s)), dtype=np.float64)

    device = _device(model)
    pad = _pad_id(model)
    s_order = sorted(range(len(uniq_s)), key=lambda j: len(uniq_s[j]))  # similar lengths share a block
    s_block = min(len(uniq_s), batch_size)
    q_block = max(1, batch_size // s_block)
    by_len: dict[int, list[int]] = {}
    for i, q in enumerate(uniq_q):
        by_len.setdefault(len(q), []).append(i)

    with _eval_mode(model):
        for q_len, group in sorted(by_len.items()):
            for qb in _blocks(len(group), q_block):
                q_idx = [group[k] for k in qb]
                q_ids = torch.tensor([uniq_q[i] for i in q_idx], dtype=torch.long, device=device)
                out = model(input_ids=q_ids, use_cache=True, logits_to_keep=1)
                first = torch.log_softmax(out.logits[:, -1].float(), dim=-1)  # [P, V]: predicts s[0]
                prefix_cache = out.past_key_values
                n_q = len(q_idx)
                for sb in _blocks(len(s_order), s_block):
                    s_idx = [s_order[k] for k in sb]
                    n_s = len(s_idx)
                    lens = torch.tensor([len(uniq_s[j]) for j in s_idx])
                    width = int(lens.max())
                    s_ids = torch.full((n_s, width), pad, dtype=torch.long)
                    for row, j in enumerate(s_idx):
                        s_ids[row, : len(uniq_s[j])] = torch.tensor(uniq_s[j], dtype=torch.long)
                    s_ids = s_ids.to(device)
                    # log P(s[0] | q) from the prefix pass, for every (prefix, suffix) of the block
                    lp = first[:, s_ids[:, 0]]  # [P, S]
                    if width > 1:
                        feed = width - 1  # s[:-1]: position t predicts s[t + 1]
                        s_mask = (torch.arange(width).unsqueeze(0) < lens.unsqueeze(1)).long().to(device)
                        cache = copy.deepcopy(prefix_cache)
                        cache.batch_repeat_interleave(n_s)  # row r = prefix r // n_s, suffix r % n_s
                        ids = s_ids[:, :feed].repeat(n_q, 1)
                        att = torch.cat(
                            [torch.ones((n_q * n_s, q_len), dtype=torch.long, device=device),
                             s_mask[:, :feed].repeat(n_q, 1)],
                            dim=1,
                        )
                        pos = torch.arange(q_len, q_len + feed, device=device).unsqueeze(0).expand(n_q * n_s, -1)
                        logits = model(
                            input_ids=ids, attention_mask=att, position_ids=pos, past_key_values=cache, use_cache=True
                        ).logits
                        tok = _target_logprobs(logits, s_ids[:, 1:].repeat(n_q, 1))  # [P*S, width-1]
                        tok = torch.where(s_mask[:, 1:].repeat(n_q, 1).bool(), tok, 0.0)  # padding: log 1 = 0
                        lp = lp + tok.sum(-1).view(n_q, n_s)
                    table[np.ix_(q_idx, s_idx)] = lp.double().cpu().numpy()

    cols = [s_pos.get(s) for s in suffixes]
    for i, q in enumerate(prefixes):
        row = table[q_pos[q]]
        result[i] = [0.0 if j is None else row[j] for j in cols]
    return result
