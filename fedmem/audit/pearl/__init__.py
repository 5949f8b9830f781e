"""PEARL, perturbation sensitivity (SPEC §5), with its parts:

- ``method``: the audit method (prompts, generations, scores, calibration against non-members, the loss attack);
- ``perturb``: bit flips and WordNet synonyms at intensities 0..5, and ``wordnet``, the dictionary read offline;
- ``prompt_splice``: a perturbed prefix put back into the scoring context's ids;
- ``sensitivity``: falloff, GFD and expected drop from performances per intensity.

Nothing outside this package knows these parts: other code asks the method (``PearlSensitivity``)."""

from fedmem.audit.pearl.method import PearlConfig, PearlSensitivity  # noqa: F401  (registers the method)
