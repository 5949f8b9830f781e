"""The view interface: how one audit method's sections read on the round and run pages.

A method computes its section and declares its headline figures (``fedmem.audit.base.Figure``); its view turns
sections into Markdown, plots and the run page's answer. A view is found by its method's name; a method without one
gets this module's :class:`View`, which shows the declared figures (a table on the round page, a sentence on the run
page, their rates over rounds as a panel), so a new method appears on every page without a view of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fedmem.audit.base import AuditMethod, Figure
from fedmem.common import registry
from fedmem.audit.membership import FPRS, fpr_label
from fedmem.common.fmt import figure_text, pct, pct_ci


@dataclass(frozen=True)
class Panel:
    """One plot of the run page: headline figures of a method over rounds. ``figures`` maps a headline key to its
    legend label; a key ``<figure>_ci95`` beside a figure in the headline draws its 95% interval as a band."""

    title: str
    y_label: str
    figures: dict[str, str]
    percent: bool = True  # rates (fractions) shown in percent


def headline_text(figure: Figure, headline: dict[str, Any]) -> str:
    """One declared figure of a headline as it reads everywhere (``fedmem.common.fmt.figure_text``)."""
    return figure_text(figure.kind, headline.get(figure.key), headline.get(figure.ci) if figure.ci else None,
                       headline.get(figure.of) if figure.of else None,
                       headline.get(figure.mde_key) if figure.mde else None, figure.null)


def tpr_header() -> str:
    """The TPR columns of a membership attack's table, one per FPR target (``fedmem.audit.membership.FPRS``)."""
    return " | ".join(f"TPR @ {fpr_label(k)} FPR [95% CI]" for k in FPRS)


def tpr_cells(evaluation: dict) -> str:
    """One attack's TPR at each FPR target with its bootstrap interval; n/a where the target is below the FPR's
    resolution (1 / non-members) or a side is empty."""
    return " | ".join(pct_ci(evaluation[f"tpr_at_{k}_fpr"], evaluation.get(f"tpr_at_{k}_fpr_ci95")) for k in FPRS)


def tpr_phrase(headline: dict, attack: str, nonmembers: int | None) -> str:
    """An attack's TPR at the FPR targets its non-members resolve, lowest first ("8.33% at 1% FPR and 16.67% at 5%
    FPR"), and the targets they do not, with why ("no TPR at 0.1% or 1% FPR, below the 1/48 step of 48
    non-members"): a reader sees a reason, never n/a."""
    keys = sorted(FPRS, key=FPRS.get)
    shown = [k for k in keys if headline.get(f"{attack}_tpr_at_{k}_fpr") is not None]
    text = " and ".join(f"{pct(headline[f'{attack}_tpr_at_{k}_fpr'])} at {fpr_label(k)} FPR" for k in shown)
    missing = [fpr_label(k) for k in keys if k not in shown]
    if not missing:
        return text
    why = (f"below the 1/{nonmembers} step of {nonmembers} non-members" if nonmembers else "with no non-members")
    gap = f"no TPR at {' or '.join(missing)} FPR, {why}"
    return f"{text} ({gap})" if text else gap


class View:
    """How one method's sections read. Built once per report with the method (its config, the run's clients)."""

    def __init__(self, method: AuditMethod):
        self.method, self.cfg, self.pool = method, method.cfg, method.pool

    @property
    def panels(self) -> tuple[Panel, ...]:
        """The run page's plots over rounds: by default one of the method's declared rates."""
        rates = {f.key: f.label for f in self.method.figures if f.kind == "rate"}
        return (Panel(self.method.title or self.method.name, "%", rates),) if rates else ()

    def markdown(self, section: dict[str, Any]) -> str:
        """The round page's text for the section: by default a table of its declared figures."""
        h = section.get("headline") or {}
        rows = [f"| {f.label} | {headline_text(f, h)} |" for f in self.method.figures if h.get(f.key) is not None]
        return "\n".join(["| figure | value |", "|---|---|", *rows]) if rows else ""

    def render(self, section: dict[str, Any], out_dir: str) -> list[tuple[str, str]]:
        """Plots of one round for its page: (title, file name relative to out_dir) pairs."""
        return []

    def summary(self, first: dict[str, Any], last: dict[str, Any]) -> str:
        """The run page's answer from this method (Markdown): what the last audited round says, and where it stood
        at the first (round 0, the model before fine-tuning, in a training run). By default its declared figures."""
        h, f = last.get("headline") or {}, first.get("headline") or {}
        parts = [f"{fig.label} {headline_text(fig, h)} (first audited round: {headline_text(fig, f)})"
                 for fig in self.method.figures if h.get(fig.key) is not None]  # a line only where it applies
        title = f"**{self.method.title or self.method.name}.** "
        if parts:
            return title + "; ".join(parts) + "."
        return title + last["note"] if last.get("note") else ""  # no figure: the reason, not "n/a"

    def render_run(self, rounds: list[int], sections: list[dict[str, Any]], out_dir: str) -> list[tuple[str, str]]:
        """Plots over all rounds for the run page beyond its ``panels`` (title, file name relative to out_dir)."""
        return []


VIEWS: dict[str, type[View]] = {}


def register_view(name: str):
    """Class decorator: ``cls`` renders the sections of the audit method called ``name``."""
    def add(cls: type[View]) -> type[View]:
        return registry.add(VIEWS, name, cls, "a view for audit method")
    return add


def view_for(method: AuditMethod) -> View:
    return VIEWS.get(method.name, View)(method)
