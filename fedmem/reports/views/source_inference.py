"""How source inference by the server reads: accuracy against chance and its held-out control, the attribution
matrix (true client by guessed client) with the canaries in rows of their own, its heatmaps, the updates' disk
cost."""

from __future__ import annotations

import os

from fedmem.common.fmt import pct, pct_ci, pts_ci
from fedmem.common.io import pyplot, save_figure
from fedmem.reports.views.base import View, register_view


def mib(n: float) -> str:
    return f"{n / 2 ** 20:.2f} MiB"


def share(x: float) -> str:
    """A count of records, split between tied guesses: whole when it is whole."""
    return f"{x:.0f}" if abs(x - round(x)) < 1e-9 else f"{x:.2f}"


@register_view("sia")
class SourceInferenceView(View):
    def _names(self, clients: list[int]) -> list[str]:
        return [self.pool.client_names.get(c, str(c)) for c in clients]

    def _matrix(self, arm: dict, clients: list[int], canaries: list[dict] = ()) -> list[str]:
        names = self._names(clients)
        lines = ["| true client \\ guessed client | " + " | ".join(names) + " | records | attributed to its own "
                 "client [95% CI] |", "|---" * (len(clients) + 3) + "|"]
        for name, row, c in zip(names, arm["matrix"], arm["per_client"]):
            lines.append(f"| {name} | " + " | ".join(share(v) for v in row) +
                         f" | {c['records']} | {pct_ci(c['accuracy'], c['accuracy_ci95'])} |")
        for k in canaries:
            to_holder = k["to_a_holder"] / k["records"] if k["records"] else None
            held = "" if k["holders"] == [k["client"]] else f", held by {len(k['holders'])} clients"
            lines.append(f"| {self.pool.client_names.get(k['client'], k['client'])}: canaries × {k['group']}{held} | " +
                         " | ".join(share(v) for v in k["guessed"]) + f" | {k['records']} | {pct(to_holder)} "
                         "(to a client holding it) |")
        return lines

    def markdown(self, section: dict) -> str:
        h, updated = section["headline"], section.get("updated") or []
        if h.get("accuracy") is None and not updated:
            return ""
        clients, train, held = section["clients"], section["train"], section["heldout"]
        m = len(updated)
        lines = [
            f"The server scores each record under every client's local model of the round (the adapter the client "
            f"sent it) and names the client under which the record's suffix ({section['config']['suffix_len']} "
            f"tokens) is most likely, relative to the round's global model; a tie is split between the tied clients. "
            f"{m} client(s) sent an update, each with the same number of audited records: chance is 1/{m} "
            f"= {pct(h['chance'])}. Held-out records are each client's own test records, which no client trained on: "
            "a client's update makes text of its own distribution more likely without holding it, and the excess is "
            "what the records themselves add.", "",
            "| records | attributed | to their own client [95% CI] | chance |", "|---|---|---|---|",
            f"| training (the draw) | {train['records']} | {pct_ci(h['accuracy'], h['accuracy_ci95'])} | "
            f"{pct(h['chance'])} |",
            f"| held-out (never trained on) | {held['records']} | "
            f"{pct_ci(h['heldout_accuracy'], h['heldout_accuracy_ci95'])} | {pct(h['chance'])} |",
            f"| excess (training − held-out, Newcombe's interval) | | {pts_ci(h['excess'], h['excess_ci95'])} | |",
            "", "Attribution of the training records (read beside MR(j→k): MR asks whose text the global model "
            "writes, this matrix whose records each client's update carries); the planted canaries in rows of their "
            "own, never in a rate:", "", *self._matrix(train, clients, section.get("canaries") or []),
            "", "Attribution of the held-out records:", "", *self._matrix(held, clients),
        ]
        left = section.get("not_updated") or {}
        if any(left.values()):
            lines += ["", f"Left out, their client sent no update this round: {left.get('train', 0)} training and "
                          f"{left.get('test', 0)} held-out records."]
        updates = section.get("updates") or {}
        if updates.get("clients"):
            lines += ["", f"The clients' updates of this round on disk: {updates['clients']} of them, "
                          f"{mib(updates['bytes'])} ({updates['bytes']} bytes)."]
        return "\n".join(lines)

    def render(self, section: dict, out_dir: str) -> list[tuple[str, str]]:
        """Heatmaps of the share of each client's training and held-out records guessed as each client."""
        if section["headline"].get("accuracy") is None:
            return []
        plt = pyplot()
        names = self._names(section["clients"])
        fig, axes = plt.subplots(1, 2, figsize=(7.0, 3.4), layout="constrained")
        for ax, arm, title in zip(axes, ("train", "heldout"), ("training records", "held-out records")):
            rows = [[v / sum(row) if sum(row) else 0.0 for v in row] for row in section[arm]["matrix"]]
            im = ax.imshow([[100 * v for v in row] for row in rows], cmap="Blues", vmin=0, vmax=100)
            for j, row in enumerate(rows):
                for k, v in enumerate(row):
                    ax.text(k, j, f"{100 * v:.0f}", ha="center", va="center", fontsize=8,
                            color="white" if v > 0.6 else "black")
            ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=7)
            ax.set_yticks(range(len(names)), names, fontsize=7)
            ax.set_xlabel("guessed client", fontsize=8)
            ax.set_ylabel("true client", fontsize=8)
            ax.set_title(title, fontsize=9)
        fig.colorbar(im, ax=axes.tolist(), fraction=0.03, label="% of the true client's records")
        return [("Source inference: records attributed to each client, %",
                 save_figure(fig, os.path.join(out_dir, "sia_attribution.png"), dpi=90))]

    def summary(self, first: dict, last: dict) -> str:
        h = last["headline"]
        if h.get("accuracy") is None:
            return f"**Source inference by the server.** {last.get('note', 'No record was attributed.')}"
        updates = last.get("updates") or {}
        cost = "" if not updates.get("clients") else (
            f" The server kept this round's {updates['clients']} updates on disk, {mib(updates['bytes'])} "
            f"({mib(updates['bytes'] / updates['clients'])} each; every round's are in summary.json under "
            "sia/update_bytes): " + ("kept after the run, for re-audits." if updates.get("kept") else
                                     "removed once their round was audited (audit.keep_updates=true keeps them)."))
        was = (first.get("headline") or {}).get("accuracy")
        return (f"**Source inference by the server.** From the round's updates the server attributes "
                f"{pct_ci(h['accuracy'], h['accuracy_ci95'])} of the clients' training records to their own client "
                f"(chance {pct(h['chance'])}; first audited round {pct(was)}), and "
                f"{pct_ci(h['heldout_accuracy'], h['heldout_accuracy_ci95'])} of their held-out records: what the "
                f"records themselves add, {pts_ci(h['excess'], h['excess_ci95'])}.{cost}")
