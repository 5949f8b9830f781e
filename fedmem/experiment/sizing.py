"""How much of its data each audit can have, read once from the data itself: every audit setting the data cannot
fill named at once, each with the key a user types and a value that works for this data; and ``audit.size=auto``,
which sizes every audit to what the data supplies and says what it chose.

The supply is counted on the pool every usable text would give (``audit.samples_per_client=all``,
``audit.test_per_client=all``): per client and split, the ordinary samples (distinct texts of at least
``audit.prefix_len`` + 20 tokens, training text found elsewhere left out), and how many of them have a trained
suffix as long as each method scores. A method's draw per client is the smaller of its split's pool and that supply.
"""

from __future__ import annotations

import dataclasses

from fedmem.audit import AUDIT_METHODS
from fedmem.audit.base import AuditPool
from fedmem.audit.pool import is_canary


def _ordinary(samples) -> list:
    return [s for s in samples if not is_canary(s)]


def _suffix_lengths(pool: AuditPool, split: str) -> dict[int, list[int]]:
    """Per client, the trained suffix lengths of its ordinary samples of ``split``, longest first."""
    pools = pool.train if split == "train" else pool.test
    return {c: sorted((s.trained_suffix_len for s in _ordinary(pools.get(c, []))), reverse=True)
            for c in pool.clients}


def _fewest(lengths: dict[int, list[int]], at_least: int, cap: int | None) -> tuple[int, int]:
    """(the client with the fewest samples of at least ``at_least`` suffix tokens, that count), each count capped at
    the split's pool size ``cap``."""
    counts = {c: min(sum(n >= at_least for n in ls), cap if cap is not None else len(ls)) for c, ls in lengths.items()}
    client = min(counts, key=counts.get)
    return client, counts[client]


def _longest_suffix(lengths: dict[int, list[int]], n: int) -> int:
    """The longest suffix every client has ``n`` samples of (0 where some client has fewer than n samples)."""
    return min((ls[n - 1] if len(ls) >= n else 0) for ls in lengths.values()) if n else 0


def _cap(size) -> int | None:
    return None if size == "all" else int(size)


def audit_sizes(cfg, full: AuditPool, configs: dict) -> tuple[dict[str, int], list[str]]:
    """(the size settings that fit, as ``{key: value}`` over every audit size key; the problems, one line each,
    naming the key as typed, what the data supplies and a value that works). ``full``: the pool of every usable
    text; ``configs``: the enabled methods' configs."""
    audit, lengths = cfg.audit, {split: _suffix_lengths(full, split) for split in ("train", "test")}
    names = full.client_names
    who = lambda c: f"client {names[c]!r}" if names[c] != str(c) else f"client {c}"  # noqa: E731 (as the data says)
    fits, problems = {}, []
    pools = {"train": ("audit.samples_per_client", audit.samples_per_client),
             "test": ("audit.test_per_client", audit.test_per_client)}
    caps = {}
    for split, (key, asked) in pools.items():
        client, have = _fewest(lengths[split], 0, None)
        caps[split] = have if asked == "all" else min(int(asked), have)
        fits[key] = caps[split] if asked != "all" else "all"
        if not have:  # no text is long enough: the prefix, not a size, is what to change
            return fits, [f"{key}={asked}: {who(client)} has no {split} text of at least audit.prefix_len + 20 = "
                          f"{audit.prefix_len + 20} tokens: lower audit.prefix_len"]
        if asked != "all" and int(asked) > have:
            problems.append(f"{key}={asked}: {who(client)} has {have} usable {split} texts (distinct, at least "
                            f"audit.prefix_len + 20 tokens): set {key}={have} or all")
    suffixes = {name: AUDIT_METHODS[name].min_suffix(c) for name, c in configs.items()}
    for name, c in configs.items():
        method = AUDIT_METHODS[name]
        for split, n in method.samples_needed(c).items():
            key = f"audit.{name}.{method.size_key(split)}"
            client, have = _fewest(lengths[split], suffixes[name], caps[split])
            fits[key] = min(n, have)
            if n <= have:
                continue
            line = f"{key}={n}: {who(client)} gives it {have} {split} samples"
            if suffixes[name]:
                line += f" with {suffixes[name]} suffix tokens (audit.{name}.suffix_len)"
                longest = _longest_suffix(lengths[split], min(n, caps[split]))
                shorter = f" or audit.{name}.suffix_len={longest}" if 0 < longest < suffixes[name] else ""
            else:
                shorter = ""
            problems.append(f"{line}: set {key}={have}{shorter}")
    common = audit.common_draw
    if common and suffixes:
        longest_name = max(suffixes, key=suffixes.get)
        client, have = _fewest(lengths["train"], suffixes[longest_name], caps["train"])
        split = "train"
        if caps["test"]:  # the held-out arm is drawn alike, as many samples of the same suffix length
            held_client, held = _fewest(lengths["test"], suffixes[longest_name], caps["test"])
            if held < have:
                client, have, split = held_client, held, "held-out"
        drawn = {f"audit.{name}.{AUDIT_METHODS[name].size_key('train')}": (name, c) for name, c in configs.items()
                 if AUDIT_METHODS[name].audited_train(c, full) is not None and "train" in
                 AUDIT_METHODS[name].samples_needed(c)}
        fit = min([have, *(fits[key] for key in drawn)])
        fits["audit.common_draw"] = min(common, fit)
        if common > fit:
            if have < common:
                why = (f"{who(client)} has {have} {split} samples with {suffixes[longest_name]} suffix tokens "
                       f"(audit.{longest_name}.suffix_len)" + (", and the held-out arm is drawn alike"
                                                               if split == "held-out" else ""))
            else:
                key = min(drawn, key=lambda k: fits[k])
                why = f"every method audits each client's common draw, and {key}={fits[key]} draws fewer"
            problems.append(f"audit.common_draw={common}: {why}: set audit.common_draw={fit}")
    if problems:
        problems.append("or audit.size=auto, which sets every audit size to what the data supplies")
    return fits, problems


def sized(cfg, fits: dict[str, int]):
    """``cfg`` with every audit size set to what fits and the sizing fixed (``audit.size=auto`` resolved)."""
    audit = cfg.audit
    top = {k.removeprefix("audit."): v for k, v in fits.items() if k.count(".") == 1}
    sections = dict(audit.sections)
    for key, value in fits.items():
        if key.count(".") == 2:
            _, name, field = key.split(".")
            sections[name] = dataclasses.replace(sections[name], **{field: value})
    return dataclasses.replace(cfg, audit=dataclasses.replace(audit, **top, sections=sections, size="fixed"))


def chosen_line(fits: dict[str, int], cfg) -> str:
    """What ``audit.size=auto`` chose, the settings it changed only."""
    changed = [f"{k}={v}" for k, v in fits.items() if _setting(cfg, k) != v]
    return ("fedmem: audit.size=auto: " + (", ".join(changed) if changed else "every audit as configured fits the "
                                                                              "data"))


def _setting(cfg, key: str):
    parts = key.split(".")[1:]
    if len(parts) == 1:
        return getattr(cfg.audit, parts[0])
    return getattr(cfg.audit.sections[parts[0]], parts[1])
