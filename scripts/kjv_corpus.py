"""A real English corpus for fedmem: the King James Bible from Debian's ``bible-kjv`` / ``bible-kjv-text`` packages,
as passages of consecutive verses in a JSONL file with the corpus's own sections as the client column.

    python scripts/kjv_corpus.py OUT.jsonl [--bible /usr/bin/bible] [--datadir /usr/lib] [--min-words 60]

Without the packages installed: ``apt-get download bible-kjv bible-kjv-text`` and ``dpkg -x`` both into one
folder, then ``--bible FOLDER/usr/bin/bible --datadir FOLDER/usr/lib``.

Rows: ``{"id": "Genesis 1:1-3", "book": ..., "section": ..., "text": ...}``. A passage is consecutive verses of
one chapter, gathered until it holds at least ``--min-words`` words (a chapter's short remainder joins the
passage before it). Sections, the three clients: ``law_history`` (Genesis to Esther), ``poetry_prophets`` (Job to
Malachi) and ``new_testament``. The text is public domain; it is written by nobody on this project.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

FIRST_OF = {"Job": "poetry_prophets", "Matthew": "new_testament"}  # the first book of each later section
CHAPTER = re.compile(r"^(\S.*?) (\d+)$")  # "Genesis 1", "I Samuel 3"
VERSE = re.compile(r"^\s+(\d+) (.*)$")


def read_bible(bible: str, datadir: str) -> list[tuple[str, int, int, str]]:
    """(book, chapter, verse, text) for every verse, in order, from the ``bible`` program's plain output."""
    out = subprocess.run([bible, "-p", datadir, "Gen1:1-Rev22:21"], check=True, capture_output=True,
                         text=True).stdout
    verses, book, chapter = [], None, 0
    for line in out.splitlines():
        if not line.strip():
            continue
        m = CHAPTER.match(line)
        if m and not line.startswith(" "):
            book, chapter = m.group(1), int(m.group(2))
            continue
        v = VERSE.match(line)
        if v:
            verses.append([book, chapter, int(v.group(1)), v.group(2).strip()])
        elif verses:  # a verse wrapped onto the next line
            verses[-1][3] += " " + line.strip()
    return [tuple(v) for v in verses]


def passages(verses, min_words: int) -> list[dict]:
    rows, section, current = [], "law_history", []

    def close():
        if not current:
            return
        book, ch = current[0][0], current[0][1]
        rows.append({"id": f"{book} {ch}:{current[0][2]}-{current[-1][2]}", "book": book, "section": section,
                     "text": " ".join(v[3] for v in current)})

    for v in verses:
        if current and (v[0], v[1]) != (current[0][0], current[0][1]):  # a new chapter
            if sum(len(x[3].split()) for x in current) < min_words and rows and rows[-1]["book"] == current[0][0] \
                    and rows[-1]["id"].split(":")[0] == f"{current[0][0]} {current[0][1]}":
                rows[-1]["text"] += " " + " ".join(x[3] for x in current)  # a short remainder joins its passage
                rows[-1]["id"] = rows[-1]["id"].rsplit("-", 1)[0] + f"-{current[-1][2]}"
            else:
                close()
            current = []
        section = FIRST_OF.get(v[0], section) if not current else section
        current.append(v)
        if sum(len(x[3].split()) for x in current) >= min_words:
            close()
            current = []
    close()
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--bible", default="bible")
    ap.add_argument("--datadir", default="/usr/lib")
    ap.add_argument("--min-words", type=int, default=60)
    a = ap.parse_args(argv)
    rows = passages(read_bible(a.bible, a.datadir), a.min_words)
    Path(a.out).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    counts = {}
    for r in rows:
        counts[r["section"]] = counts.get(r["section"], 0) + 1
    print(f"{len(rows)} passages -> {a.out}: {counts}", file=sys.stderr)


if __name__ == "__main__":
    main()
