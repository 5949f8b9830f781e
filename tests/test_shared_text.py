"""Shared passages by exact search (SPEC §3b): a run of at least 50 characters that another client's training text or
the public share holds is found, whole, wherever it sits; a shorter one is not."""

import numpy as np
import pytest

from fedmem.audit.mr.shared_text import MIN_CHARS, shared_passages, windows


def pseudo_text(rng, n: int) -> str:
    syllables = ["ba", "ko", "ri", "tu", "me", "sa", "lo", "ni", "ve", "da", "pu", "gi", "ro", "fe", "zu", "ha"]
    return " ".join("".join(rng.choice(syllables, size=rng.integers(2, 5))) for _ in range(n))


@pytest.mark.parametrize("seed", range(20))
def test_a_planted_run_is_found_exactly_when_it_reaches_50_characters(seed):
    rng = np.random.default_rng(seed)
    words = pseudo_text(rng, 60).split()
    start = int(rng.integers(0, 30))
    count = int(rng.integers(3, 25))
    run = " ".join(words[start:start + count])
    text = " ".join(words)  # client 0's text, holding the run
    other = pseudo_text(rng, 10) + "  " + run.upper() + "\n" + pseudo_text(rng, 10)  # case and spacing aside
    (found,) = shared_passages([(0, text)], {0: [text], 1: [other]})
    if len(run) >= MIN_CHARS:
        (passage,) = found
        assert text[passage.start:passage.end] == run and passage.clients == (0, 1) and not passage.public
    else:
        assert found == []


def test_the_owner_alone_or_one_client_twice_is_not_shared_but_the_public_share_is():
    rng = np.random.default_rng(0)
    text = pseudo_text(rng, 40)
    assert shared_passages([(0, text)], {0: [text, text], 1: [pseudo_text(rng, 40)]}) == [[]]
    (passage,), = shared_passages([(0, text)], {0: [text]}, public=["prefix words " + text])
    assert (passage.start, passage.end, passage.public, passage.clients) == (0, len(text), True, (0,))
    # a held-out text (in no training split) holding another client's run: two clients hold it
    (passage,), = shared_passages([(2, text)], {1: [text]})
    assert passage.clients == (1, 2)


def test_windows_cover_every_word_of_a_long_text_and_none_of_a_short_one():
    rng = np.random.default_rng(1)
    text = pseudo_text(rng, 50)
    spans = sorted((a, b) for _, a, b in windows(text))
    assert spans[0][0] == 0 and max(b for _, b in spans) == len(text)
    assert all(len(" ".join(text[a:b].split())) >= MIN_CHARS for a, b in spans)
    assert windows("a few short words") == []
