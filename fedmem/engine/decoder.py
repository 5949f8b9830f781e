"""fedmem's decoding loop: continuous batching over a preallocated KV cache, for any transformers causal LM.

Why not ``generate`` on fixed batches: an audit continues thousands of prompts to the end of their turn, with a
cap far above the typical length. A fixed batch runs until its longest row ends (most batches run to the cap),
``DynamicCache`` concatenates the whole cache at every step, and the sampler draws over the whole vocabulary.
This loop computes only what the outputs need:

- **Slots.** A batch of ``rows`` slots shares one preallocated cache per layer, ``[rows, kv_heads, width,
  head_dim]``. Active rows sit at slots ``[0, n)``, so every step reads a view, never a copy.
- **Rows leave when they end.** A row that draws an end-of-turn id (or reaches the cap) hands in its output; the
  last active rows move into the holes (one row copy each), so a step never computes for a finished row.
- **Waiting prompts take their place.** When enough slots are free (an eighth of the batch, or all prompts are
  placed), the next prompts are prefilled in one forward pass straight into the free slots. A prompt asked for
  several samples is prefilled once and its cache copied to each of its slots.
- **One write column.** Every row writes its next token at the same cache column ``t``; a prompt is placed
  right-aligned to end at ``t`` and each row attends only to its own columns through a 4-D additive mask, with
  its own position ids. When ``t`` reaches the end of the buffer, the live columns shift left.
- **The draw** is :class:`fedmem.engine.sampler.Sampler`: greedy, or sampling over the top-k candidates only.

The model sees ordinary forward calls (``cache``, ``position_ids``, a 4-D ``attention_mask``) through a
:class:`transformers.Cache` whose layers write into the slots, so any model whose attention goes through
``Cache.update`` and accepts a prepared 4-D mask (Qwen2, Llama and most decoder-only models) runs unchanged,
peft-wrapped or not, on the model's own device.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from transformers.cache_utils import Cache, CacheLayerMixin

from fedmem.engine.batching import pad_batch
from fedmem.engine.sampler import Sampler


class _Window:
    """Where the next forward pass reads and writes: rows ``[r0, r1)``, writes from column ``c0``, reads from
    column ``lo`` up to the end of the write. Shared by every layer of one cache."""

    r0 = r1 = c0 = lo = 0


class _SlotLayer(CacheLayerMixin):
    """One layer's keys and values for every slot, preallocated on the first write."""

    is_sliding = False

    def __init__(self, window: _Window, rows: int, width: int):
        super().__init__()
        self.window, self.rows, self.width = window, rows, width

    def lazy_initialization(self, key_states, value_states):
        # zeros, not empty: masked columns still enter q . k, and uninitialised memory may hold NaN, which no mask hides
        shape = (self.rows, key_states.shape[1], self.width, key_states.shape[-1])
        self.keys = torch.zeros(shape, dtype=key_states.dtype, device=key_states.device)
        self.values = torch.zeros(shape, dtype=value_states.dtype, device=value_states.device)
        self.device = key_states.device
        self.is_initialized = True

    def update(self, key_states, value_states, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        w = self.window
        end = w.c0 + key_states.shape[-2]
        self.keys[w.r0 : w.r1, :, w.c0 : end] = key_states
        self.values[w.r0 : w.r1, :, w.c0 : end] = value_states
        return self.keys[w.r0 : w.r1, :, w.lo : end], self.values[w.r0 : w.r1, :, w.lo : end]

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:  # masks are always given prepared (4-D)
        return self.window.c0 + query_length - self.window.lo, self.window.lo

    def get_seq_length(self) -> int:
        return self.window.c0

    def get_max_length(self) -> int:
        return self.width

    def move_rows(self, dst: torch.Tensor, src: torch.Tensor, lo: int, hi: int) -> None:
        self.keys[dst, :, lo:hi] = self.keys[src, :, lo:hi]
        self.values[dst, :, lo:hi] = self.values[src, :, lo:hi]

    def shift_left(self, rows: int, start: int, stop: int) -> None:
        """Columns ``[start, stop)`` of the first ``rows`` slots move to ``[0, stop - start)``."""
        if self.is_initialized:
            for t in (self.keys, self.values):
                t[:rows, :, : stop - start] = t[:rows, :, start:stop].clone()


def text_config(model):
    """The config of a model's language part (itself for a plain causal LM)."""
    return model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config


def _additive(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A boolean attend-to mask ``[rows, 1, queries, keys]`` as the additive float mask that every attention
    implementation accepts (the dtype's minimum, not -inf, where a row may attend to nothing: left padding)."""
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill_(~allowed, torch.finfo(dtype).min)


class _Slots:
    """The state of one :func:`decode` call: the cache, and per active slot its columns, position and output."""

    def __init__(self, model, rows: int, width: int, first_column: int):
        self.model = model
        self.device = next(model.parameters()).device
        self.dtype = next(p for p in model.parameters() if p.is_floating_point()).dtype
        self.window = _Window()
        self.layers = [_SlotLayer(self.window, rows, width) for _ in range(int(text_config(model).num_hidden_layers))]
        self.cache = Cache(layers=self.layers)
        self.rows, self.width, self.t = rows, width, first_column
        self.first_column = first_column  # the longest prompt: every prompt fits right-aligned before column t
        self.live = torch.zeros((rows, width), dtype=torch.bool, device=self.device)  # columns each slot attends to
        self.start = [0] * rows  # each slot's first column
        self.position = torch.zeros(rows, dtype=torch.long, device=self.device)  # position id of the next token
        self.last = torch.zeros(rows, dtype=torch.long, device=self.device)  # each slot's last drawn token
        self.owner: list[tuple[int, int]] = []  # (prompt, sample) of each active slot, slots [0, n)
        self.made: list[list[int]] = []  # tokens drawn so far by each active slot

    @property
    def n(self) -> int:
        return len(self.owner)

    def forward(self, ids, allowed, position, r0, r1, c0, lo) -> torch.Tensor:
        """The model over rows ``[r0, r1)`` writing from column ``c0``, reading from ``lo``: last-position logits."""
        w = self.window
        w.r0, w.r1, w.c0, w.lo = r0, r1, c0, lo
        out = self.model(input_ids=ids, attention_mask=_additive(allowed, self.dtype), position_ids=position,
                         cache=self.cache, use_cache=True, logits_to_keep=1)
        return out.logits[:, -1]

    def admit(self, prompts: list[tuple[int, ...]], take: list[tuple[int, int]], pad_id: int) -> torch.Tensor:
        """Prefill ``take`` (prompt, sample) pairs into slots ``[n, n + len(take))``, a prompt's samples from one
        prefill; returns each new slot's next-token logits. Prompts end at column ``t``."""
        first: dict[int, tuple[int, int]] = {}  # each distinct prompt's first (prompt, sample) pair
        for pair in take:
            first.setdefault(pair[0], pair)
        distinct = list(first)
        take = list(first.values()) + [p for p in take if first[p[0]] != p]  # the distinct prompts' slots first
        ids, mask = pad_batch([prompts[i] for i in distinct], pad_id, left=True)
        ids, mask = ids.to(self.device), mask.to(self.device, torch.bool)
        length, n, t = ids.shape[1], self.n, self.t
        causal = torch.ones((length, length), dtype=torch.bool, device=self.device).tril()
        positions = (mask.long().cumsum(-1) - 1).clamp_min(0)  # each prompt's own, from 0 at its first real token
        logits = self.forward(ids, causal[None, None] & mask[:, None, None, :], positions,
                              n, n + len(distinct), t - length, t - length)
        row = {i: k for k, i in enumerate(distinct)}
        src = torch.tensor([row[i] for i, _ in take], device=self.device)  # each new slot's prefill, 0-based
        slots = torch.arange(n, n + len(take), device=self.device)
        if len(take) > len(distinct):  # copy each prompt's prefill to the slots of its other samples
            for layer in self.layers:
                layer.move_rows(slots[len(distinct):], src[len(distinct):] + n, t - length, t)
        self.live[slots] = False
        self.live[slots, t - length : t] = mask[src]
        self.start[n : n + len(take)] = [t - length] * len(take)
        self.position[slots] = mask[src].sum(-1)
        self.owner.extend(take)
        self.made.extend([] for _ in take)
        return logits[src]

    def step(self) -> torch.Tensor:
        """One token for every active slot (its last drawn one) at column ``t``: the next-token logits."""
        n, t = self.n, self.t
        if t >= self.width:
            self.shift()
            t = self.t
        lo = min(self.start[:n])
        self.live[:n, t] = True
        logits = self.forward(self.last[:n, None], self.live[:n, None, None, lo : t + 1], self.position[:n, None],
                              0, n, t, lo)
        self.position[:n] += 1
        self.t += 1
        return logits

    def shift(self) -> None:
        """Move the live columns to the left edge, keeping ``t`` at or above ``longest`` (prompts end there)."""
        n = self.n
        by = min(min(self.start[:n]), self.t - self.first_column)
        for layer in self.layers:
            layer.shift_left(n, by, self.t)
        self.live[:n, : self.t - by] = self.live[:n, by : self.t].clone()
        self.live[:n, self.t - by :] = False
        self.start[:n] = [s - by for s in self.start[:n]]
        self.t -= by

    def retire(self, ended: list[int]) -> list[tuple[tuple[int, int], list[int]]]:
        """Remove the ``ended`` slots, moving the last active slots into the holes; returns their outputs."""
        gone = set(ended)
        done = [(self.owner[s], self.made[s]) for s in ended]
        kept = self.n - len(gone)
        holes = [s for s in range(kept) if s in gone]
        movers = [s for s in range(kept, self.n) if s not in gone]
        if holes:
            dst, src = torch.tensor(holes, device=self.device), torch.tensor(movers, device=self.device)
            lo = min(self.start[s] for s in movers)
            for layer in self.layers:
                layer.move_rows(dst, src, lo, self.t)
            self.live[dst] = self.live[src]
            self.position[dst], self.last[dst] = self.position[src], self.last[src]
            for h, m in zip(holes, movers):
                self.start[h], self.owner[h], self.made[h] = self.start[m], self.owner[m], self.made[m]
        del self.owner[kept:], self.made[kept:]
        return done


@torch.inference_mode()
def decode(
    model,
    prompts: list[tuple[int, ...]],
    max_new_tokens: int,
    stop: set[int],
    pad_id: int,
    sampler: Sampler,
    rows: int,
    num_samples: int = 1,
    generator: torch.Generator | None = None,
    progress: Callable[[int], object] | None = None,
) -> list[list[list[int]]]:
    """``out[i][r]``: the r-th continuation of ``prompts[i]``, prompt excluded, ended before its first id in
    ``stop`` or at ``max_new_tokens`` tokens. At most ``rows`` sequences are in flight; prompts are admitted in
    the order given (callers sort them by length, so that a prefill pads little). ``progress(k)`` is called when k
    more prompts have all their continuations."""
    out: list[list[list[int]]] = [[[] for _ in range(num_samples)] for _ in prompts]
    if not prompts or max_new_tokens < 1:
        return out
    if any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token")
    longest = max(len(p) for p in prompts)
    rows = max(1, min(rows, len(prompts) * num_samples))
    span = longest + max_new_tokens  # the most columns one row occupies in its life
    state = _Slots(model, rows, span + max(32, span // 4), first_column=longest)
    queue = [(i, r) for i in range(len(prompts)) for r in range(num_samples)]
    remaining = [num_samples] * len(prompts)
    refill = max(1, rows // 8)  # admit when this many slots are free: a prefill pass is not worth fewer rows
    placed = 0
    while placed < len(queue) or state.n:
        free = rows - state.n
        if placed < len(queue) and (free >= refill or state.n == 0 or free >= len(queue) - placed):
            take = queue[placed : placed + free]
            placed += len(take)
            first_new = state.n
            logits = state.admit(prompts, take, pad_id)
            state.last[first_new : state.n] = sampler.draw(logits, generator)
            new = range(first_new, state.n)
        else:
            state.last[: state.n] = sampler.draw(state.step(), generator)
            new = range(state.n)
        drawn = state.last[new.start : new.stop].tolist()
        ended = []
        for s, tok in zip(new, drawn):
            if tok in stop:
                ended.append(s)
            else:
                state.made[s].append(tok)
                if len(state.made[s]) >= max_new_tokens:
                    ended.append(s)
        for (i, r), made in state.retire(ended):
            out[i][r] = made
            remaining[i] -= 1
            if remaining[i] == 0 and progress is not None:
                progress(1)
    return out
