"""Partitioners (flwr-datasets) keep every row exactly once; client-group rules; the per-client split."""

import random
from collections import Counter

import pytest

from fedmem.data import partition
from fedmem.data.grouping import assign_groups, tags_of
from fedmem.data.tasks import ARXIV_GROUPS, DIALOG_GROUPS, PUBMEDQA_GROUPS


def _exactly_once(parts, rows):
    flat = [i for p in parts for i in p]
    assert sorted(flat) == sorted(rows), "a row is missing or owned twice"
    assert len(set(flat)) == len(flat)


@pytest.mark.parametrize("n, clients", [(10, 3), (101, 3), (257, 5), (6, 6)])
def test_iid_keeps_every_row_once_in_equal_parts(n, clients):
    parts = partition.iid(n, clients, seed=0)
    _exactly_once(parts, range(n))
    assert max(map(len, parts)) - min(map(len, parts)) <= 1
    assert parts == partition.iid(n, clients, seed=0)
    if n > 50:
        assert parts != partition.iid(n, clients, seed=1)
        assert parts[0] != list(range(len(parts[0])))  # shuffled, not contiguous shards of the input order


@pytest.mark.parametrize("alpha", [0.3, 5.0, 100.0])
def test_dirichlet_keeps_every_row_once(alpha):
    rng = random.Random(0)
    labels = [rng.choice("ABCDE") for _ in range(600)]
    parts = partition.dirichlet(labels, 3, alpha, seed=0)
    _exactly_once(parts, range(600))
    assert parts == partition.dirichlet(labels, 3, alpha, seed=0)
    assert parts != partition.dirichlet(labels, 3, alpha, seed=1)


def test_dirichlet_skews_labels_more_for_small_alpha():
    rng = random.Random(1)
    labels = [rng.choice("ABCDE") for _ in range(3000)]

    def skew(alpha):  # mean over clients of the largest label share
        parts = partition.dirichlet(labels, 3, alpha, seed=3)
        return sum(max(Counter(labels[i] for i in p).values()) / len(p) for p in parts) / 3

    assert skew(0.1) > skew(5.0) > 0.2
    assert skew(1000.0) < 0.25  # nearly the uniform 1/5 per label


def test_natural_by_group_index_and_by_value():
    ids = [0, 1, None, 2, 1, 0, None, 2, 2]
    parts = partition.natural(ids, 3)
    assert parts == [[0, 5], [1, 4], [3, 7, 8]]
    _exactly_once(parts, [i for i, g in enumerate(ids) if g is not None])
    assert partition.natural(ids, 2) == [[0, 5], [1, 4]]  # groups beyond num_clients are not used
    values = ["south", "north", "south", None, "east"]
    assert partition.natural(values, 3) == [[4], [1], [0, 2]]  # clients are the values in sorted order
    with pytest.raises(ValueError, match="3 distinct values"):
        partition.natural(values, 2)
    with pytest.raises(ValueError, match=r"client group\(s\) \[1\] have no rows"):
        partition.natural([0, 0, 2], 3)
    with pytest.raises(ValueError, match="no row belongs"):
        partition.natural([None, None], 2)


def test_split_train_test_is_disjoint_and_never_shrinks_what_was_asked():
    train, test = partition.split_train_test(list(range(100)), 70, 20, random.Random(0), 0)
    assert len(train) == 70 and len(test) == 20 and not set(train) & set(test)
    with pytest.raises(ValueError, match=r"client 'north' owns 10 rows, fewer than data.train_per_client \+ "
                                         r"data.test_per_client = 70 \+ 20"):
        partition.split_train_test(list(range(10)), 70, 20, random.Random(0), "north")


def test_tag_groups_follow_the_papers_mesh_rules():
    meshes = [
        ["Animals", "Rats"],  # group 1
        ["Humans", "Middle Aged", "Female"],  # group 2
        ["Humans", "Aged", "Male"],  # group 3: "Aged" is not "Middle Aged"
        ["Humans", "Animals"],  # neither rule
        [],
    ]
    assert assign_groups(meshes, PUBMEDQA_GROUPS, "tags") == [0, 1, 2, None, None]
    assert tags_of(["Humans", "Middle Aged"]) == {"humans", "middle aged"}  # MeSH terms stay whole


def test_tag_groups_for_arxiv_categories_split_on_spaces():
    cats = [["astro-ph.GA"], ["cond-mat.soft hep-th"], "math.DG math-ph", ["cs.LG"], ["astro-ph.HE", "math-ph"]]
    assert assign_groups(cats, ARXIV_GROUPS, "tags", tag_separator=" ") == [0, 1, 2, None, None]
    # without the separator a spaced string is one unknown tag
    assert assign_groups(cats, ARXIV_GROUPS, "tags") == [0, None, None, None, None]
    # a parent in the dotted hierarchy covers its sub-categories ("math." and "math" alike)
    archives = {"astro": ["astro-ph"], "cm": ["cond-mat"], "math": ["math."]}
    from fedmem.data.config import normalize_groups
    assert assign_groups(cats, normalize_groups(archives, "g"), "tags", " ") == [0, 1, 2, None, 0]  # math-ph: not math.
    assert assign_groups([["mathematics"], ["math-ph"]], normalize_groups(archives, "g"), "tags") == [None, None]


def test_keyword_groups_take_the_most_hits_and_leave_out_ties():
    texts = [
        "My son has a cough and chest pain.",  # group1: my son, cough, chest
        "Stomach ache and my liver values are high, and a cough.",  # group2: 2 hits, group1: 1 hit
        "My blood pressure is high.",  # group3
        "I feel tired.",  # no hit
        "A cough and a lump.",  # tie 1:1
        "Coughing is not the keyword cough; hearty food.",  # word boundaries: "cough" hits, "heart" does not
    ]
    assert assign_groups(texts, DIALOG_GROUPS, "keywords") == [0, 1, 2, None, None, 0]
