"""Extending fedmem: a new audit method, data source or strategy is one module of its own (and its YAML). Each test
registers a toy one from here, touches no other file, and checks that it shows up everywhere a built-in one does."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import numpy as np
import pytest

from fedmem.audit import AUDIT_METHODS, AuditMethod, Figure, RoundContext, register
from fedmem.audit.intervals import rate
from fedmem.cli import main
from fedmem.config import check_fields, option


@dataclass
class ConfidentConfig:
    n: int = option(4, "train samples audited per client")
    log10_p: float = option(-30.0, "a suffix is 'confident' when log10 P(s|p) of its first 16 tokens is above this")

    def __post_init__(self):
        check_fields(self, "audit.confident")


class Confident(AuditMethod):
    """A toy method: the share of audited training suffixes the model predicts above a likelihood threshold."""

    name = "confident"
    Config = ConfidentConfig
    title = "Confident suffixes"
    figures = (Figure("rate", "confident suffixes", console=True),
               Figure("confident", "confident", kind="count", of="audited", sweep=None))

    @classmethod
    def samples_needed(cls, cfg: ConfidentConfig) -> dict[str, int]:
        return {"train": cfg.n}

    def audit(self, ctx: RoundContext) -> dict:
        samples = [s for c in self.run.clients for s in self.run.train[c][: self.cfg.n]]
        log10_p = ctx.logprobs([(s.prompt_ids, s.suffix_ids[:16]) for s in samples]) / np.log(10)
        k, n = int((log10_p > self.cfg.log10_p).sum()), len(samples)
        r = rate(k, n)
        return {"config": asdict(self.cfg), "headline": {"rate": r["rate"], "rate_ci95": r["ci95"],
                                                         "confident": k, "audited": n}}


@pytest.fixture
def confident():
    register(Confident)
    yield Confident
    AUDIT_METHODS.pop(Confident.name)


def test_a_new_audit_method_shows_on_the_console_both_pages_summary_and_sweep_tables(confident, full_run, capsys):
    run_dir, _ = full_run
    main(["audit", "-m", f"run={run_dir}", "name=confident", "audit.methods=[confident]",
          "audit.confident.log10_p=-1000,0"])  # everything confident, then nothing
    sweep = run_dir / "audits" / "confident"
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.startswith("fedmem: round")]
    assert len(lines) == 4 and all("  confident suffixes " in x for x in lines), err  # 2 jobs x rounds 0, 1

    for job, expected in (("0", 1.0), ("1", 0.0)):
        summary = json.loads((sweep / job / "summary.json").read_text())
        assert [v for _, v in summary["curves"]["confident/rate"]] == [expected, expected]
        assert [r for r, _, _ in summary["ci95"]["confident/rate"]] == [0, 1]
        report = json.loads((sweep / job / "round_1" / "report.json").read_text())
        audited = report["audit"]["confident"]["headline"]["audited"]
        assert audited == 4 * len(report["clients"])
        round_page = (sweep / job / "round_1" / "report.md").read_text()
        assert "## Confident suffixes (" in round_page and "| confident suffixes | " in round_page
        assert f"| confident | {int(expected * audited)} of {audited} |" in round_page
        assert "<h2>Confident suffixes" in (sweep / job / "round_1" / "report.html").read_text()
        run_page = (sweep / job / "report.md").read_text()
        assert "**Confident suffixes.** confident suffixes " in run_page  # the answer at the last round
        assert "| confident suffixes (`confident/rate`) | " in run_page  # the figures per round
        assert "panel_confident_0.png" in run_page and (sweep / job / "panel_confident_0.png").is_file()
        assert "| audit.confident | n 4 |" not in run_page  # declared no size keys: no configuration row

    tables = json.loads((sweep / "sweep_tables.json").read_text())
    [table] = tables["tables"].values()
    assert table["columns"] == {"confident/rate": "confident suffixes"}
    assert [row["figures"]["confident/rate"]["mean"] for row in table["rows"]] == [1.0, 0.0]
    assert "| confident suffixes |" in (sweep / "sweep_report.md").read_text().replace("n | confident", "| confident")
