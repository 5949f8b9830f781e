"""What the benches (and the parity tests) measure fedmem against or feed it: real Lucene's BM25 through a small
Java program over Anserini's jar, Lucene's stored document length from its definition, the seed paper's
paraphrase-typing rule written plainly, and workloads (Zipfian retrieval corpora, real English prose).

Nothing here is part of fedmem: these are the outside references its targets are stated against.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fedmem.audit.mr.detector import Detection
from fedmem.audit.mr.detector.ner import entity_sets, load_ner
from fedmem.audit.mr.detector.preprocess import vectorize
from fedmem.audit.mr.detector.seeding import batch_seeds


def zipf_texts(rng: np.random.Generator, n: int, lo: int, hi: int, vocab: np.ndarray) -> list[str]:
    """``n`` texts of ``lo``..``hi`` words drawn from ``vocab`` with Zipfian frequencies (retrieval corpora)."""
    p = 1 / np.arange(1, len(vocab) + 1)
    p /= p.sum()
    return [" ".join(rng.choice(vocab, size=rng.integers(lo, hi + 1), p=p)) for _ in range(n)]


def stored_length(n: int) -> int:
    """The document length Lucene stores, from its definition rather than from ``SmallFloat``'s bit layout (so it
    checks ``fedmem.audit.mr.lucene`` independently): exact below 24; beyond, 24 + (n − 24) with only its four
    leading bits kept, the rest rounded down."""
    if n < 24:
        return n
    i = n - 24
    drop = max(0, i.bit_length() - 4)
    return 24 + (i >> drop << drop)


# installed dependencies of fedmem whose licence texts are the benches' English prose (read in this order)
ENGLISH_SOURCES = ("numpy", "scipy", "pyarrow", "pillow", "matplotlib")


def english_files() -> list[Path]:
    """The licence files that ``ENGLISH_SOURCES`` install with their metadata, in a fixed order (none for a package
    that is not installed)."""
    from importlib import metadata

    found = []
    for name in ENGLISH_SOURCES:
        try:
            files = metadata.distribution(name).files or []
        except metadata.PackageNotFoundError:
            continue
        licences = [f for f in files if f.name.upper().startswith(("LICENSE", "LICENCE", "COPYING"))]
        found += sorted((Path(f.locate()) for f in licences), key=str)
    return found


def english_passages(words_per_passage: int = 50, stride: int = 50) -> list[str]:
    """Real English prose: the licence texts that fedmem's own dependencies install (``english_files``), each text
    once, cut into passages of ``words_per_passage`` words every ``stride`` words, each passage once. The files are only read (the test suite's
    guard, tests/guard.py, fails a session that changed them)."""
    words, texts = [], set()
    for path in english_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        if text not in texts:  # several packages ship the same licence
            texts.add(text)
            words.extend(text.split())
    passages = [" ".join(words[i : i + words_per_passage]) for i in range(0, len(words) - words_per_passage, stride)]
    return list(dict.fromkeys(passages))  # a passage once: the same clause in two licences is one text


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
