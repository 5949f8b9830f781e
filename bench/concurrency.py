"""The default round's audit three ways, side by side in one process: one method after another; as the earlier
default did (``audit.mr.n=600``, MR alone beside the other methods); and as the default does (``audit.mr.n=200``, MR
then Prior-Aware in a lane beside the others, ``audit.concurrent``). For each, the audit's wall time, each method's seconds, the CPU time of
the process and its helper processes over the wall time (how many of the cores the audit kept busy); then whether
the sections that do not depend on MR's size are identical across the three, and whether the two audits at the
default sizes are identical.

    python bench/concurrency.py                              # a one-epoch adapter on the default data (cached)
    python bench/concurrency.py --run runs/<dir> --round 3   # a saved round of a run made with the default config
    python bench/concurrency.py audit.mr.n=300               # Hydra overrides of the audited config
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import psutil  # noqa: E402
from round import trained_adapter  # noqa: E402  (bench/round.py: the cached one-epoch adapter)

from fedmem.config.compose import compose_dict  # noqa: E402
from fedmem.config.experiment import from_dict  # noqa: E402
from fedmem.experiment.archive import saved_adapter  # noqa: E402
from fedmem.audit.prior_aware import PriorAwareMemorization  # noqa: E402
from fedmem.experiment.auditor import make_auditor  # noqa: E402


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and its live children (the detector's spaCy helpers)."""
    me = psutil.Process()
    procs = [me, *me.children(recursive=True)]
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


def audit(state: dict, overrides: list[str], concurrent: bool, pa_apart: bool = True) -> tuple[dict, float, float]:
    """(the round's report, wall seconds, CPU seconds) of one audit of ``state``; ``pa_apart=False``: Prior-Aware in
    the first lane, as before it joined MR's."""
    with tempfile.TemporaryDirectory() as tmp:
        cfg = from_dict({**compose_dict([*overrides, f"audit.concurrent={concurrent}", "train.progress=false"]),
                         "run_dir": tmp})
        auditor = make_auditor(cfg, source={"kind": "bench"}, save_adapters=False)
        auditor.pool  # noqa: B018  (built with the auditor, outside the timed audit)
        PriorAwareMemorization.runs_apart = pa_apart
        try:
            cpu, wall = cpu_seconds(), time.perf_counter()
            auditor.evaluate(1, state)
            wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
        finally:
            PriorAwareMemorization.runs_apart = True
        report = json.loads((Path(tmp) / "round_1" / "report.json").read_text())
        auditor.finish()
    return report, wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", help="a run directory made with the default config (its saved adapter is audited)")
    ap.add_argument("--round", type=int, default=3, help="which saved round of --run")
    ap.add_argument("overrides", nargs="*", help="Hydra overrides of the audited config (default: none)")
    args = ap.parse_args()
    if args.run:
        state = saved_adapter(args.run, args.round)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            state = trained_adapter(from_dict({**compose_dict(args.overrides), "run_dir": tmp}))
    arms = [("one method after another (n = 200)", args.overrides, False, True),
            ("earlier default: n = 600, MR alone beside the others", [*args.overrides, "audit.mr.n=600"], True, False),
            ("default: n = 200, MR then Prior-Aware beside the others", args.overrides, True, True)]
    rows, sections = [], []
    for name, overrides, concurrent, pa_apart in arms:
        report, wall, cpu = audit(state, overrides, concurrent, pa_apart)
        sections.append(report["audit"])
        t = report["timings"]
        methods = ", ".join(f"{m} {t[m]:.1f} s" for m in report["audit"])
        rows.append((name, wall, cpu, methods))
    print("| audit | wall (s) | CPU (s) | CPU / wall | per method |\n|---|---|---|---|---|")
    for name, wall, cpu, methods in rows:
        print(f"| {name} | {wall:.1f} | {cpu:.1f} | {cpu / wall:.2f} | {methods} |")
    others = [{m: s for m, s in section.items() if m != "mr"} for section in sections]
    print(f"\nwall time: earlier default / default {rows[1][1] / rows[2][1]:.2f}x, one after another / default "
          f"{rows[0][1] / rows[2][1]:.2f}x; every section but MR's identical in the three: "
          f"{others[0] == others[1] == others[2]}; the two audits at n = 200 identical: {sections[0] == sections[2]}")


if __name__ == "__main__":
    main()
