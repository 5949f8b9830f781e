"""Reports: ``round_<r>/report.json`` + ``report.md`` / ``report.html`` per round, and a run-level summary.

Every file is written atomically (temp file + rename), so an interrupted run never leaves a half-written report.
Text excerpts of training data are redacted by the methods themselves (``AuditRun.redact``) unless
``audit.reveal_text`` is set.
"""

from __future__ import annotations

import platform
from importlib import metadata
from pathlib import Path

from fedmem.io import atomic_write_json, atomic_write_text, pyplot, save_figure, to_jsonable

PACKAGES = ("fedmem", "torch", "transformers", "peft", "flwr", "scipy", "spacy", "sentence-transformers", "numpy")


def headline(report: dict) -> dict[str, float]:
    """A round report's scalar headline figures, as ``<method>/<figure>`` (logged by Flower, plotted as curves)."""
    out = {}
    for name, sec in report.get("audit", {}).items():
        for k, v in (sec.get("headline") or {}).items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out[f"{name}/{k}"] = float(v)
    return out


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for p in PACKAGES:
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            pass
    return out


def _markdown_to_html(md: str, title: str) -> str:
    import markdown

    # The reports hold no intended HTML, but their text does (the "<redacted …>" markers, revealed excerpts): escape
    # "<" so that a browser shows it instead of dropping it as an unknown tag.
    body = markdown.markdown(md.replace("&", "&amp;").replace("<", "&lt;"), extensions=["tables"])
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title>"
        "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
        "img{max-width:100%}</style></head><body>" + body + "</body></html>"
    )


def _source_line(source: dict) -> str:
    if source.get("kind") == "reaudit":
        return (f"Audit only: the saved adapter of run `{source['run']}`, round trained there; audit overrides: "
                f"{', '.join(f'`{o}`' for o in source['overrides']) or 'none'}")
    if source.get("kind") == "external":
        adapter = (f", adapter `{source['adapter']}` (sha256 {source['adapter_sha256'][:12]})"
                   if source.get("adapter") else "")
        return f"Audit only: model `{source['model']}` (sha256 {source['model_sha256'][:12]}){adapter}"
    return ""


def write_round_report(out: Path, cfg, server_round: int, label: str, sections: dict, timings: dict,
                       train_log: dict, methods: dict, elapsed: float, source: dict | None = None,
                       participation: dict | None = None) -> dict:
    """``report.json``, ``report.md`` and ``report.html`` of one audited round. ``source`` says what was audited:
    a model trained by this run (``{"kind": "training"}``), a saved round re-audited, or an external model."""
    source = source or {"kind": "training"}
    report = to_jsonable({
        "round": server_round,
        "source": source,
        "label": label,
        "config_hash": cfg.hash(),
        "seed": cfg.seed,
        "task": cfg.task.name,
        "model": cfg.model.name,
        "strategy": cfg.strategy.name,
        "experiment": cfg.experiment,
        "train": train_log,
        "participation": participation or {},
        "audit": sections,
        "timings": {**timings, "elapsed_since_start": round(elapsed, 3)},
        "versions": versions(),
        "config": cfg.to_dict(),
    })
    atomic_write_json(out / "report.json", report)
    lines = [f"# Round {server_round} ({label.upper()}, {cfg.strategy.name}, task {cfg.task.name}, model {cfg.model.name})",
             "", f"config hash `{cfg.hash()}`, seed {cfg.seed}, experiment preset `{cfg.experiment}`", ""]
    if _source_line(source):
        lines += [_source_line(source), ""]
    if train_log:
        lines += ["## Training", "", "| client | loss | steps | examples | truncated to the sequence length |",
                  "|---|---|---|---|---|"]
        for client, m in sorted(train_log.items(), key=lambda kv: str(kv[0])):
            cut = f"{m['truncated-examples']} (at {m['max-seq-len']} tokens)" if "truncated-examples" in m else ""
            lines.append(f"| {client} | {m.get('train-loss', float('nan')):.4f} | {m.get('steps', '')} | "
                         f"{m.get('num-examples', '')} | {cut} |")
        lines.append("")
    for name, method in methods.items():
        sec = report["audit"].get(name, {})
        lines += [f"## {name} ({timings.get(name, 0):.1f} s)", ""]
        if sec.get("note"):
            lines += [f"> **Note.** {sec['note']}", ""]
        lines += [method.markdown(sec) or "", ""]
        for title, fname in method.render(sec, str(out)):
            lines += [f"![{title}]({fname})", ""]
    truth = report["audit"].get("ground_truth_scores")
    if truth:
        fmt = lambda v: "n/a" if v is None else f"{v:.3f}"  # noqa: E731
        lines += ["## Detectors against the ground truth", "",
                  "Positives: canaries with >= 2 copies; negatives: generic boilerplate and held-out samples.", "",
                  "| method | positives | negatives | precision | recall | ROC AUC |", "|---|---|---|---|---|---|"]
        lines += [f"| {m} | {v['positives']} | {v['negatives']} | {fmt(v['precision'])} | {fmt(v['recall'])} | "
                  f"{fmt(v['roc_auc'])} |" for m, v in truth.items()]
    md = "\n".join(lines)
    atomic_write_text(out / "report.md", md)
    atomic_write_text(out / "report.html", _markdown_to_html(md, f"fedmem round {server_round}"))
    return report


def _curves(history: list[dict]) -> dict[str, list[tuple[int, float]]]:
    curves: dict[str, list[tuple[int, float]]] = {}
    for rep in history:
        for k, v in headline(rep).items():
            curves.setdefault(k, []).append((rep["round"], v))
    return curves


def write_run_report(run_dir: Path, cfg, history: list[dict], methods: dict) -> None:
    """``summary.json`` (headline figures per round) and a run report with the round-by-round curves."""
    run_dir = Path(run_dir)
    curves = _curves(history)
    summary = {"config_hash": cfg.hash(), "label": history[0]["label"] if history else None,
               "strategy": cfg.strategy.name, "rounds": [h["round"] for h in history], "curves": curves}
    atomic_write_json(run_dir / "summary.json", to_jsonable(summary))
    lines = [f"# fedmem run `{cfg.hash()}`: {cfg.strategy.name}, task {cfg.task.name}, model {cfg.model.name}", ""]
    if curves:
        plt = pyplot()
        groups: dict[str, list[str]] = {}
        for k in curves:
            groups.setdefault(k.split("/")[0], []).append(k)
        for g, keys in groups.items():
            fig, ax = plt.subplots(figsize=(6, 3.5))
            for k in keys:
                xs, ys = zip(*curves[k])
                ax.plot(xs, ys, marker="o", label=k.split("/", 1)[1])
            ax.set_xlabel("round")
            ax.set_title(g)
            ax.legend(fontsize=7)
            fname = save_figure(fig, run_dir / f"curves_{g}.png", dpi=90)
            lines += [f"## {g}", "", f"![{g}]({fname})", ""]
        lines += ["## Headline figures per round", "", "| figure | " + " | ".join(f"r{r}" for r in summary["rounds"]) + " |",
                  "|---|" + "---|" * len(summary["rounds"])]
        for k, pts in curves.items():
            vals = dict(pts)
            lines.append(f"| {k} | " + " | ".join(f"{vals[r]:.4g}" if r in vals else "" for r in summary["rounds"]) + " |")
    lines += ["", "Per-round details: " + ", ".join(f"[round {r}](round_{r}/report.md)" for r in summary["rounds"])]
    md = "\n".join(lines)
    atomic_write_text(run_dir / "report.md", md)
    atomic_write_text(run_dir / "report.html", _markdown_to_html(md.replace(".md)", ".html)"), "fedmem run"))
