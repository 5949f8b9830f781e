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


def test_auto_runs_lanes_for_a_dispatch_bound_model_only(compose, tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM

    from fedmem.experiment.auditor import LANES_BELOW_PARAMS, lanes_pay

    cfg = from_dict({**compose(), "run_dir": str(tmp_path)})
    assert cfg.audit.concurrent == "auto"
    tiny = make_auditor(cfg, source={"kind": "test"}, save_adapters=False).model
    # a model of SmolLM2-135M's width and vocabulary, with 8 of its 30 layers: its products use every thread
    wide = LlamaForCausalLM(LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=8,
                                        num_attention_heads=9, num_key_value_heads=3))
    assert sum(p.numel() for p in tiny.parameters()) < LANES_BELOW_PARAMS < sum(p.numel() for p in wide.parameters())
    assert lanes_pay("auto", tiny) and not lanes_pay("auto", wide)
    assert lanes_pay(True, wide) and not lanes_pay(False, tiny)  # an explicit setting is obeyed


def test_lanes_without_a_merged_copy_are_refused_before_the_run(compose):
    import pytest

    with pytest.raises(ValueError, match="audit.concurrent=true needs audit.merge_adapter=true"):
        from_dict(compose("audit.concurrent=true", "audit.merge_adapter=false"))
    assert from_dict(compose("audit.merge_adapter=false")).audit.concurrent == "auto"  # auto runs one lane
