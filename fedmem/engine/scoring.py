"""Teacher-forced log-probabilities log P(s | p) for many (prefix, suffix) pairs, in batches.

Two entry points, both in log space throughout (log-softmax, sums of logs; never a product of probabilities):

- :func:`sequence_logprobs` / :func:`token_logprobs` score a list of (p, s) pairs. One forward pass per batch
  over the concatenation p + s, right-padded, padding masked; the suffix tokens' log-probabilities are gathered
  and summed. Pairs are sorted by length so batches carry little padding. Shared by every method that needs
  log-probabilities (PA's P(s|p), the perplexity membership comparison, utility loss).
  :func:`token_stats` runs the same batches and, from the same logits, also keeps per suffix token the mean and
  standard deviation of log p(z) under the next-token distribution itself (what Min-K%++ normalises by).

- :func:`prior_logprobs` scores *every* combination of c prefixes q_i and S suffixes s_j (Prior-Aware's
  P̂(s) = mean_i P(s | q_i)). Scheme — **prefix KV-cache reuse over blocks of suffixes**:

  1. Prefixes and suffixes are deduplicated (prefixes drawn with replacement repeat). Suffixes are sorted by
     length and cut into blocks of at most ``batch_size`` suffixes whose padded area stays within 1.25x their
     real tokens (:func:`suffix_blocks`), so a few long suffixes (the generic calibration set) do not pad
     every row. Prefixes are grouped by exact length (the audit's prefixes all have ``prefix_len`` tokens),
     which avoids left padding and its fully-masked rows.
  2. For a block of S suffixes, prefixes go in chunks of P = batch_size // S. ONE forward pass over the P
     prefixes (``use_cache=True``, ``logits_to_keep=1``) yields their past key/values and the distribution of
     the first suffix token. The cache is expanded prefix-major over the block with
     ``Cache.batch_repeat_interleave(S)`` (row r = prefix r // S, suffix r % S) and ONE forward pass runs over
     the P x S suffix rows only: ``position_ids`` continue after the prefix, the attention mask is ones over the
     cached prefix followed by the suffix's padding mask. Only ``s[:-1]`` is fed: the prefix's last logits
     already predict ``s[0]``.
  A prefix is thus encoded once per block of up to ``batch_size`` suffixes (once in all when the suffixes fit
  in one block), never once per pair, and the work per pair is its suffix tokens alone.

  Limits: every scored token still needs one full token-forward (including the vocabulary-wide lm_head that
  the log-softmax normaliser requires), so the engine's only savings over one forward per pair are the prefix
  tokens (a factor (|q| + |s|) / |s|: large for short suffixes, small for long ones) and batching efficiency
  (bigger matrix products run closer to the sgemm peak than a naive loop's). The speed-up over one forward per
  pair is therefore bounded by that token factor divided by the naive loop's fraction of the sgemm peak, and is
  smallest for long suffixes. Comparisons need a quiet machine: under contention a multi-threaded naive loop of
  small ops degrades far more than the engine, which inflates the ratio.

  Right padding of suffixes is safe: padded positions come after every real token of their row, so causal
  attention never lets a real token see them, and their own outputs are discarded by the mask.

The prefix must be non-empty everywhere: the first suffix token is predicted from the last prefix token.
An empty suffix has log-probability 0.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from fedmem.engine.batching import pad_batch


def _pad_id(model) -> int:
    pid = getattr(model.config, "pad_token_id", None)
    return 0 if pid is None else int(pid)


def _device(model) -> torch.device:
    return next(model.parameters()).device


_HEAD_ROWS = 128  # positions per log-softmax chunk: a chunk of logits stays in cache (2 MB at 4k vocab)


def _target_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log softmax(logits)[..., target] computed over row chunks.

    Chunking keeps each log-softmax in cache and never materialises a second vocabulary-sized tensor for the
    whole batch (faster on CPU than gather - logsumexp over the full batch).
    """
    shape = targets.shape
    flat, tgt = logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
    out = torch.empty(tgt.shape, dtype=torch.float32, device=logits.device)
    for i in range(0, flat.shape[0], _HEAD_ROWS):
        chunk = torch.log_softmax(flat[i : i + _HEAD_ROWS].float(), dim=-1)
        out[i : i + _HEAD_ROWS] = chunk.gather(-1, tgt[i : i + _HEAD_ROWS, None]).squeeze(-1)
    return out.view(shape)


def _target_stats(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Per position [log p(target), mu, sigma] (last axis), p = softmax(logits): mu = sum_z p(z) log p(z) and
    sigma^2 = sum_z p(z) (log p(z) - mu)^2, the mean and variance of log p(z) for z drawn from p itself (Min-K%++'s
    normalisers). Over row chunks, like :func:`_target_logprobs`; the variance is taken about mu rather than as
    E[(log p)^2] - mu^2, which cancels catastrophically when p is nearly a point mass."""
    flat, tgt = logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
    out = torch.empty((tgt.shape[0], 3), dtype=torch.float32, device=logits.device)
    for i in range(0, flat.shape[0], _HEAD_ROWS):
        # clamped: a token masked to -inf would make 0 * -inf = nan in the sums below
        lp = torch.log_softmax(flat[i : i + _HEAD_ROWS].float(), dim=-1).clamp_min(torch.finfo(torch.float32).min)
        p = lp.exp()
        mu = (p * lp).sum(-1)
        out[i : i + _HEAD_ROWS, 0] = lp.gather(-1, tgt[i : i + _HEAD_ROWS, None]).squeeze(-1)
        out[i : i + _HEAD_ROWS, 1] = mu
        out[i : i + _HEAD_ROWS, 2] = (p * (lp - mu[:, None]).square()).sum(-1).sqrt()
    return out.view(*targets.shape, 3)


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
def _per_token(model, pairs, batch_size: int, progress: Callable[[int], object] | None, head: Callable,
               features: tuple[int, ...]) -> list[np.ndarray]:
    """``head(logits[:, :-1], ids[:, 1:])`` at each pair's suffix positions: result[i] has shape
    (len(s_i), *features). One forward pass per batch over p + s, right-padded, pairs sorted by length."""
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
            ids, att = pad_batch([list(pairs[i][0]) + list(pairs[i][1]) for i in idx], pad)
            width = ids.shape[1]
            if width < 2:  # only empty suffixes in this batch
                tok = np.zeros((len(idx), 0, *features))
            else:
                ids, att = ids.to(device), att.to(device)
                logits = model(input_ids=ids, attention_mask=att).logits
                tok = head(logits[:, :-1], ids[:, 1:]).cpu().numpy()
            for row, i in enumerate(idx):
                lp, ls = len(pairs[i][0]), len(pairs[i][1])
                out[i] = tok[row, lp - 1 : lp - 1 + ls].astype(np.float64)
            if progress is not None:
                progress(len(idx))
    return out  # type: ignore[return-value]


def token_logprobs(model, pairs, batch_size: int = 32, progress: Callable[[int], object] | None = None
                   ) -> list[np.ndarray]:
    """Per-token log P(s_t | p, s_<t) for each pair; result[i] has len(s_i) entries. ``progress(k)``: called after
    each batch with its number of pairs."""
    return _per_token(model, pairs, batch_size, progress, _target_logprobs, ())


@dataclass(frozen=True)
class TokenStats:
    """One pair's suffix, per token t: log p(s_t) and the mean ``mu`` and standard deviation ``sigma`` of log p(z)
    for z drawn from the model's own next-token distribution p(. | p, s_<t) over the whole vocabulary."""

    logp: np.ndarray
    mu: np.ndarray
    sigma: np.ndarray


def token_stats(model, pairs, batch_size: int = 32, progress: Callable[[int], object] | None = None
                ) -> list[TokenStats]:
    """:func:`token_logprobs` with Min-K%++'s per-token normalisers, from the same logits of the same one forward
    pass per batch (``logp`` equals ``token_logprobs``)."""
    rows = _per_token(model, pairs, batch_size, progress, _target_stats, (3,))
    return [TokenStats(r[:, 0], r[:, 1], r[:, 2]) for r in rows]


def sequence_logprobs(model, pairs, batch_size: int = 32, progress: Callable[[int], object] | None = None
                      ) -> np.ndarray:
    """log P(s | p) = sum_t log P(s_t | p, s_<t) for each (p, s) pair."""
    return np.array([lp.sum() for lp in token_logprobs(model, pairs, batch_size, progress)], dtype=np.float64)


PAD_SLACK = 1.25  # a suffix block's padded area may exceed its real tokens by at most this factor


def suffix_blocks(lengths: list[int], max_rows: int, slack: float = PAD_SLACK) -> list[list[int]]:
    """Indices grouped into blocks of at most ``max_rows`` suffixes of similar length.

    Sorted by length; a block is closed when it is full or when adding the next (longer) suffix would make
    the padded area (rows x longest) exceed ``slack`` x the block's real tokens.
    """
    order = sorted(range(len(lengths)), key=lambda j: lengths[j])
    blocks: list[list[int]] = []
    cur: list[int] = []
    real = 0
    for j in order:
        n = lengths[j]
        if cur and (len(cur) >= max_rows or (len(cur) + 1) * n > slack * (real + n)):
            blocks.append(cur)
            cur, real = [], 0
        cur.append(j)
        real += n
    if cur:
        blocks.append(cur)
    return blocks


def prior_inputs(prefixes, suffixes) -> tuple[list[tuple], list[tuple]]:
    """(distinct prefixes, distinct non-empty suffixes) in first-seen order: the rows and columns that
    :func:`prior_logprobs` computes. Prefixes sampled with replacement repeat, the same suffix may be audited
    twice, and an empty suffix keeps log P = 0."""
    prefixes = [tuple(q) for q in prefixes]
    return list(dict.fromkeys(prefixes)), [s for s in dict.fromkeys(tuple(s) for s in suffixes) if s]


@torch.inference_mode()
def prior_logprobs(model, prefixes, suffixes, batch_size: int = 32,
                   progress: Callable[[int], object] | None = None) -> np.ndarray:
    """log P(s_j | q_i) for every prefix q_i and suffix s_j: an array of shape [len(prefixes), len(suffixes)].

    Equal to ``sequence_logprobs`` on every (q_i, s_j) combination, computed with prefix KV-cache reuse (see the
    module docstring). ``batch_size`` bounds the rows (prefix x suffix combinations) of one forward pass.
    ``progress(k)``: called after each pass with its number of distinct (prefix, non-empty suffix) combinations.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    prefixes = [tuple(int(t) for t in q) for q in prefixes]
    suffixes = [tuple(int(t) for t in s) for s in suffixes]
    if any(len(q) == 0 for q in prefixes):
        raise ValueError("log P(s|q) needs non-empty prefixes q")
    result = np.zeros((len(prefixes), len(suffixes)), dtype=np.float64)
    uniq_q, uniq_s = prior_inputs(prefixes, suffixes)
    if not uniq_q or not uniq_s:
        return result
    q_pos = {q: i for i, q in enumerate(uniq_q)}
    s_pos = {s: j for j, s in enumerate(uniq_s)}
    table = _prior_table(model, uniq_q, uniq_s, batch_size, progress)

    cols = [s_pos.get(s) for s in suffixes]
    for i, q in enumerate(prefixes):
        row = table[q_pos[q]]
        result[i] = [0.0 if j is None else row[j] for j in cols]
    return result


def _prior_table(model, uniq_q: list[tuple], uniq_s: list[tuple], batch_size: int,
                 progress: Callable[[int], object] | None) -> np.ndarray:
    """log P(s | q) for every distinct prefix (rows) and distinct non-empty suffix (columns)."""
    table = np.zeros((len(uniq_q), len(uniq_s)), dtype=np.float64)
    device = _device(model)
    pad = _pad_id(model)
    by_len: dict[int, list[int]] = {}
    for i, q in enumerate(uniq_q):
        by_len.setdefault(len(q), []).append(i)

    with _eval_mode(model):
        for s_idx in suffix_blocks([len(s) for s in uniq_s], batch_size):
            n_s = len(s_idx)
            s_ids, s_mask = pad_batch([uniq_s[j] for j in s_idx], pad)
            s_ids, s_mask = s_ids.to(device), s_mask.bool().to(device)
            q_block = max(1, batch_size // n_s)
            for q_len, group in sorted(by_len.items()):
                for start in range(0, len(group), q_block):
                    q_idx = group[start : start + q_block]
                    q_ids = torch.tensor([uniq_q[i] for i in q_idx], dtype=torch.long, device=device)
                    lp = _prior_chunk(model, q_ids, q_len, s_ids, s_mask, device)
                    table[np.ix_(q_idx, s_idx)] = lp.double().cpu().numpy()
                    if progress is not None:
                        progress(len(q_idx) * n_s)
    return table


def _prior_chunk(model, q_ids: torch.Tensor, q_len: int, s_ids: torch.Tensor, s_mask: torch.Tensor,
                 device: torch.device) -> torch.Tensor:
    """log P(s | q) for a chunk of equal-length prefixes and a padded block of suffixes: [P, S]."""
    n_q, (n_s, width) = len(q_ids), s_ids.shape
    out = model(input_ids=q_ids, use_cache=True, logits_to_keep=1)
    first = torch.log_softmax(out.logits[:, -1].float(), dim=-1)  # [P, V]: predicts s[0]
    lp = first[:, s_ids[:, 0]]  # log P(s[0] | q) for every (prefix, suffix) of the block: [P, S]
    if width > 1:
        feed = width - 1  # s[:-1]: position t predicts s[t + 1]
        cache = out.past_key_values
        cache.batch_repeat_interleave(n_s)  # row r = prefix r // n_s, suffix r % n_s
        ids = s_ids[:, :feed].repeat(n_q, 1)
        att = torch.cat(
            [torch.ones((n_q * n_s, q_len), dtype=torch.long, device=device),
             s_mask[:, :feed].long().repeat(n_q, 1)],
            dim=1,
        )
        pos = torch.arange(q_len, q_len + feed, device=device).unsqueeze(0).expand(n_q * n_s, -1)
        logits = model(
            input_ids=ids, attention_mask=att, position_ids=pos, cache=cache, use_cache=True
        ).logits
        tok = _target_logprobs(logits, s_ids[:, 1:].repeat(n_q, 1))  # [P*S, width-1]
        tok = torch.where(s_mask[:, 1:].repeat(n_q, 1), tok, 0.0)  # padding: log 1 = 0
        lp = lp + tok.sum(-1).view(n_q, n_s)
    return lp
