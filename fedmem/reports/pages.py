"""Reports: ``round_<r>/report.json`` + ``report.md`` / ``report.html`` per round, and the run page.

``report.json`` follows ``fedmem/reports/report.schema.json`` (its ``schema_version`` is :data:`SCHEMA_VERSION`): keys in
snake_case, a client always named by its integer id (the report's ``clients`` list gives each id its name from
the data), every audit section with a ``config`` and a ``headline`` of scalar figures, a figure's 95% interval
beside it as ``<figure>_ci95``. The HTML pages embed their figures, so a page can be mailed alone.

Every file is written atomically (temp file + rename), so an interrupted run never leaves a half-written report.
Training text is redacted by the methods themselves (``AuditPool.redact``) unless ``audit.reveal_text`` is set;
every page says which.
"""

from __future__ import annotations

import base64
import platform
import re
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from fedmem.audit import AUDIT_METHODS
from fedmem.audit.base import Figure, declared_figures
from fedmem.common.fmt import figure_text, pct
from fedmem.common.io import (
    atomic_write_json,
    atomic_write_text,
    pyplot,
    save_figure,
    to_jsonable,
)
from fedmem.reports.views import view_for

SCHEMA_VERSION = 1
PACKAGES = ("fedmem", "torch", "transformers", "peft", "flwr", "scipy", "spacy", "numpy")
REDACTED = ("Training text is redacted on this page: each excerpt shows as <redacted sha256:… len=…> (a hash of "
            "the text and its length). Run with audit.reveal_text=true to keep the text in the reports and records.")
COVERAGE = ("The intervals cover the audit's sampling (which samples were drawn, and the outputs sampled for them), "
            "not the variance of training itself: run other seeds (fedmem run -m seed=0,1,2) to see that, and compare "
            "figures to the last digit only between runs on the same hardware and thread count.")
AUDIT_COVERAGE = ("The intervals cover the audit's sampling (which samples were drawn, and the outputs sampled for "
                  "them) of this one model.")
REVEALED = ("This page shows training text (`audit.reveal_text=true`): share it only with those allowed to see the "
            "clients' data.")


# The run's own figures beside the methods': tabled, plotted and swept the same way (``<section>/<key>``).
RUN_FIGURES = {"defense/epsilon": Figure("epsilon", "ε (DP)", kind="score", ci=None, memorization=None, epsilon=True)}


def report_figures(methods: dict | None = None) -> dict[str, Figure]:
    """Every headline figure a report can hold, by its curve key: the methods' (``declared_figures``) and the run's."""
    return {**declared_figures(methods), **RUN_FIGURES}


def declared_headlines(report: dict) -> list[tuple[str, Figure, dict]]:
    """``(method, figure, the method's headline)`` for every figure a round report's methods declare
    (``AuditMethod.figures``) whose value the headline holds as a number, in the report's method order: the console
    line and the experiment trackers show these, so a method's figures reach both from its declarations alone."""
    out = []
    for name, section in (report.get("audit") or {}).items():
        h = (section or {}).get("headline") or {}
        method = AUDIT_METHODS.get(name)
        for figure in method.figures if method else ():
            value = h.get(figure.key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                out.append((name, figure, h))
    return out


def epsilon(report: dict) -> float | None:
    """The privacy budget spent up to this round (DP-FedAvg), or None without DP."""
    dp = (report.get("defense") or {}).get("dp")
    return float(dp["epsilon"]) if dp else None


def headline(report: dict) -> dict[str, float]:
    """A round report's scalar headline figures, as ``<method>/<figure>`` (plotted and tabled as curves), and the
    run's own (``RUN_FIGURES``)."""
    out = {}
    if epsilon(report) is not None:
        out["defense/epsilon"] = epsilon(report)
    for name, sec in report.get("audit", {}).items():
        for k, v in (sec.get("headline") or {}).items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out[f"{name}/{k}"] = float(v)
    loss = mean_train_loss(report)
    if loss is not None:
        out["train/train_loss"] = loss
    if "health" in report:  # 1 where the model was degenerate: the sweeps mark such a point as destroyed
        out["health/degenerate"] = float(bool(report["health"]["degenerate"]))
    return out


def intervals(report: dict) -> dict[str, list[float]]:
    """The 95% intervals of a round's headline figures, as ``<method>/<figure>``: [lo, hi]."""
    out = {}
    for name, sec in report.get("audit", {}).items():
        for k, v in (sec.get("headline") or {}).items():
            if k.endswith("_ci95") and v:
                out[f"{name}/{k[: -len('_ci95')]}"] = [float(v[0]), float(v[1])]
    return out


def mean_train_loss(report: dict) -> float | None:
    losses = [row["train_loss"] for row in report.get("train", []) if row.get("train_loss") is not None]
    return sum(losses) / len(losses) if losses else None


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for p in PACKAGES:
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            pass
    return out


CSS = ("body{font-family:system-ui,sans-serif;max-width:1150px;margin:2em auto;padding:0 1em;color:#222;"
       "line-height:1.45}table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;"
       "text-align:left;vertical-align:top}th{background:#f4f4f4}img{max-width:100%}"
       "blockquote{margin:1em 0;padding:.5em 1em;background:#fff8e1;border-left:4px solid #f0b400}"
       "h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}code{background:#f4f4f4;padding:0 3px}")


def markdown_to_html(md: str, title: str, base_dir: Path | None = None) -> str:
    """A self-contained HTML page of a Markdown report: figures in ``base_dir`` embedded as data URIs, links to
    sibling ``.md`` pages pointed at their ``.html`` twins."""
    import markdown

    # The reports hold no intended HTML, but their text does (the "<redacted …>" markers, revealed excerpts): escape
    # "<" so that a browser shows it instead of dropping it as an unknown tag.
    body = markdown.markdown(md.replace("&", "&amp;").replace("<", "&lt;"), extensions=["tables"])
    body = re.sub(r'href="([^":]+)\.md"', r'href="\1.html"', body)
    if base_dir is not None:
        def embed(m: re.Match) -> str:
            path = Path(base_dir) / m.group(1)
            if not path.is_file():
                return m.group(0)
            return f'src="data:image/png;base64,{base64.b64encode(path.read_bytes()).decode()}"'

        body = re.sub(r'src="([^":]+\.png)"', embed, body)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title><style>{CSS}</style></head>"
            f"<body>{body}</body></html>")


def _source_line(source: dict) -> str:
    lines = []
    if source.get("kind") == "reaudit":
        lines.append(f"Audit only: the saved adapter of run `{source['run']}`, round trained there; audit overrides: "
                     f"{', '.join(f'`{o}`' for o in source['overrides']) or 'none'}")
    if source.get("kind") == "external":
        adapter = (f", adapter `{source['adapter']}` (sha256 {source['adapter_sha256'][:12]})"
                   if source.get("adapter") else "")
        lines.append(f"Audit only: model `{source['model']}` (sha256 {source['model_sha256'][:12]}){adapter}")
        member = source.get("membership") or {}
        lines.append("Members and non-members: " + (f"the data's column `{member['column']}` (train / test)"
                                                     if member.get("source") == "column" else
                                                     "fedmem's own seeded split of the data, which says nothing "
                                                     "about what this model was trained on"))
    if source.get("gguf_file"):
        lines.append(_gguf_base(source))
    return "\n\n".join(lines)


def _gguf_base(source: dict) -> str:
    return f"Base model: GGUF file `{source['gguf_file']}` (sha256 {source['gguf_sha256'][:12]})"


def train_rows(train_log: dict | list) -> list[dict]:
    """The round's training log as rows ``{"client": id, ...}`` in client order (``client`` is null for the
    centralized baseline, which trains on every client's data). Rows already (a re-audit copies a report's
    training log) pass as they are."""
    if isinstance(train_log, list):
        return train_log
    rows = []
    for key, metrics in train_log.items():
        row = {k: v for k, v in metrics.items() if k != "partition_id"}
        rows.append({"client": int(key) if str(key).isdigit() else None, **row})
    return sorted(rows, key=lambda r: -1 if r["client"] is None else r["client"])


def client_table(run) -> list[dict]:
    """``[{"id", "name", "train_size", ...}]``: every client of the run, in id order, with what its audit pool left
    out: held-out texts that are training text, and samples training cut at the trained length."""
    empty = {c.get("client"): c.get("rows_dropped_empty") for c in (run.ground_truth or {}).get("clients", [])}
    return [{"id": c, "name": run.client_names[c], "train_size": run.train_sizes[c],
             "heldout_trained": run.heldout_trained.get(c, 0),
             "cut_at_trained_length": run.cut_at_trained_length.get(c, {}),
             **({"left_out": run.left_out[c]} if c in run.left_out else {}),
             **({"rows_dropped_empty": empty[c]} if empty.get(c) is not None else {})} for c in run.clients]


def _note(reveal: bool) -> list[str]:
    return [f"> {REVEALED if reveal else REDACTED}", ""]


@dataclass
class RoundResult:
    """One audited round, as the auditor hands it to the reports. ``source`` says what was audited: a model trained
    by this run (``{"kind": "training"}``), a saved round re-audited, or an external model; ``sections``: each
    method's report section; ``truth``: each method scored against the data's ground truth, when it has one;
    ``agreement``: how the methods' per-sample verdicts agree (``fedmem.audit.agreement``); ``participation``: which
    clients were sampled, trained and failed; ``defense``: DP's budget and clipping (``dp``) and what deduplication
    removed (``dedup``), each None when off."""

    round: int
    label: str
    sections: dict
    timings: dict
    elapsed: float
    source: dict = field(default_factory=lambda: {"kind": "training"})
    train_log: dict = field(default_factory=dict)
    participation: dict = field(default_factory=dict)
    truth: dict = field(default_factory=dict)
    agreement: dict = field(default_factory=dict)
    defense: dict = field(default_factory=dict)
    health: dict = field(default_factory=dict)  # whether the model could be audited (fedmem.engine.health)


def round_report(result: RoundResult, cfg, run) -> dict:
    """``report.json`` of one audited round (``run``: the run's ``AuditPool``, its clients and their names)."""
    return to_jsonable({
        "schema_version": SCHEMA_VERSION,
        "round": result.round,
        "source": result.source,
        "label": result.label,
        "config_hash": cfg.hash(),
        "seed": cfg.seed,
        "task": cfg.task.name,
        "model": cfg.model.name,
        "strategy": cfg.strategy.name,
        "experiment": cfg.experiment,
        "reveal_text": run.reveal_text,
        "clients": client_table(run),
        "train": train_rows(result.train_log),
        "participation": result.participation,
        "defense": result.defense,
        **({"health": result.health} if result.health else {}),
        "audit": result.sections,
        "ground_truth_scores": result.truth,
        "agreement": result.agreement,
        "timings": {**result.timings, "elapsed_since_start": round(result.elapsed, 3)},
        "versions": versions(),
        "config": cfg.to_dict(),
    })


def _training_table(report: dict) -> list[str]:
    names = {c["id"]: c["name"] for c in report["clients"]}
    lines = ["## Training", "", "| client | train loss | steps | examples | cut to the sequence length |",
             "|---|---|---|---|---|"]
    for m in report["train"]:
        cut = (f"{m['truncated_examples']} (at {m['max_seq_len']} tokens)" if "truncated_examples" in m else "")
        who = "all (centralized)" if m["client"] is None else names.get(m["client"], m["client"])
        loss = "not finite: trained nothing" if m.get("train_loss") is None else f"{m['train_loss']:.4f}"
        lines.append(f"| {who} | {loss} | {m.get('steps', '')} | {m.get('num_examples', '')} | {cut} |")
    return [*lines, ""]


def _defense_lines(defense: dict, names: dict) -> list[str]:
    """The round page's Defense section: DP's budget and clipping, deduplication's removals; nothing when off."""
    dp, dedup = defense.get("dp"), defense.get("dedup")
    if not dp and not dedup:
        return []
    lines = ["## Defense", ""]
    if dp:
        clipped = (f"; {dp['clipped']} of {len(dp['update_norms'])} client updates were clipped this round (their "
                   f"norms: {', '.join(f'{n:.3g}' for n in dp['update_norms'])})" if "clipped" in dp else "")
        lines += [f"**DP-FedAvg**: updates clipped to L2 norm {dp['clipping_norm']:.4g} ({dp['clipping']} clipping, on "
                  f"the {dp['side']}), Gaussian noise with multiplier z = {dp['noise_multiplier']:g} on their "
                  f"equal-weight average{clipped}.", "",
                  f"**Privacy budget after {dp['rounds']} round(s): ε = {dp['epsilon']:.3g} at δ = {dp['delta']:g}** "
                  f"({dp['sampled']} of {dp['population']} clients per round, sampling rate {dp['sampling_rate']:.3g}; "
                  f"{dp['accountant']}).", ""]
    if dedup:
        rule = f", estimated Jaccard similarity ≥ {dedup['threshold']:g}" if dedup.get("threshold") else ""
        lines += [f"**Deduplication** ({dedup['mode']}{rule}) removed from each client's training data before "
                  "training:", "", "| client | records before | removed | of them canary copies |", "|---|---|---|---|",
                  *[f"| {names.get(c['client'], c['client'])} | {c['before']} | {c['removed']} | "
                    f"{c['canary_copies_removed']} |" for c in dedup["clients"]], ""]
    return lines


def round_markdown(report: dict, cfg, methods: dict, out: Path) -> str:
    """The round page of ``report``: training, then each method's section as its view renders it (plots written
    into ``out``), then the ground-truth scores and the methods' agreement."""
    server_round, label, source = report["round"], report["label"], report["source"]
    title = (f"# Audit of model `{source['model']}`" + (f" with adapter `{source['adapter']}`" if source.get("adapter")
                                                        else "") + f", task {cfg.task.name}"
             if source.get("kind") == "external" else
             f"# Round {server_round}: {label.upper()}, {cfg.strategy.name}, task {cfg.task.name}, model "
             f"{cfg.model.name}")
    lines = [title, "",
             f"config hash `{cfg.hash()}`, seed {cfg.seed}, experiment preset `{cfg.experiment}`; "
             f"[run page](../report.md); every figure of this page and more: [report.json](report.json)", "",
             *_note(report["reveal_text"])]
    if _source_line(report["source"]):
        lines += [_source_line(report["source"]), ""]
    if report["train"]:
        lines += _training_table(report)
    lines += _defense_lines(report.get("defense") or {}, {c["id"]: c["name"] for c in report["clients"]})
    for name, method in methods.items():
        sec, view = report["audit"].get(name, {}), view_for(method)
        lines += [f"## {method.title or name} ({report['timings'].get(name, 0):.1f} s)", ""]
        if sec.get("note"):
            lines += [f"> **Note.** {sec['note']}", ""]
        if sec.get("degenerate"):  # a section of a degenerate model is its note: nothing for its view to read
            continue
        lines += [view.markdown(sec) or "", ""]
        for title, fname in view.render(sec, str(out)):
            lines += [f"![{title}]({fname})", ""]
    if report.get("ground_truth_scores"):
        lines += _truth_table(report["ground_truth_scores"])
    if report.get("agreement"):
        lines += _agreement_table(report["agreement"])
    return "\n".join(lines)


def write_round_report(out: Path, cfg, result: RoundResult, methods: dict, run) -> dict:
    """``report.json``, ``report.md`` and ``report.html`` of one audited round, built, then rendered."""
    report = round_report(result, cfg, run)
    atomic_write_json(out / "report.json", report)
    md = round_markdown(report, cfg, methods, out)
    atomic_write_text(out / "report.md", md)
    atomic_write_text(out / "report.html", markdown_to_html(md, f"fedmem round {result.round}", out))
    return report


def _agreement_table(agreed: dict) -> list[str]:
    """The methods' agreement on the common draw: Cohen's kappa with its interval, the Jaccard overlap and the samples
    in common per pair ("too few (n)" below the minimum); then Spearman's rank correlation, the canary table and the
    agreement with the planted truth."""
    labels, size = agreed["methods"], len(agreed["methods"])
    fmt = lambda v: "–" if v is None else f"{v:.2f}"  # noqa: E731

    def pair(i: int, j: int) -> str:
        ci = agreed["kappa_ci95"][i][j]
        interval = f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""
        return (agreed["reason"][i][j] or
                f"{fmt(agreed['kappa'][i][j])}{interval} · {fmt(agreed['jaccard'][i][j])} · {agreed['n'][i][j]}")

    lines = ["## Agreement between methods", "",
             f"On the common draw: the same {agreed['common']} ordinary training samples, drawn at random per client "
             "(audit.common_draw), that every method audits; canaries are set apart below. Per pair: Cohen's kappa of "
             f"the two decisions with its 95% bootstrap interval ({agreed['resamples']} resamples), the Jaccard "
             f"overlap of the samples they flag, and n, the common samples both decided; a pair with fewer than "
             f"{agreed['min_common']} has no figures (too few). A dash: undefined (no sample flagged by either, or "
             "both constant).", "",
             "| kappa [95% CI] · Jaccard · n | " + " | ".join(labels) + " | flagged |", "|---" * (size + 2) + "|"]
    for i, a in enumerate(labels):
        cells = [pair(i, j) for j in range(size)]
        lines.append(f"| {a} | " + " | ".join(cells) + f" | {agreed['flagged'][i]} of {agreed['audited'][i]} |")
    lines += ["", "| Spearman | " + " | ".join(labels) + " |", "|---" * (size + 1) + "|"]
    lines += [f"| {a} | " + " | ".join(agreed["reason"][i][j] or fmt(agreed["spearman"][i][j]) for j in range(size))
              + " |" for i, a in enumerate(labels)]
    if agreed.get("canaries"):
        lines += ["", "Planted canaries, by copies: flagged of audited (a dash: the method audits none of them).", "",
                  "| canary copies | " + " | ".join(labels) + " |", "|---" * (size + 1) + "|"]
        for group, by_label in agreed["canaries"].items():
            counts = [by_label.get(lab, {"audited": 0}) for lab in labels]
            lines.append(f"| {group} | " + " | ".join(
                f"{c['flagged']} of {c['audited']}" if c["audited"] else "–" for c in counts) + " |")
    if any(t.get("n") for t in (agreed.get("truth") or {}).values()):  # data without planted truth: no such line
        lines += ["", "Against the planted truth (Cohen's kappa, n samples with known truth): " + "; ".join(
            f"{lab} {fmt(t['kappa'])} (n {t['n']})" for lab, t in agreed["truth"].items()) + "."]
    return lines + [""]


def _truth_table(truth: dict) -> list[str]:
    fmt = lambda v: "n/a" if v is None else f"{v:.2f}"  # noqa: E731
    return ["## Detectors against the ground truth", "",
            "Positives: planted canaries with at least 2 copies; negatives: generic boilerplate and held-out "
            "samples.", "",
            "| method | positives | negatives | precision | recall | ROC AUC |", "|---|---|---|---|---|---|",
            *[f"| {m} | {v['positives']} | {v['negatives']} | {pct(v['precision'])} | {pct(v['recall'])} | "
              f"{fmt(v['roc_auc'])} |" for m, v in truth.items()], ""]


def _curves(history: list[dict]) -> tuple[dict, dict]:
    """({figure: [(round, value)]}, {figure: [(round, lo, hi)]}) over the audited rounds."""
    curves: dict[str, list] = {}
    bands: dict[str, list] = {}
    for rep in history:
        for k, v in headline(rep).items():
            curves.setdefault(k, []).append((rep["round"], v))
        for k, (lo, hi) in intervals(rep).items():
            bands.setdefault(k, []).append((rep["round"], lo, hi))
    return curves, bands


def _panel(run_dir: Path, fname: str, title: str, y_label: str, lines: dict[str, str], curves: dict, bands: dict,
           percent: bool) -> str | None:
    """One plot over rounds: a line per figure, its 95% interval as a band, integer rounds, the legend beside."""
    shown = {k: label for k, label in lines.items() if k in curves}
    if not shown:
        return None
    plt = pyplot()
    scale = 100.0 if percent else 1.0
    fig, ax = plt.subplots(figsize=(7.2, 3.2), layout="constrained")
    for k, label in shown.items():
        xs, ys = zip(*curves[k])
        (line,) = ax.plot(xs, [scale * y for y in ys], marker="o", label=label)
        if k in bands:
            bx, lo, hi = zip(*bands[k])
            ax.fill_between(bx, [scale * v for v in lo], [scale * v for v in hi], color=line.get_color(), alpha=0.15,
                            lw=0)
    rounds = sorted({x for k in shown for x, _ in curves[k]})
    ax.set_xticks(rounds)
    ax.set_xlabel("round (0: before fine-tuning)")
    ax.set_ylabel(y_label)
    ax.set_title(title, fontsize=10)
    if percent:
        ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return save_figure(fig, run_dir / fname, dpi=90)


def _configuration(cfg, source: dict, methods: dict) -> list[str]:
    """The run page's configuration table; ``source``: the first round report's, which names a GGUF base model's
    file and sha256."""
    d = cfg.to_dict()
    m, t, s, a, data = d["model"], d["train"], d["strategy"], d["audit"], d["data"]
    if source.get("kind") == "external":  # what was audited, not how a model was trained
        rows = [("experiment", f"`{d['experiment']}` (the audit's rules), seed {d['seed']}, config hash `{cfg.hash()}`"),
                ("task / data", f"{d['task']['name']}; {data['source']} data, {data['num_clients']} clients"),
                ("model", f"`{source.get('model')}` (sha256 {str(source.get('model_sha256'))[:12]})"
                 + (f", adapter `{source['adapter']}` (sha256 {str(source.get('adapter_sha256'))[:12]})"
                    if source.get("adapter") else ", no adapter")),
                ("audit", f"prefix {a['prefix_len']} tokens, {a['decoding']['strategy']} decoding; methods: "
                          f"{', '.join(a['methods'])}; text {'shown' if a['reveal_text'] else 'redacted'}")]
        return ["## Configuration", "", "| setting | value |", "|---|---|", *[f"| {k} | {v} |" for k, v in rows],
                "", "The full resolved configuration: [config.yaml](config.yaml).", ""]
    rows = [
        ("experiment", f"`{d['experiment']}`, seed {d['seed']}, config hash `{cfg.hash()}`"),
        ("task / data", f"{d['task']['name']}; {data['source']} data, {data['num_clients']} clients x "
                        f"{data['train_per_client']} train / {data['test_per_client']} test records"),
        ("model", f"{m['name']}" + (f" (`{m['path']}`)" if m.get("path") else "") +
         (f" (GGUF file `{source['gguf_file']}`, sha256 {source['gguf_sha256'][:12]})" if source.get("gguf_file")
          else "") +
         f"; LoRA r {m['lora_r']}, alpha {m['lora_alpha']}, dropout {m['lora_dropout']}; sequence length "
         f"{m['max_seq_len']}"),
        ("training", f"{s['name']}, {s['num_rounds']} rounds" +
         "".join(f", {k.replace('_', ' ')} {v}" for k, v in cfg.strategy.own_settings().items()) +
         f", fraction of clients per round {s['fraction_train']}; {t['local_epochs']} local epoch(s), learning rate "
         f"{t['lr']}, batch {t['batch_size']} (effective {t['effective_batch']})"),
        ("audit", f"prefix {a['prefix_len']} tokens (the suffix: the rest of the text), {a['decoding']['strategy']} "
                  f"decoding; methods: {', '.join(a['methods'])}; text {'shown' if a['reveal_text'] else 'redacted'}"),
    ]
    for name in a["methods"]:
        sec, keys = a.get(name) or {}, getattr(methods.get(name), "size_keys", ())
        size = {k: sec[k] for k in keys if k in sec}
        if size:
            rows.append((f"audit.{name}", ", ".join(f"{k} {v}" for k, v in size.items())))
    return ["## Configuration", "", "| setting | value |", "|---|---|", *[f"| {k} | {v} |" for k, v in rows], "",
            "The full resolved configuration: [config.yaml](config.yaml).", ""]


LEFT_OUT = {"duplicate": "repeated", "too_short": "too short for a prefix and 20 suffix tokens",
            "trained_elsewhere": "training text elsewhere"}


def _dropped(report: dict) -> str | None:
    """One line on the rows of the data no client got (an empty field), per client, and on the records no audit draw
    could take, per split and reason; None when nothing was left out."""
    clients = report.get("clients") or []
    parts = []
    if per := [(c["name"], c["rows_dropped_empty"]) for c in clients if c.get("rows_dropped_empty")]:
        parts.append(f"{sum(n for _, n in per)} rows dropped for an empty field before the split: "
                     + ", ".join(f"{name} {n}" for name, n in per))
    for split, name in (("train", "training"), ("test", "held-out")):
        totals = {r: sum((c.get("left_out") or {}).get(split, {}).get(r, 0) for c in clients) for r in LEFT_OUT}
        if said := ", ".join(f"{n} {LEFT_OUT[r]}" for r, n in totals.items() if n):
            parts.append(f"{name} records no audit draw could take: {said}")
    return "**Data.** " + "; ".join(parts) + "." if parts else None


def _health(history: list[dict]) -> str:
    """One line on whether every round trained every sampled client and left a model that could be audited."""
    problems = []
    for rep in history:
        p = rep.get("participation") or {}
        failed = len(p.get("failed") or []) + int(p.get("no_reply") or 0)
        if failed:
            problems.append(f"round {rep['round']}: {failed} of {p.get('sampled')} sampled clients sent no update")
        if (rep.get("health") or {}).get("degenerate"):
            problems.append(f"round {rep['round']}: the global model is degenerate ({rep['health']['reason']}), "
                            "nothing of it could be audited")
    if problems:
        return "**Run health.** " + "; ".join(problems) + "."
    return "**Run health.** Every sampled client sent its update in every round."


def write_run_report(run_dir: Path, cfg, history: list[dict], methods: dict) -> None:
    """``summary.json`` (headline figures and their intervals per round) and the run page: the answer at the last
    round, one panel per metric over rounds, the ground-truth scores, the configuration."""
    run_dir = Path(run_dir)
    curves, bands = _curves(history)
    rounds = [h["round"] for h in history]
    summary = {"schema_version": SCHEMA_VERSION, "config_hash": cfg.hash(),
               "label": history[0]["label"] if history else None, "strategy": cfg.strategy.name, "rounds": rounds,
               "curves": curves, "ci95": bands}
    atomic_write_json(run_dir / "summary.json", to_jsonable(summary))
    reveal = bool(cfg.audit.reveal_text)
    source = history[0]["source"] if history else {}
    external = source.get("kind") == "external"  # a model fedmem did not train: no rounds, no training to describe
    title = (f"# fedmem audit: model `{source['model']}`" + (f", adapter `{source['adapter']}`" if source.get("adapter")
                                                              else "") + f", task {cfg.task.name}") if external else \
        f"# fedmem run: {cfg.strategy.name}, task {cfg.task.name}, model {cfg.model.name}"
    lines = [title, "", *_note(reveal), *([_source_line(source), ""] if external else [])]
    if history:
        first, last = history[0], history[-1]
        lines += ["## What the audit finds" if external else f"## The answer at round {last['round']}", "",
                  f"Every rate with its 95% interval in brackets. {AUDIT_COVERAGE if external else COVERAGE}", ""]
        views = {name: view_for(method) for name, method in methods.items()}
        # the memorization answers first (methods with a figure where higher means more memorization), then the rest
        answers = sorted(methods, key=lambda name: not any(f.memorization for f in methods[name].figures))
        for name in answers:
            if name in last["audit"] and name in first["audit"]:
                if last["audit"][name].get("degenerate"):
                    lines += [f"**{methods[name].title or name}.** {last['audit'][name]['note']}", ""]
                    continue
                text = views[name].summary(first["audit"][name], last["audit"][name])
                if text:
                    lines += [text, ""]
        loss = [(h["round"], mean_train_loss(h)) for h in history if mean_train_loss(h) is not None]
        if len(loss) > 1:
            lines += [f"**Training.** Mean train loss over clients {loss[0][1]:.3f} (round {loss[0][0]}) → "
                      f"{loss[-1][1]:.3f} (round {loss[-1][0]}).", ""]
        elif loss:
            lines += [f"**Training.** Mean train loss over clients {loss[0][1]:.3f} (round {loss[0][0]}).", ""]
        if not external:
            lines += [_health(history), ""]
        if dropped := _dropped(first):
            lines += [dropped, ""]
        lines += ["## Over rounds" if len(rounds) > 1 else "## The round's figures", ""]
        panels = [(name, f"panel_{name}_{i}.png", p) for name, view in views.items()
                  for i, p in enumerate(view.panels)]
        for name, fname, p in panels:
            made = _panel(run_dir, fname, p.title, p.y_label, {f"{name}/{k}": v for k, v in p.figures.items()},
                          curves, bands, p.percent)
            if made:
                lines += [f"![{p.title}]({made})", ""]
        made = _panel(run_dir, "panel_train.png", "Training", "mean train loss", {"train/train_loss": "train loss"},
                      curves, bands, percent=False)
        if made:
            lines += [f"![Training]({made})", ""]
        for name, view in views.items():
            secs = [h["audit"][name] for h in history if name in h["audit"]]
            if len(secs) == len(history) and not any(s.get("degenerate") for s in secs):
                for title, fname in view.render_run(rounds, secs, str(run_dir)):
                    lines += [f"![{title}]({fname})", ""]
        lines += _figure_table(curves, rounds, bands, report_figures(methods))
        if last.get("ground_truth_scores"):
            lines += _truth_table(last["ground_truth_scores"])
        if last.get("agreement"):
            lines += _agreement_table(last["agreement"])
    lines += _configuration(cfg, history[0]["source"] if history else {}, methods)
    lines += ["Round pages: " + ", ".join(f"[round {r}](round_{r}/report.md)" for r in rounds)]
    md = "\n".join(lines)
    atomic_write_text(run_dir / "report.md", md)
    atomic_write_text(run_dir / "report.html", markdown_to_html(md, "fedmem run", run_dir))


def _figure_table(curves: dict, rounds: list[int], bands: dict, figures: dict) -> list[str]:
    """Every declared headline figure per round, by its kind (``figures``: ``report_figures``) with its interval,
    labelled as declared (every other headline number is in ``summary.json``)."""
    def cell(k: str, r: int) -> str:
        v = dict(curves[k]).get(r)
        if v is None:
            return ""
        if k not in figures:
            return f"{v:.4g}"
        ci = next(([lo, hi] for rr, lo, hi in bands.get(k, []) if rr == r), None)
        f = figures[k]
        mde = dict(curves.get(f"{k}_mde", [])).get(r) if f.mde else None
        return figure_text(f.kind, v, ci, mde=mde, null=f.null)

    def name(k: str) -> str:
        return f"{figures[k].label} (`{k}`)" if k in figures else f"`{k}`"

    # declared figures only, each in its one format (summary.json holds every headline number); a detectable effect
    # reads beside its figure
    shown = [k for k in curves if k in figures]
    lines = ["## Headline figures per round", "",
             "Rates in percent, differences in percentage points, 95% intervals in brackets; where an interval holds "
             "no effect, the smallest effect the audit detects at its size (\"under X\").", "",
             "| figure | " + " | ".join(f"round {r}" for r in rounds) + " |", "|---|" + "---|" * len(rounds)]
    lines += [f"| {name(k)} | " + " | ".join(cell(k, r) for r in rounds) + " |" for k in shown]
    return lines + [""]
