"""The console: one line per audited round from a real round report, written by the auditor to stderr; Flower's
log level and single output; the -v flags."""

import copy
import json
import logging
import re

import pytest

from fedmem.cli import verbosity
from fedmem.common.fmt import figure_text, pct_ci
from fedmem.reports.console import configure_logging, round_line


@pytest.fixture(scope="module")
def run(full_run):
    """The round reports of a real run (every audit method) and what it printed."""
    run_dir, err = full_run
    return [json.loads((run_dir / f"round_{r}" / "report.json").read_text()) for r in (0, 1)], err


def test_the_auditor_prints_one_line_per_audited_round(run):
    reports, err = run
    lines = [x for x in err.splitlines() if x.startswith("fedmem: round")]
    assert lines == [round_line(r, 1) for r in reports]


def test_a_round_line_holds_every_methods_headline(run):
    report = run[0][1]
    line = round_line(report, 1)
    audit = report["audit"]
    mr, pa, pearl = audit["mr"]["headline"], audit["pa"]["headline"], audit["pearl"]["headline"]
    assert line.startswith("fedmem: round 1/1  train loss ")
    loss = sum(m["train_loss"] for m in report["train"]) / len(report["train"])
    assert f"train loss {loss:.3f}" in line
    utility = audit["utility"]["headline"]
    assert f"ROUGE-L {pct_ci(utility['rouge_l'], utility['rouge_l_ci95'])}" in line
    assert f"MR_Intra {pct_ci(mr['intra'], mr['intra_ci95'])}  MR_Inter {pct_ci(mr['inter'], mr['inter_ci95'])}" in line
    # the control's excess leads, the paper's MR beside it
    assert line.index("MR_Intra excess") < line.index(f"MR_Intra {pct_ci(mr['intra'], mr['intra_ci95'])}")
    excess = {k: figure_text("difference", mr[k], mr[f"{k}_ci95"], mde=mr[f"{k}_mde"])
              for k in ("excess_intra", "excess_inter")}
    assert f"MR_Intra excess {excess['excess_intra']}  MR_Inter excess {excess['excess_inter']}" in line
    # an interval that holds 0 says the smallest excess this audit detects
    assert ("(under " in excess["excess_intra"] or "(no excess can show" in excess["excess_intra"]
            or not mr["excess_intra_ci95"][0] <= 0 <= mr["excess_intra_ci95"][1])
    assert f"PA-memorized {pa['pa_memorized']} of {pa['audited']}" in line
    assert f"PEARL TPR {pct_ci(pearl['tpr'], pearl['tpr_ci95'])}  PEARL FPR {pct_ci(pearl['fpr'], pearl['fpr_ci95'])}" in line
    assert re.search(r"  [\d.]+ s training \+ [\d.]+ s audit$", line), line
    assert "e+" not in line and "e-0" not in line  # no scientific notation


def test_round_0_has_no_training_and_a_method_left_out_leaves_no_trace(run):
    first = round_line(run[0][0], 3)
    assert first.startswith("fedmem: round 0/3  ROUGE-L ") and "train loss" not in first
    assert "training" not in first and first.endswith(" s audit")
    report = copy.deepcopy(run[0][1])
    for name in ("mr", "pearl"):
        report["audit"].pop(name)
        report["timings"].pop(name)
    line = round_line(report, 1)
    assert "ROUGE-L" in line and "PA-memorized" in line and "MR" not in line and "PEARL" not in line
    assert round_line({"round": 2}, 3) == "fedmem: round 2/3"
    assert round_line({"round": 0, "train": [], "audit": {"mr": {}}, "timings": {}}, 0) == "fedmem: round 0"
    assert round_line({"round": 0, "source": {"kind": "external"}}, 3) == "fedmem: round 0"


def test_train_loss_is_the_mean_over_the_clients_rows():
    line = round_line({"round": 1, "train": [{"client": 0, "train_loss": 0.5}, {"client": 1, "train_loss": 0.7}]}, 1)
    assert line == "fedmem: round 1/1  train loss 0.600"


@pytest.fixture
def flower_logger(monkeypatch):
    logger = logging.getLogger("flwr")
    saved = (logger.level, logger.propagate, [(h, h.level) for h in logger.handlers])
    monkeypatch.delenv("FLWR_LOG_LEVEL", raising=False)  # restored after the test
    yield logger
    logger.setLevel(saved[0])
    logger.propagate = saved[1]
    for handler, level in saved[2]:
        handler.setLevel(level)


def test_flower_logs_once_at_the_chosen_level(flower_logger, monkeypatch):
    import os

    import flwr.common.logger  # noqa: F401  Flower's own console handler on the "flwr" logger

    root = logging.getLogger()
    seen = []

    class Collect(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())

    collect = Collect()
    root.addHandler(collect)  # what an implicit logging.basicConfig() leaves on the root logger
    try:
        assert configure_logging(0) == logging.WARNING and os.environ["FLWR_LOG_LEVEL"] == "WARNING"
        assert not flower_logger.isEnabledFor(logging.INFO) and flower_logger.isEnabledFor(logging.WARNING)
        flower_logger.warning("only through Flower's own handler")
        assert seen == []  # not a second time through the root logger
        assert configure_logging(1) == logging.INFO and flower_logger.isEnabledFor(logging.INFO)
        assert configure_logging(2) == logging.DEBUG == configure_logging(5)
        assert all(h.level == logging.DEBUG for h in flower_logger.handlers)
    finally:
        root.removeHandler(collect)


def test_verbose_flags_are_taken_out_of_the_overrides():
    assert verbosity(["-v", "strategy.num_rounds=1"]) == (1, ["strategy.num_rounds=1"])
    assert verbosity(["-m", "-vv", "seed=0,1"]) == (2, ["-m", "seed=0,1"])
    assert verbosity(["--verbose", "run=x"]) == (1, ["run=x"])
    assert verbosity(["a=-v"]) == (0, ["a=-v"])


def test_an_excess_says_what_its_interval_cannot_rule_out_and_a_control_at_100_percent_says_none_can_show():
    assert figure_text("difference", 0.01, [-0.02, 0.04], mde=0.0294) == "+1.00 pts [-2.00, +4.00] (under 2.94 pts)"
    assert figure_text("difference", 0.05, [0.01, 0.09], mde=0.0294) == "+5.00 pts [+1.00, +9.00]"  # 0 outside
    assert figure_text("difference", -0.0083, [-0.0298, 0.066], mde=0.0) == \
        "-0.83 pts [-2.98, +6.60] (no excess can show: the control is at 100%)"
    assert figure_text("score", 0.52, [0.45, 0.6], mde=0.11, null=0.5) == "0.52 [0.45, 0.60] (under 0.61)"
