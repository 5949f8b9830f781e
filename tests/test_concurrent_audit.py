"""MR and Prior-Aware in a lane beside the other methods (``audit.concurrent``): the round's sections are exactly
those of one method after another, and both lanes' work is in the report (the whole audit's wall time beside each
method's)."""

import json

import torch

from fedmem.config.experiment import from_dict
from fedmem.experiment.auditor import make_auditor


def test_mr_beside_the_others_gives_the_same_sections(compose, tmp_path):
    sections, timings = {}, {}
    overrides = ("audit.methods=[utility,mr,pa,mia]", "audit.mia.n=3", "audit.mia.suffix_len=16")
    for concurrent in (False, True):
        cfg = from_dict({**compose(*overrides, f"audit.concurrent={concurrent}"),
                         "run_dir": str(tmp_path / str(concurrent))})
        auditor = make_auditor(cfg, source={"kind": "test"}, save_adapters=False)
        torch.manual_seed(3)
        state = {k: v + 0.05 * torch.randn_like(v) for k, v in auditor.initial_adapter().items()}  # a trained-like adapter
        threads = torch.get_num_threads()
        auditor.evaluate(1, state)
        assert torch.get_num_threads() == threads  # the lanes' share of the cores is given back
        report = json.loads((tmp_path / str(concurrent) / "round_1" / "report.json").read_text())
        auditor.finish()
        sections[concurrent], timings[concurrent] = report["audit"], report["timings"]
    assert sections[True] == sections[False]
    for t in timings.values():
        assert {"audit", "utility", "mr", "pa", "mia"} <= set(t) and t["audit"] > 0
