"""MR and Prior-Aware in a lane beside the other methods (``audit.concurrent``), in a process of its own: the round's
sections are exactly those of one method after another, both lanes' work is in the report (the whole audit's wall
time beside each method's), and the lane's process ends with the run or with an error of its method."""

import json
import os

import pytest

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
        lane = auditor.lane
        assert (lane is not None) == concurrent
        if lane:  # MR and Prior-Aware ran in another process, which ends with the run
            assert lane.proc.pid != os.getpid() and lane.proc.poll() is None
        auditor.finish()
        assert lane is None or lane.proc.returncode == 0
        sections[concurrent], timings[concurrent] = report["audit"], report["timings"]
    assert sections[True] == sections[False]
    for t in timings.values():
        assert {"audit", "utility", "mr", "pa", "mia"} <= set(t) and t["audit"] > 0


def test_an_error_in_the_lanes_process_is_raised_in_the_run_with_its_traceback(compose, tmp_path):
    """What fails in the lane's process is raised in the caller as what it is, the helper's traceback in a note, and
    the helper goes on serving the next round."""
    cfg = from_dict({**compose("audit.methods=[utility,pa]", "audit.pa.c=16", "audit.concurrent=true"),
                     "run_dir": str(tmp_path)})
    auditor = make_auditor(cfg, source={"kind": "test"}, save_adapters=False)
    state = auditor.initial_adapter()
    bad = {k: v[..., :1] for k, v in state.items()}  # every weight cut to one column: loading it fails
    auditor.evaluate(0, state)
    first = auditor.lane
    with pytest.raises(RuntimeError, match="size mismatch") as raised:
        auditor.lane.submit((1, bad, str(tmp_path / "round_1"), 1))
        auditor.lane.result()
    assert any("in a helper process" in note for note in raised.value.__notes__)
    assert first.proc.poll() is None  # a method's error leaves the helper serving
    auditor.evaluate(1, state)
    assert auditor.lane is first and first.proc.poll() is None
    auditor.finish()
    assert first.proc.returncode == 0


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
