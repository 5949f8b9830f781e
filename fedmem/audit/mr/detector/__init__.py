"""The discriminator F (SPEC §4): the PAN2014 text-alignment plagiarism detector of Sanchez-Perez et al., with
the changes Lee et al. (2023) made for language-model plagiarism, typing each (generated, suffix) pair as
verbatim, paraphrase_high, paraphrase_low, idea or none.

    from fedmem.audit.mr.detector import DetectorConfig, PlagiarismDetector
    detector = PlagiarismDetector(DetectorConfig())
    detection = detector.detect(generated_text, training_suffix)        # or detect_batch([(g, s), ...])
    detection.category, detection.cases, detection.scores

Modules: preprocess (sentences, terms), seeding (vectorized tf-idf seeds), align (extension, filtering),
verbatim, paraphrase (scorers), ner, incoherence (the SPEC §3 filter), detector (the pipeline).
"""

from .config import CATEGORIES, NONE, DetectorConfig
from .detector import Case, Detection, PlagiarismDetector
from .incoherence import is_incoherent
from .paraphrase import MissingAssetError

__all__ = [
    "CATEGORIES",
    "NONE",
    "Case",
    "Detection",
    "DetectorConfig",
    "MissingAssetError",
    "PlagiarismDetector",
    "is_incoherent",
]
