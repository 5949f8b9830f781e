"""Small real parts for the tests and benches: a byte-level BPE tokenizer with a ChatML template trained on
seeded sentences (the tiny preset's recipe), small Qwen2 models, and audit samples made from texts.

Everything here is deterministic from its seed, so a test or bench that builds the same part twice gets the
same weights and the same samples.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from fedmem.audit.base import AuditRun, AuditSample
from fedmem.audit.detector import Detection
from fedmem.audit.detector.ner import entity_sets, load_ner
from fedmem.audit.detector.preprocess import vectorize
from fedmem.audit.detector.seeding import batch_seeds
from fedmem.batching import language_model_batch
from fedmem.config import Decoding
from fedmem.data.templates import continuation_header
from fedmem.model.tiny import qwen2_model, train_tokenizer

USER_TEMPLATE = "Please continue the following text. {text}"

SUBJECTS = ["The patient", "Our team", "The galaxy", "A doctor", "The committee", "This model", "The river", "A farmer"]
VERBS = ["reported", "observed", "described", "measured", "discovered", "remembered", "explained", "noticed"]
OBJECTS = ["a severe headache", "the faint signal", "an unusual pattern", "the new medication", "a quiet village",
           "the dark matter halo", "several old records", "a rapid change"]
TAILS = ["after three weeks.", "during the night.", "in the northern region.", "with great care.",
         "before the meeting ended.", "near the old bridge.", "under heavy rain.", "without any warning."]


def sentences(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    parts = (SUBJECTS, VERBS, OBJECTS, TAILS)
    return [" ".join(rng.choice(p) for p in parts) for _ in range(n)]


def texts(n: int, seed: int, n_sentences: int = 6) -> list[str]:
    """``n`` paragraphs of ``n_sentences`` random sentences each."""
    return [" ".join(sentences(n_sentences, seed * 1000 + i)) for i in range(n)]


@functools.lru_cache(maxsize=2)
def tiny_tokenizer(vocab_size: int = 512):
    """The tiny preset's tokenizer recipe (byte-level BPE, ChatML template) on seeded sentences."""
    return train_tokenizer(sentences(400, seed=1) + [USER_TEMPLATE], vocab_size)


def tiny_model(tokenizer, hidden: int = 64, layers: int = 2, seed: int = 0):
    """A tiny-preset-shaped Qwen2 model (tied embeddings, the tokenizer's special ids), in eval mode."""
    heads = max(2, hidden // 32)
    return qwen2_model(
        len(tokenizer), hidden, 2 * hidden, layers, heads, heads // 2 if heads % 2 == 0 else heads, seed=seed,
        max_position_embeddings=512, tie_word_embeddings=True, bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    ).eval()


def prompt_header(tokenizer) -> tuple[int, ...]:
    """The ids every audit prompt starts with: the chat template's open user turn (as ``build_audit_run``)."""
    return tuple(tokenizer(continuation_header(tokenizer), add_special_tokens=False)["input_ids"])


def make_sample(tokenizer, text: str, client: int, split: str, idx: int, prefix_len: int, suffix_len: int,
                tags: dict | None = None) -> AuditSample:
    """Prefix = first ``prefix_len`` tokens of the text, suffix = the next ``suffix_len`` (the fixture's texts are
    cut there); the prompt is the chat template's open user turn holding the prefix (as the audit pool's)."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    prefix_ids, suffix_ids = ids[:prefix_len], ids[prefix_len : prefix_len + suffix_len]
    return AuditSample(
        id=f"c{client}/{split}/{idx}", client=client, split=split,
        prompt_ids=prompt_header(tokenizer) + tuple(prefix_ids), prefix_ids=tuple(prefix_ids),
        suffix_ids=tuple(suffix_ids), prefix_text=tokenizer.decode(prefix_ids),
        suffix_text=tokenizer.decode(suffix_ids), tags=tags or {}, reference=tokenizer.decode(suffix_ids),
    )


def make_run(tokenizer, n_clients: int = 2, n_train: int = 3, n_test: int = 3, prefix_len: int = 24,
             suffix_len: int = 24, seed: int = 0, decoding: Decoding | None = None) -> AuditRun:
    """An AuditRun over seeded paragraphs; sample 0 of every client is tagged as a 4-copy canary."""
    train, test = {}, {}
    for c in range(n_clients):
        tr = texts(n_train, seed=100 + c)
        te = texts(n_test, seed=200 + c)
        train[c] = [make_sample(tokenizer, t, c, "train", i, prefix_len, suffix_len,
                                {"canary": f"k{c}{i}", "copies": 4} if i == 0 else {}) for i, t in enumerate(tr)]
        test[c] = [make_sample(tokenizer, t, c, "test", i, prefix_len, suffix_len) for i, t in enumerate(te)]
    return AuditRun(
        train=train, test=test, train_sizes={c: n_train for c in train}, tokenizer=tokenizer,
        decoding=decoding or Decoding(), prefix_len=prefix_len, prompt_header=prompt_header(tokenizer), seed=seed,
    )


def memorize(model, samples: list[AuditSample], steps: int = 60, lr: float = 3e-3, seed: int = 0):
    """Overfit the model on prompt + suffix of ``samples`` (a stand-in for fine-tuning on the members)."""
    torch.manual_seed(seed)
    ids, labels, att = language_model_batch([list(s.prompt_ids) + list(s.suffix_ids) for s in samples], pad_id=0)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        loss = model(input_ids=ids, attention_mask=att, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    model.eval()
    return float(loss.item())


def zipf_texts(rng: np.random.Generator, n: int, lo: int, hi: int, vocab: np.ndarray) -> list[str]:
    """``n`` texts of ``lo``..``hi`` words drawn from ``vocab`` with Zipfian frequencies (retrieval corpora)."""
    p = 1 / np.arange(1, len(vocab) + 1)
    p /= p.sum()
    return [" ".join(rng.choice(vocab, size=rng.integers(lo, hi + 1), p=p)) for _ in range(n)]


def stored_length(n: int) -> int:
    """The document length Lucene stores, from its definition rather than from ``SmallFloat``'s bit layout (so it
    checks ``fedmem.audit.lucene`` independently): exact below 24; beyond, 24 + (n − 24) with only its four
    leading bits kept, the rest rounded down."""
    if n < 24:
        return n
    i = n - 24
    drop = max(0, i.bit_length() - 4)
    return 24 + (i >> drop << drop)


def english_passages(words_per_passage: int = 50, stride: int = 50) -> list[str]:
    """Real English prose that every Debian system carries (the licence texts in /usr/share/common-licenses), cut
    into passages of ``words_per_passage`` words every ``stride`` words; empty where the folder is missing."""
    from pathlib import Path

    words = []
    for path in sorted(Path("/usr/share/common-licenses").glob("*")):
        if path.is_file():
            words.extend(path.read_text(encoding="utf-8", errors="replace").split())
    return [" ".join(words[i : i + words_per_passage]) for i in range(0, len(words) - words_per_passage, stride)]


# Lucene's own BM25 over a "suffix" text field (StandardAnalyzer, BM25Similarity(1.2, 0.75)), queried as
# Elasticsearch's match query builds it (QueryBuilder.createBooleanQuery, SHOULD clauses). Reads documents and
# queries one per line; prints each query's top k as "doc:score" pairs, best first.
LUCENE_REFERENCE_JAVA = """
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.util.List;
import org.apache.lucene.analysis.standard.StandardAnalyzer;
import org.apache.lucene.document.*;
import org.apache.lucene.index.*;
import org.apache.lucene.search.*;
import org.apache.lucene.search.similarities.BM25Similarity;
import org.apache.lucene.store.ByteBuffersDirectory;
import org.apache.lucene.util.QueryBuilder;

public class Bm25Reference {
  public static void main(String[] args) throws Exception {
    List<String> docs = Files.readAllLines(Paths.get(args[0]), StandardCharsets.UTF_8);
    List<String> queries = Files.readAllLines(Paths.get(args[1]), StandardCharsets.UTF_8);
    int k = Integer.parseInt(args[2]);
    StandardAnalyzer analyzer = new StandardAnalyzer();
    BM25Similarity sim = new BM25Similarity(1.2f, 0.75f);
    ByteBuffersDirectory dir = new ByteBuffersDirectory();
    try (IndexWriter w = new IndexWriter(dir, new IndexWriterConfig(analyzer).setSimilarity(sim))) {
      for (String d : docs) {
        Document doc = new Document();
        doc.add(new TextField("suffix", d, Field.Store.NO));
        w.addDocument(doc);
      }
      w.forceMerge(1);
    }
    IndexSearcher searcher = new IndexSearcher(DirectoryReader.open(dir));
    searcher.setSimilarity(sim);
    QueryBuilder builder = new QueryBuilder(analyzer);
    PrintWriter out = new PrintWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8));
    for (String q : queries) {
      Query query = builder.createBooleanQuery("suffix", q, BooleanClause.Occur.SHOULD);
      StringBuilder line = new StringBuilder();
      if (query != null) {
        for (ScoreDoc hit : searcher.search(query, k).scoreDocs) {
          line.append(hit.doc).append(':').append(hit.score).append(' ');
        }
      }
      out.println(line.toString().trim());
    }
    out.flush();
  }
}
"""


def lucene_jar() -> str | None:
    """Anserini's fat jar (Lucene 9 inside) from an installed pyserini, or $FEDMEM_LUCENE_JAR; None if absent."""
    import glob
    import importlib.util
    import os

    if os.environ.get("FEDMEM_LUCENE_JAR"):
        return os.environ["FEDMEM_LUCENE_JAR"]
    spec = importlib.util.find_spec("pyserini")  # located, not imported: pyserini's own imports need torch
    for folder in (spec.submodule_search_locations or []) if spec else []:
        jars = sorted(glob.glob(os.path.join(folder, "resources", "jars", "anserini-*-fatjar.jar")))
        if jars:
            return jars[-1]
    return None


def lucene_top_k(docs: list[str], queries: list[str], k: int, workdir) -> list[list[tuple[int, float]]] | None:
    """Real Lucene's top-k (document, score) per query, or None when Java or the jar is missing. Documents and
    queries must be single lines."""
    import shutil
    import subprocess
    from pathlib import Path

    jar = lucene_jar()
    if jar is None or not shutil.which("javac") or not shutil.which("java"):
        return None
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    (work / "Bm25Reference.java").write_text(LUCENE_REFERENCE_JAVA)
    subprocess.run(["javac", "-cp", jar, "-d", str(work), str(work / "Bm25Reference.java")], check=True)
    (work / "docs.txt").write_text("\n".join(docs) + "\n", encoding="utf-8")
    (work / "queries.txt").write_text("\n".join(queries) + "\n", encoding="utf-8")
    proc = subprocess.run(["java", "-cp", f"{jar}:{work}", "Bm25Reference", str(work / "docs.txt"),
                           str(work / "queries.txt"), str(k)], check=True, capture_output=True, text=True)
    lines = proc.stdout.split("\n")[: len(queries)]
    return [[(int(d), float(s)) for d, s in (pair.split(":") for pair in line.split())] for line in lines]


def seed_rule_categories(detector, pairs: list[tuple[str, str]], entity_gate: bool = True) -> list[str]:
    """The seed paper's typing rule, written plainly from its description and applied to the detector's own
    alignment, one pair and one sentence pair at a time: a sentence pair of an aligned case passes the entity
    gate when spaCy finds no entity in either lowercased sentence, or entities in both with one set containing
    the other; passing pairs above ``identical`` are skipped; the pair is paraphrase_high when a passing pair
    scores above ``paraphrase_high``, else paraphrase_low when one passes at all, else none. Verbatim and idea
    cases come from the detector's alignment unchanged. The oracle for ``PlagiarismDetector.detect_batch``."""
    cfg = detector.cfg
    nlp = load_ner(cfg.ner_model)
    out = []
    for generated, suffix in pairs:
        a, b = vectorize([detector.preprocessor.units(generated), detector.preprocessor.units(suffix)])
        seeds = batch_seeds([(a, b)], cfg.th1, cfg.th2)[0]
        typed = detector._align_and_type(a, b, seeds) if len(seeds) else Detection("none", [], {})
        if isinstance(typed, Detection):
            out.append(typed.category)
            continue
        high = low = False
        for case in typed.cases:
            for i in range(case.src_lo, case.src_hi + 1):
                for j in range(case.susp_lo, case.susp_hi + 1):
                    x, y = typed.a.sentence(i), typed.b.sentence(j)
                    ex, ey = entity_sets(nlp, [x.lower()])[0], entity_sets(nlp, [y.lower()])[0]
                    if entity_gate and not ((not ex and not ey) or (ex and ey and (ex <= ey or ey <= ex))):
                        continue
                    p = float(detector.scorer.score([(x, y)])[0])
                    high = high or cfg.paraphrase_high < p <= cfg.identical
                    low = low or p <= cfg.paraphrase_high
        out.append("paraphrase_high" if high else "paraphrase_low" if low else "none")
    return out
