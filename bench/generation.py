"""The default round's audit before and after the fast decoding loop, side by side in one run: seconds and figures.

    python bench/generation.py                              # a one-epoch adapter on the default data (cached)
    python bench/generation.py --run runs/<dir> --round 3   # a saved round of a run made with the default config
    python bench/generation.py --greedy-check 256           # also: greedy tokens of both backends on MR's prompts

Both sides run the real audit (``Auditor.evaluate``: every default method, reports written to a temporary folder)
on the same model. Before: ``generate`` on fixed batches of 256 sequences, generation and scoring on the peft model
(``audit.generation_backend=transformers audit.generation_batch_size=256 audit.merge_adapter=false``). After: the
defaults (the decoding loop, rows sized by the model, the adapter merged into a copy). Printed: each method's
seconds and its generation stage, the round's, and the headline figures, which must agree within their intervals
(sampling draws differ between the backends; greedy tokens are identical, which ``--greedy-check`` verifies on MR's
own prompts; scores differ by float rounding).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from round import trained_adapter  # noqa: E402  (bench/round.py: the cached one-epoch adapter)

from fedmem.config.compose import compose_dict
from fedmem.config.experiment import from_dict  # noqa: E402
from fedmem.engine.config import Decoding  # noqa: E402
from fedmem.engine.generation import generate_batched  # noqa: E402
from fedmem.engine.model.load import load_adapter_state  # noqa: E402
from fedmem.experiment.archive import saved_adapter
from fedmem.experiment.auditor import make_auditor
from fedmem.experiment.loading import audit_plan, fresh_lora_model

BACKENDS = {"transformers": 256, "fedmem": "auto"}  # backend: generation_batch_size
SIDES = {"before": ["audit.generation_backend=transformers", "audit.generation_batch_size=256",
                    "audit.merge_adapter=false"],
         "after": []}


def audit_with(side: list[str], state: dict, overrides: list[str]) -> tuple[dict, float]:
    """(round report, wall seconds) of one audit of ``state`` with the ``side``'s settings."""
    with tempfile.TemporaryDirectory() as tmp:
        cfg = from_dict({**compose_dict([*overrides, *side, "train.progress=false"]), "run_dir": tmp})
        auditor = make_auditor(cfg, source={"kind": "bench"}, save_adapters=False)
        t = time.perf_counter()
        auditor.evaluate(1, state)
        seconds = time.perf_counter() - t
        report = json.loads((Path(tmp) / "round_1" / "report.json").read_text())
        auditor.finish()
    return report, seconds


def greedy_check(state: dict, overrides: list[str], k: int) -> str:
    """MR's first ``k`` prompts decoded greedily by both backends: how many continuations are token-identical."""
    with tempfile.TemporaryDirectory() as tmp:
        cfg = from_dict({**compose_dict([*overrides, "train.progress=false"]), "run_dir": tmp})
        model, tokenizer = fresh_lora_model(cfg)
        load_adapter_state(model, state)
        run = audit_plan(cfg)[0]
        prompts = [s.prompt_ids for c in run.clients for s in run.train[c]][:k]
        cap = cfg.audit.sections["mr"].max_new_tokens
        outs = {b: generate_batched(model, tokenizer, prompts, cap, decoding=Decoding("greedy"),
                                    batch_size=None if rows == "auto" else rows, backend=b)
                for b, rows in BACKENDS.items()}
    same = sum(a == b for a, b in zip(outs["transformers"], outs["fedmem"]))
    return f"greedy on {len(prompts)} of MR's prompts (cap {cap}): {same} of {len(prompts)} token-identical"


def headline(report: dict) -> dict[str, str]:
    out = {}
    for name, section in report["audit"].items():
        for key, value in section.get("headline", {}).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and not key.endswith("_ci95"):
                ci = section["headline"].get(f"{key}_ci95")
                out[f"{name}/{key}"] = f"{value:.4g}" + (f" [{ci[0]:.4g}, {ci[1]:.4g}]" if ci else "")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", help="a run directory made with the default config (its saved adapter is audited)")
    ap.add_argument("--round", type=int, default=3, help="which saved round of --run")
    ap.add_argument("--greedy-check", type=int, default=0, help="MR prompts to compare greedily (0: skip)")
    ap.add_argument("--save", help="also write both rounds' reports and seconds to this JSON file")
    ap.add_argument("overrides", nargs="*", help="Hydra overrides of the audited config (default: none)")
    a = ap.parse_args()
    if a.run:
        state = saved_adapter(a.run, a.round)
        what = f"{a.run} round {a.round}"
    else:
        state = trained_adapter(from_dict({**compose_dict([*a.overrides, "train.progress=false"]), "run_dir": "."}))
        what = "a one-epoch adapter on the default data"
    print(f"audited model: {what}; overrides: {a.overrides or 'none'}")
    if a.greedy_check:
        print(greedy_check(state, a.overrides, a.greedy_check))
    results = {name: audit_with(side, state, a.overrides) for name, side in SIDES.items()}
    if a.save:
        Path(a.save).write_text(json.dumps(results))
    stage_keys = {"mr": "generation", "pearl": "generate"}
    print(f"\n{'method':<10}" + "".join(f"{b + ' s':>16}{'generation s':>15}" for b in results) + f"{'ratio':>8}")
    names = list(results["after"][0]["timings"])
    for name in [n for n in names if not n.endswith("_stages") and n in results["after"][0]["audit"]]:
        row, secs = f"{name:<10}", []
        for report, _ in results.values():
            t = report["timings"]
            gen = t.get(f"{name}_stages", {}).get(stage_keys.get(name, ""), "")
            row += f"{t[name]:>16.2f}{gen if gen == '' else f'{gen:.2f}':>15}"
            secs.append(gen if gen != "" else t[name])
        print(row + f"{secs[0] / secs[1]:>7.1f}x")
    walls = [s for _, s in results.values()]
    print(f"{'round':<10}" + "".join(f"{w:>16.2f}{'':>15}" for w in walls) + f"{walls[0] / walls[1]:>7.1f}x")
    print("\nheadline figures (95% intervals): before | after")
    old, new = (headline(r) for r, _ in results.values())
    for key in old:
        print(f"  {key:<34} {old[key]:<30} | {new.get(key, '-')}")


if __name__ == "__main__":
    main()
