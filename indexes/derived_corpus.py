"""Corpora derived from a real one, for measurements: a documented slice and a synthetic re-mix.

Both are written as DPR ``psgs_w100.tsv`` files (``id``, ``text``, ``title``), so every
index build reads them like the corpus they come from, and both are reused when present.

- :func:`make_slice`: every dataset-paragraph passage (ids not starting with a
  Wikipedia-dump prefix; these hold most of the answer-bearing text) plus a seeded
  random sample of the dump passages, kept in corpus order (the retriever comparison
  of ``benchmarks/hybrid_bench.py``, where encoding the whole corpus takes hours);
- :func:`synthesise`: any number of new passages, each mixing the words of two real
  ones, so that term statistics stay realistic at sizes the corpus does not reach
  (the speed figures of ``benchmarks/retrieval_bench.py``).
"""

from __future__ import annotations

import csv
import json
import os
import random
from pathlib import Path
from typing import Any

from indexes.corpus import read_corpus

# Id prefixes of the Wikipedia-dump passages of the default corpus (the rest are the
# datasets' own paragraphs).
DUMP_PREFIXES = ("wikivisual-", "patcheddistro-", "aggipp-wx-", "wikitasks-", "msilver-wx-")


def make_slice(corpus: Path, out: Path, size: int, seed: int) -> dict[str, Any]:
    """Write the slice TSV (if absent) and return what it holds (also kept as ``out.json``).

    Raises ValueError when ``size`` is smaller than the dataset passages alone.
    """
    info_path = out.with_suffix(".json")
    if out.is_file() and info_path.is_file():
        return json.loads(info_path.read_text())
    dataset: list[tuple[int, tuple[str, str, str]]] = []
    reservoir: list[tuple[int, tuple[str, str, str]]] = []
    rng = random.Random(seed)
    seen_dump = 0
    rows = list(read_corpus(corpus))
    for pos, row in enumerate(rows):
        item = (pos, (row.id, row.title, row.text))
        if not row.id.startswith(DUMP_PREFIXES):
            dataset.append(item)
    want_dump = size - len(dataset)
    if want_dump < 0:
        raise ValueError(f"--slice {size} is smaller than the {len(dataset)} dataset passages")
    for pos, row in enumerate(rows):
        if not row.id.startswith(DUMP_PREFIXES):
            continue
        seen_dump += 1
        item = (pos, (row.id, row.title, row.text))
        if len(reservoir) < want_dump:
            reservoir.append(item)
        else:
            j = rng.randrange(seen_dump)
            if j < want_dump:
                reservoir[j] = item
    chosen = sorted(dataset + reservoir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    with tmp.open("w", newline="", encoding="utf-8") as f:  # DPR psgs_w100.tsv layout
        writer = csv.writer(f, delimiter="\t", lineterminator="\n")
        writer.writerow(["id", "text", "title"])
        writer.writerows([pid, text, title] for _, (pid, title, text) in chosen)
    os.replace(tmp, out)
    info = {
        "path": str(out),
        "source": str(corpus),
        "passages": len(chosen),
        "dataset_passages": len(dataset),
        "dump_passages_sampled": len(reservoir),
        "dump_passages_total": seen_dump,
        "seed": seed,
        "dump_prefixes": list(DUMP_PREFIXES),
    }
    info_path.write_text(json.dumps(info, indent=2))
    return info


def synthesise(source: str, dest: Path, n: int, seed: int = 13) -> Path:
    """An n-passage DPR TSV: each passage mixes the words of two real passages (first
    half of one, second half of another, shuffled), so term statistics stay realistic
    while every passage is new; ids are ``syn<copy>-<n>``. Reused if present."""
    if dest.exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    rows = [(r.title, r.text) for r in read_corpus(source)]
    tmp = dest.with_suffix(".tmp")
    written = 0
    with tmp.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, delimiter="\t", lineterminator="\n")
        writer.writerow(["id", "text", "title"])
        copy = 0
        while written < n:
            order = list(range(len(rows)))
            rng.shuffle(order)
            for i, j in zip(order, order[1:] + order[:1], strict=True):
                title, text_a = rows[i]
                words_a, words_b = text_a.split(), rows[j][1].split()
                words = words_a[: len(words_a) // 2] + words_b[len(words_b) // 2 :]
                rng.shuffle(words)
                writer.writerow([f"syn{copy}-{written}", " ".join(words), title])
                written += 1
                if written >= n:
                    break
            copy += 1
    tmp.replace(dest)
    return dest
