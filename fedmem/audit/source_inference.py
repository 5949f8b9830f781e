"""Source inference by the server (Hu et al., "Source Inference Attacks in Federated Learning", ICDM 2021; SPEC §11).

The attacker is the honest-but-curious server. It receives every sampled client's update each round (the adapter
the client sends it) and knows that a record is in some client's training data; it asks whose. As Hu et al.'s
attack does, it scores the record under each client's local model of the round and names the client under whose
model the record is most likely. Per audited round r and audited record x, with L(x) the mean token negative
log-likelihood of x's suffix (scored as the membership attacks score it: after its training context, cut to
``suffix_len`` tokens):

- drop_k(x) = L_g(x) − L_k(x) for every client k whose update of round r the run kept, g the round's global model
  (the audited model) and k's local model the adapter k sent the server (the round's starting global adapter plus
  its update): how much more likely k's update made the record than the model every client receives;
- the guess: the client with the largest drop. A tie among t clients gives each 1/t of the record (an attacker who
  breaks ties at random), so a round in which every local model is the global model (round 0: nothing trained yet)
  is exactly at chance.

The global model's loss is the same for every k, so it never changes the guess (Hu et al. compare the local models'
posteriors directly); it makes each drop readable on its own, and sets the records' margins below.

**Records.** Each client's draw of the membership attacks (``fedmem.audit.membership.attack_draw``): its first ``n``
ordinary train records of the pool's order with a long enough suffix, the planted canaries beside them (in rows of
their own, never in a rate), and its first ``n`` held-out (test) records, which no client trained on. Every client
gives exactly ``n`` on both arms (a configuration that cannot draw them is refused before the run, with the ``n``
that works), so the pooled rates weigh every client equally and chance is the same on both arms.

**Chance.** Every client whose update the round kept contributes the same number of records, so any guess that
ignores the record is right on exactly 1/m of them, m the clients with an update: 1/m is the chance level (not the
clients' shares of the training data, which would be chance for records drawn in proportion to them). A client
without an update that round (not sampled) cannot be guessed; its records are left out and counted.

**Accuracy and its control.** The share of the draw's records attributed to their own client, with Wilson's 95%
interval. A client's update also makes text of its own distribution more likely without holding the record (clients
of different topics): the same attack on each client's held-out records measures that, and the excess, accuracy
minus held-out accuracy with Newcombe's interval, is what the records themselves add. That excess has a ceiling,
1 − the held-out accuracy: where the topic alone attributes most held-out records, it can say little. The
comparison without a ceiling is the **margin** (a record's own client's drop minus the largest other drop): its
mean over the training records minus its mean over the held-out ones, with Welch's interval, in nats.

**Attribution matrix.** Rows the true client, columns the guessed client, records of the draw (ties split), so each
row sums to the client's audited records; the held-out records in a matrix of their own, the canaries in rows of
their own by client and copy count (a shared canary is rightly attributed to any client that holds it).

**Per-record verdicts** (the agreement matrix, the ground truth): a record is flagged when its own client is the
only best guess; its score is its margin, drop_own − max over the other clients' drops.

A centralized run has no clients and no updates: the section says so and has no figures.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from fedmem.audit.base import AuditedModel, AuditMethod, AuditPool, Figure, register
from fedmem.audit.intervals import detectable_excess, mean_difference, newcombe, wilson
from fedmem.audit.membership import OnTheAttacksDraw, attack_draw, mean_nll
from fedmem.audit.pool import draw_and_planted
from fedmem.audit.training_context import ScoringContext, context_option
from fedmem.audit.truth import canary_group, canary_group_order
from fedmem.common.fields import check_fields, option, positive
from fedmem.common.stopwatch import Stopwatch


@dataclass
class SourceInferenceConfig:
    """audit.sia: source inference by the server (which client's update holds a record)."""

    n: int = option(32, "train records and held-out (test) records per client put through the attack (at least "
                        "audit.common_draw); canaries are attributed beside them")
    suffix_len: int = option(64, "suffix tokens scored after each record's context")
    context: ScoringContext = context_option("what each suffix is scored after")

    def __post_init__(self):
        check_fields(self, "audit.sia")
        positive(self, "audit.sia", "n", "suffix_len")


def attribute(drops: np.ndarray) -> np.ndarray:
    """Each row's guess as shares of the record over the columns: 1 to the largest drop, split equally between
    tied largest ones (an attacker breaking ties at random)."""
    best = drops == drops.max(axis=1, keepdims=True)
    return best / best.sum(axis=1, keepdims=True)


def arm_figures(credit: np.ndarray, truth: list[int], clients: list[int], updated: list[int]) -> dict:
    """Accuracy (Wilson's interval) and the attribution matrix of one arm's records: ``credit[i]`` the shares of
    record i over ``updated`` (the clients with an update), ``truth[i]`` its own client."""
    col = {c: i for i, c in enumerate(updated)}
    matrix = np.zeros((len(clients), len(clients)))
    for shares, own in zip(credit, truth):
        matrix[clients.index(own), [clients.index(c) for c in updated]] += shares
    per_client = []
    for j, c in enumerate(clients):
        n, k = float(matrix[j].sum()), float(matrix[j, j])
        per_client.append({"client": c, "records": round(n), "correct": k,
                           "accuracy": k / n if n else None, "accuracy_ci95": wilson(k, n)})
    n = len(truth)
    k = float(sum(shares[col[own]] for shares, own in zip(credit, truth)))
    return {"records": n, "correct": k, "accuracy": k / n if n else None, "accuracy_ci95": wilson(k, n),
            "matrix": matrix.tolist(), "per_client": per_client}


@register
class SourceInference(OnTheAttacksDraw, AuditMethod):
    name = "sia"
    Config = SourceInferenceConfig
    title = "Source inference by the server (Hu et al. 2021)"
    compares_members = True  # the held-out control is text no client trained on
    scores_updates = True
    size_keys = ("n",)
    figures = (
        Figure("accuracy", "SIA accuracy", console=True),
        Figure("chance", "SIA chance", ci=None, memorization=None, sweep=None),
        Figure("heldout_accuracy", "SIA accuracy on held-out records", memorization=None, sweep=None),
        Figure("excess", "SIA excess over held-out", kind="difference", sweep=None, mde=True),
        Figure("margin_excess", "SIA margin, training − held-out records (nats)", kind="score", memorization=True,
               sweep=None, mde=True),
        Figure("update_bytes", "clients' updates on disk (bytes)", kind="count", memorization=None, sweep=None),
    )

    @classmethod
    def round_cost(cls, cfg: SourceInferenceConfig, clients: int) -> str:
        return (f"one teacher-forced pass of each client's local model (a copy of the model each) and of the global "
                f"model over up to {2 * cfg.n * clients} suffixes of {cfg.suffix_len} tokens; the clients' updates on "
                "disk")

    @classmethod
    def check_pool(cls, cfg: SourceInferenceConfig, pool: AuditPool) -> None:
        """Every client gives the attack the same number of records on both arms, or "chance is 1/m" and the excess
        would depend on which clients the records came from: refused in one line otherwise, with the n that works."""
        supplied = {(c, split): len(draw_and_planted(pools.get(c, []), cfg.n, cfg.suffix_len)[0])
                    for split, pools in (("train", pool.train), ("held-out", pool.test)) for c in pool.clients}
        (client, split), fewest = min(supplied.items(), key=lambda kv: kv[1])
        if fewest < cfg.n:
            raise ValueError(f"audit.sia.n={cfg.n}, but client {client} has only {fewest} {split} records with "
                             f"{cfg.suffix_len} suffix tokens (audit.sia.suffix_len), and every client must give the "
                             f"same number on both arms: set audit.sia.n={fewest} or lower audit.sia.suffix_len")

    def __init__(self, cfg: SourceInferenceConfig, pool: AuditPool):
        super().__init__(cfg, pool)
        self.draw = attack_draw(pool, cfg.n, cfg.suffix_len, cfg.context, "audit.sia.context")
        self.tags = {s.id: s.tags for s in self.draw.samples}
        truth = pool.ground_truth or {}
        self.holders = {k["id"]: list(k.get("clients") or [k.get("client")]) for k in truth.get("canaries", [])}

    def audit(self, audited: AuditedModel) -> dict:
        clock = Stopwatch()
        section = {"config": asdict(self.cfg), "context": self.cfg.context, "clients": self.pool.clients}
        if audited.label == "cl":
            return {**section, "updated": [], "headline": dict.fromkeys(h.key for h in self.figures),
                    "note": "A centralized run has no clients and no updates: source inference does not apply."}
        pairs = self.draw.pairs
        local = audited.client_logprobs(pairs) if pairs else None
        if local is None and audited.round > 0 and pairs:
            raise ValueError(f"round {audited.round}: no client's update was kept, and source inference scores them")
        if local is None:  # round 0: every client's local model is the global model, every drop 0
            updated, drops = self.pool.clients, np.zeros((len(pairs), len(self.pool.clients)))
        else:
            glob = np.array([mean_nll(lp) for lp in audited.global_logprobs(audited.round, pairs)])
            updated = sorted(local)
            drops = np.stack([glob - np.array([mean_nll(lp) for lp in local[c]]) for c in updated], axis=1) \
                if pairs else np.zeros((0, len(updated)))
        clock.lap("scoring", 4)
        section |= self._figures(updated, drops)
        section["updates"] = {"clients": len(local or {}), **audited.updates_on_disk()}
        section["headline"]["update_bytes"] = section["updates"]["bytes"]
        section["from_updates"] = local is not None
        if local is None:
            section["note"] = ("Round 0: no client has trained yet, so every client's local model is the global model, "
                               "every record's drops are 0 and the attack is at chance by construction.")
        clock.lap("attribution", 4)
        section["seconds"] = clock.laps  # moved by the auditor to the report's timings
        return section

    def _figures(self, updated: list[int], drops: np.ndarray) -> dict:
        """The section's figures from every sample's drops under the ``updated`` clients' local models."""
        d, clients = self.draw, self.pool.clients
        credit = attribute(drops) if len(updated) else np.zeros((len(d.samples), 0))
        scored = np.array([s.client in updated for s in d.samples], dtype=bool)
        arms = {}
        for arm, member in (("train", True), ("heldout", False)):
            rows = np.flatnonzero(d.drawn & (d.is_member == member) & scored)
            arms[arm] = arm_figures(credit[rows], [int(d.clients[i]) for i in rows], clients, updated)
        chance = 1 / len(updated) if updated else None
        train, heldout = arms["train"], arms["heldout"]
        # the comparison with no ceiling: how far each record's own client leads the others (its margin), on
        # training records against held-out ones; a held-out accuracy near 1 leaves an accuracy excess no room
        margins = {}
        if len(updated) >= 2:
            own = np.array([updated.index(int(c)) if int(c) in updated else -1 for c in d.clients])
            others = np.where(np.arange(len(updated))[None, :] == own[:, None], -np.inf, drops)
            margin = drops[np.arange(len(own)), np.maximum(own, 0)] - others.max(axis=1)
            for arm, member in (("train", True), ("heldout", False)):
                margins[arm] = margin[d.drawn & (d.is_member == member) & scored]
        margin_gap = mean_difference(margins["train"], margins["heldout"]) if margins else mean_difference([], [])
        excess = excess_ci = None
        if train["accuracy"] is not None and heldout["accuracy"] is not None:
            excess = train["accuracy"] - heldout["accuracy"]
            excess_ci = newcombe(train["accuracy"], train["accuracy_ci95"], heldout["accuracy"],
                                 heldout["accuracy_ci95"])
        headline = {"accuracy": train["accuracy"], "accuracy_ci95": train["accuracy_ci95"], "chance": chance,
                    "heldout_accuracy": heldout["accuracy"], "heldout_accuracy_ci95": heldout["accuracy_ci95"],
                    "excess": excess, "excess_ci95": excess_ci,
                    "excess_mde": None if excess is None else detectable_excess(heldout["accuracy"], train["records"],
                                                                                heldout["records"]),
                    "margin_excess": margin_gap["diff"], "margin_excess_ci95": margin_gap["ci95"],
                    "margin_excess_mde": margin_gap["mde"]}
        left_out = {split: int(np.sum(d.drawn & (d.is_member == (split == "train")) & ~scored))
                    for split in ("train", "test")}
        samples = [{"id": s.id, "client": s.client, "split": s.split, "drawn": bool(d.drawn[i]),
                    "drops": drops[i].tolist(), "guess": credit[i].tolist()}
                   for i, s in enumerate(d.samples) if scored[i]]
        if margins:
            for arm in ("train", "heldout"):
                arms[arm]["mean_margin"] = float(margins[arm].mean()) if len(margins[arm]) else None
        return {"updated": updated, "headline": headline, "train": train, "heldout": heldout,
                "canaries": self._canary_rows(credit, scored, updated), "not_updated": left_out,
                "skipped_short_suffix": dict(d.short), "samples": samples}

    def _canary_rows(self, credit: np.ndarray, scored: np.ndarray, updated: list[int]) -> list[dict]:
        """The planted canaries' attribution, one row per client and copy-count group: the clients holding it, the
        records, their shares per guessed client (the matrix's columns) and the share given to a client holding it."""
        d, clients = self.draw, self.pool.clients
        rows: dict[tuple[int, str], dict] = {}
        for i, s in enumerate(d.samples):
            if d.drawn[i] or not scored[i] or "canary" not in s.tags:
                continue
            group, holders = canary_group(s.tags), sorted(self.holders.get(s.tags["canary"], [s.client]))
            row = rows.setdefault((s.client, group), {"client": s.client, "group": group, "holders": holders,
                                                      "records": 0, "guessed": [0.0] * len(clients),
                                                      "to_a_holder": 0.0})
            row["records"] += 1
            for c, share in zip(updated, credit[i]):
                row["guessed"][clients.index(c)] += float(share)
                row["to_a_holder"] += float(share) if c in holders else 0.0
        return [rows[k] for k in sorted(rows, key=lambda k: (k[0], canary_group_order(k[1])))]

    def truth_rows(self, section: dict) -> list[dict]:
        """Every attributed record of a round with updates: flagged when its own client is the only best guess,
        scored by its margin (its own client's drop minus the largest other drop)."""
        updated = section.get("updated") or []
        if not section.get("from_updates") or len(updated) < 2:  # no update yet (round 0), or no one to tell apart
            return []
        rows = []
        for s in section["samples"]:
            own = updated.index(s["client"])
            others = [v for k, v in enumerate(s["drops"]) if k != own]
            rows.append({"id": s["id"], "tags": self.tags.get(s["id"], {}), "split": s["split"],
                         "score": s["drops"][own] - max(others), "decision": s["guess"][own] == 1.0})
        return rows
