"""The seeded synthetic source (offline default): clinical dialogs with canaries and shared boilerplate."""

from fedmem.data.synthetic.generator import (
    check_ground_truth,
    make_public_corpus,
    make_synthetic,
)

__all__ = ["check_ground_truth", "make_public_corpus", "make_synthetic"]
