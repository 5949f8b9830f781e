"""The reports of a real run (centralized baseline, every audit method, test-sized tiny preset): report.json against
the JSON Schema, one key style, no training text in a redacted report, the run page's sections, and the HTML pages
rendered by a real headless browser."""

import gzip
import json
import re
from pathlib import Path

import pytest

from fedmem.config.experiment import from_dict
from fedmem.data import load_federated
from fedmem.reports.pages import REDACTED
from tests.conftest import report_schema_errors
from tests.helpers import CHROMIUM, rendered_text


@pytest.fixture(scope="module")
def run_dir(full_run):
    return full_run[0]


def reports(run_dir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(run_dir.glob("round_*/report.json"))]


def keys(obj, skip=("versions", "config")):
    """Every key of a nested JSON object, except under ``skip`` (package names and the user's own config)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield k
            if k not in skip:
                yield from keys(v, skip)
    elif isinstance(obj, list):
        for v in obj:
            yield from keys(v, skip)


def test_every_round_report_validates_against_the_schema(run_dir):
    reps = reports(run_dir)
    assert [r["round"] for r in reps] == [0, 1]
    for rep in reps:
        errors = report_schema_errors(rep)
        assert not errors, errors[:5]
        assert set(rep["audit"]) == {"utility", "mr", "pearl", "pa"}
        assert not [k for k in keys(rep) if "-" in k]  # one key style
        assert [c["id"] for c in rep["clients"]] == rep["audit"]["mr"]["clients"] == [0, 1]
    broken = json.loads(json.dumps(reps[1]))
    broken["audit"]["mr"]["headline"]["intra"] = "19%"  # the schema is not a formality: a wrong type fails it
    assert report_schema_errors(broken)


def test_summary_holds_curves_and_intervals(run_dir):
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["rounds"] == [0, 1] and summary["schema_version"] == 1
    for figure in ("mr/intra", "mr/inter", "pa/pa_rate", "utility/rouge_l"):
        (r0, v0), (r1, v1) = summary["curves"][figure]
        (c0, lo, hi) = summary["ci95"][figure][1]
        assert (r0, r1, c0) == (0, 1, 1) and lo <= v1 <= hi
    assert [r for r, _ in summary["curves"]["train/train_loss"]] == [1]  # round 0 trains nothing


def training_windows(cfg, width: int = 20) -> set[str]:
    data = load_federated(cfg.task, cfg.data, seed=cfg.seed, cache_dir=cfg.cache_dir)
    out = set()
    for c in data.clients:
        for r in c.train:
            for text in (r.mem_text, r.assistant):  # the private parts (r.user adds the task template)
                out.update(text[i:i + width] for i in range(len(text) - width + 1))
    return out


def test_a_redacted_run_writes_no_training_text(run_dir):
    cfg = from_dict({**json.loads(json.dumps(_config(run_dir))), "run_dir": str(run_dir)})
    assert not cfg.audit.reveal_text
    windows = training_windows(cfg)
    files = [p for p in run_dir.rglob("*") if p.suffix in (".json", ".md", ".html")]
    texts = {p: p.read_text() for p in files}
    for p in run_dir.rglob("*.jsonl.gz"):
        with gzip.open(p, "rt") as f:
            texts[p] = f.read()
    assert len(texts) >= 10
    for path, text in texts.items():
        leaks = {text[i:i + 20] for i in range(len(text) - 19)} & windows
        assert not leaks, f"{path.relative_to(run_dir)} holds training text: {sorted(leaks)[:3]}"


def _config(run_dir: Path) -> dict:
    import yaml

    return yaml.safe_load((run_dir / "config.yaml").read_text())


def test_run_page_opens_with_the_answer(run_dir):
    md = (run_dir / "report.md").read_text()
    order = ["## The answer at round 1", "**Memorization ratio, excess over held-out prefixes** (",
             "**The paper's memorization ratio.**", "**PEARL.**", "**Prior-Aware.**", "**Utility.**",
             "**Training.**", "**Run health.**", "## Over rounds", "## Headline figures per round",
             "## Detectors against the ground truth", "## Configuration"]
    at = [md.index(s) for s in order]
    assert at == sorted(at)
    assert REDACTED in md
    assert re.search(r"MR_Intra \d+\.\d\d% \[\d+\.\d\d, \d+\.\d\d\] vs MR_Inter \d+\.\d\d% \[", md)
    for png in re.findall(r"\]\(([^)]+\.png)\)", md):
        assert (run_dir / png).stat().st_size > 0
    assert "panel_mr_0.png" in md and "panel_train.png" in md


@pytest.mark.skipif(CHROMIUM is None, reason="no headless Chromium (apt-get install chromium)")
def test_html_pages_render_self_contained_in_a_browser(run_dir):
    for page in (run_dir / "report.html", run_dir / "round_1" / "report.html"):
        source = page.read_text()
        assert not re.search(r"""(?:src|href)=["']?(?:https?:)?//""", source)  # nothing to fetch from outside
        srcs = re.findall(r'<img[^>]* src="([^"]+)"', source)
        assert srcs and all(s.startswith("data:image/png;base64,") for s in srcs)  # figures travel with the page
        text = " ".join(rendered_text(page).split())
        assert "Training text is redacted on this page" in text and "<redacted sha256:… len=…>" in text
    run_text = " ".join(rendered_text(run_dir / "report.html").split())
    for heading in ("The answer at round 1", "Over rounds", "Headline figures per round",
                    "Detectors against the ground truth", "Configuration"):
        assert heading in run_text
    round_text = " ".join(rendered_text(run_dir / "round_1" / "report.html").split())
    for heading in ("Training", "Cross-client memorization ratio (MR)", "PEARL perturbation sensitivity",
                    "Prior-Aware memorization (PA)", "Utility on held-out test samples"):
        assert heading in round_text
    assert re.search(r"<redacted sha256:[0-9a-f]{12} len=\d+>", round_text)  # PA's excerpts, shown as markers


@pytest.mark.parametrize("ci, mde, verdict", [
    ([0.01, 0.09], 0.03, "generations from training prefixes match the training suffixes more often than "
                         "generations from held-out prefixes do"),
    ([-0.02, 0.04], 0.0294, "no excess over held-out prefixes is detectable at this sample size (an excess under "
                            "2.94 points would go unseen)"),
    ([-0.0298, 0.066], 0.0, "the held-out control is at 100% (every held-out prefix's generation matches a training "
                            "suffix), so no excess can show"),
])
def test_the_answer_reads_mrs_excess_against_its_interval_and_the_smallest_effect_it_detects(ci, mde, verdict):
    from fedmem.reports.views.mr import MemorizationRatioView

    headline = {"excess_total": sum(ci) / 2, "excess_total_ci95": ci, "excess_total_mde": mde}
    answer = MemorizationRatioView._excess_sentence({"headline": headline}, {"headline": headline})[0]
    assert f"): {verdict}" in answer, answer
