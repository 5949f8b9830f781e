"""What a run prints while it goes: one ``fedmem:`` line per audited round, and Flower's log lines once, at the
level the user chose (``fedmem run -v``).

Both go to stderr, beside the progress bars (``fedmem.common.progress``); stdout keeps the run directory as its last line.
Flower is configured through the standard ``logging`` module and its ``FLWR_LOG_LEVEL`` variable only: this module
does not import flwr (only ``clients/`` and ``server/`` do).
"""

from __future__ import annotations

import logging
import os
import sys
import threading

from fedmem.reports.pages import declared_headlines, epsilon, mean_train_loss
from fedmem.reports.views import headline_text

FLOWER_LEVELS = (logging.WARNING, logging.INFO, logging.DEBUG)  # no -v, -v, -vv

_lines = threading.Lock()
_ended = False  # the process's last line is printed: a round's line from a thread still at work comes too late


def say(line: str) -> None:
    """A round's line, on stderr; nothing once :func:`say_last` has printed the process's last line."""
    with _lines:
        if not _ended:
            print(line, file=sys.stderr, flush=True)


def say_last(line: str) -> None:
    """The line a process ends with (Ctrl-C's, before it exits at once): the ServerApp's thread may be writing a
    round's report as the signal comes, and its round line must not follow the one that says how the run ended."""
    global _ended
    with _lines:
        _ended = True
        print(line, file=sys.stderr, flush=True)


def configure_logging(verbosity: int = 0) -> int:
    """Flower's log lines once, at the level asked for: 0 warnings and errors, 1 (``-v``) also Flower's INFO lines
    (rounds, sampling, aggregated metrics, its final results), 2 or more (``-vv``) also DEBUG. Returns the level."""
    level = FLOWER_LEVELS[min(max(verbosity, 0), len(FLOWER_LEVELS) - 1)]
    # Flower reads this when it is imported: the processes started from here (Ray's actors) log at the same level
    os.environ["FLWR_LOG_LEVEL"] = logging.getLevelName(level)
    flwr = logging.getLogger("flwr")
    flwr.setLevel(level)
    for handler in flwr.handlers:  # Flower's own console handler, INFO unless told otherwise
        handler.setLevel(level)
    # Flower prints through its own handler. Its records must not also reach a handler on the root logger, which
    # code logging through the root logger installs on first use (logging.basicConfig): that printed every Flower
    # line twice, the second time as "INFO:flwr:...", DEBUG lines included.
    flwr.propagate = False
    return level


def alert_lines(report: dict) -> list[str]:
    """A line for each audit section that raises an alert (``alert``: a figure that contradicts what it is measured
    against, such as an ε estimate above its mechanism's ε), after the round's line."""
    return [f"fedmem: round {report.get('round')}: ALERT {name}: {section['alert']}"
            for name, section in (report.get("audit") or {}).items() if isinstance(section, dict)
            and section.get("alert")]


def _number(x):
    return x if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _seconds(x: float) -> str:
    return f"{x:.1f} s" if x < 10 else f"{x:.0f} s"


def round_line(report: dict, num_rounds: int) -> str:
    """One line per audited round from its ``report.json`` dict: ``fedmem: round <r>/<rounds>  train loss <L>``,
    then every figure the audited methods declare for the console (``Figure.console``), in the report's method
    order, as every report writes it (``fedmem.common.fmt``), the privacy budget spent (DP), then ``<s> s training
    + <s> s audit``. A method that did not
    run (or a figure it lacks) is left out."""
    r = report.get("round")
    trained = (report.get("source") or {}).get("kind") != "external"  # a model fedmem did not train: no rounds
    parts = [f"fedmem: round {r}/{num_rounds}" if num_rounds and trained else f"fedmem: round {r}"]
    loss = mean_train_loss(report)
    if loss is not None:
        parts.append(f"train loss {loss:.3f}")

    health = report.get("health") or {}
    if health.get("degenerate"):
        parts.append(f"DEGENERATE model, nothing to audit ({health['reason']})")
    parts += [f"{figure.label} {headline_text(figure, h)}" for _, figure, h in declared_headlines(report)
              if figure.console and h.get(figure.key) is not None]

    if epsilon(report) is not None:
        parts.append(f"ε {epsilon(report):.3g} (δ {report['defense']['dp']['delta']:g})")

    timings = report.get("timings") or {}
    methods = (report.get("audit") or {}).keys()
    audit_s = _number(timings.get("audit"))  # the audit's wall time (methods may run side by side)
    if audit_s is None:  # a report from before it was recorded
        audit_s = sum(v for k, v in timings.items() if k in methods and _number(v) is not None)
    training_s = _number(timings.get("round_training"))
    spent = ([f"{_seconds(training_s)} training"] if training_s is not None else []) + (
        [f"{_seconds(audit_s)} audit"] if audit_s else [])
    if spent:
        parts.append(" + ".join(spent))
    return "  ".join(parts)
