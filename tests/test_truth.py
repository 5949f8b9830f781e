"""Ground-truth scoring of detectors (SPEC §7) on hand-made rows."""

import pytest

from fedmem.audit import AUDIT_METHODS
from fedmem.audit.calibration import roc_auc
from fedmem.audit.truth import score_against_truth, score_rows, truth_label


def test_labels():
    assert truth_label({"canary": "k", "copies": 4}, "train") is True
    assert truth_label({"canary": "k", "copies": 1}, "train") is None  # unknown: a single copy
    assert truth_label({"generic": True}, "train") is False
    assert truth_label({}, "test") is False
    assert truth_label({}, "train") is None


def test_precision_recall_auc():
    rows = [
        {"tags": {"canary": "a", "copies": 8}, "score": 0.9, "decision": True},
        {"tags": {"canary": "b", "copies": 2}, "score": 0.4, "decision": False},
        {"tags": {"generic": True}, "score": 0.5, "decision": True},
        {"tags": {}, "split": "test", "score": 0.1, "decision": False},
        {"tags": {}, "score": 1.0, "decision": True},  # ordinary train sample: not scored
    ]
    s = score_rows(rows)
    assert (s["positives"], s["negatives"]) == (2, 2)
    assert s["precision"] == 0.5 and s["recall"] == 0.5
    assert s["roc_auc"] == pytest.approx(0.75)  # 0.9 beats both, 0.4 beats one of (0.5, 0.1)


def test_auc_ties_and_empty():
    assert roc_auc([1.0], [1.0]) == 0.5
    assert roc_auc([], [0.0]) is None


def test_method_sections_are_read_through_the_methods_truth_rows():
    sections = {"pa": {"samples": [{"id": "c0/train/0", "tags": {"canary": "a", "copies": 4}, "log10_ratio": 3.0,
                                    "pa_memorized": True},
                                   {"id": "c0/train/1", "tags": {"generic": True}, "log10_ratio": 0.1,
                                    "pa_memorized": False}]},
                "utility": {"weighted": {}}}
    # truth_rows reads only the section: the methods' classes serve, unbuilt, as the readers
    methods = {name: AUDIT_METHODS[name].__new__(AUDIT_METHODS[name]) for name in sections}
    out = score_against_truth(methods, sections)
    assert list(out) == ["pa"] and out["pa"]["precision"] == 1.0 and out["pa"]["roc_auc"] == 1.0


def test_canary_groups_keep_shared_canaries_apart_and_in_order():
    from fedmem.audit.truth import canary_group, canary_group_order

    keys = [canary_group(t) for t in ({"canary": "a", "copies": 16}, {"canary": "b", "copies": 3, "shared": True},
                                       {"canary": "c", "copies": 2}, {"canary": "d", "copies": 24, "shared": True})]
    assert keys == ["16", "3 shared", "2", "24 shared"]
    assert sorted(keys, key=canary_group_order) == ["2", "16", "3 shared", "24 shared"]
    assert truth_label({"canary": "b", "copies": 3, "shared": True}, "train") is True
