"""Corpora derived from a real one, for measurements: a documented slice and a synthetic re-mix.

Both are written as DPR ``psgs_w100.tsv`` files (``id``, ``text``, ``title``), so every
index build reads them like the corpus they come from, and both are reused when present.

- :func:`make_slice`: every dataset-paragraph passage (ids not starting with a
  Wikipedia-dump prefix; these hold most of the answer-bearing text) plus a seeded
  random sample of the dump passages, kept in corpus order (the retriever comparison
  of ``benchmarks/hybrid_bench.py``, where encoding the whole corpus takes hours);
- :func:`synthesise`: any number of new passages, each mixing the words of two real
  ones, so that term statistics stay realistic at sizes the corpus does not reach
  (the speed figures of ``benchmarks/retrieval_bench.py``);
- :func:`scale_corpus`: the corpus of the scale benchmark (370k to 21M passages), each
  passage the shuffled sentences of two real ones, a pure function of its row number, so
  the file grows on demand, resumes after a kill and any size is a prefix of a larger one.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import random
import re
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


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
_SCALE_BLOCK = 100_000  # rows written between two checkpoints of the sidecar


def scale_corpus(
    source: str | Path, dest: Path, n: int, seed: int = 13, *, show_progress: bool = False
) -> dict[str, object]:
    """Make ``dest`` (DPR TSV) hold at least ``n`` synthetic passages; returns its sidecar.

    Row ``r`` (id ``syn-<r>``) takes the title of real passage ``i`` and the first half of
    its sentences plus the second half of passage ``j``'s, in shuffled order, where ``i``,
    ``j`` and the shuffle come from a generator seeded with ``(seed, r)`` alone: every id
    is distinct, passage lengths and term statistics are those of real passages (the
    vocabulary stays the source's: unlike the real 21M DPR passages, it does not grow
    with the corpus), and a file of N rows is the prefix of one of M > N rows.

    ``dest.json`` records the rows and bytes written, updated every 100,000 rows after a
    flush; a rerun truncates the file to the last checkpoint and continues, so a killed
    21M-row generation resumes. A file made from another source or seed is refused.
    """
    from tqdm.auto import tqdm

    source = Path(source)
    info_path = dest.with_suffix(dest.suffix + ".json")
    st = source.stat()
    identity = {"source": str(source.resolve()), "source_bytes": st.st_size, "seed": seed}
    info: dict[str, object] = {**identity, "rows": 0, "bytes": 0}
    if info_path.is_file() and dest.is_file():
        old = json.loads(info_path.read_text())
        if {k: old.get(k) for k in identity} != identity:
            raise ValueError(f"{dest} was made from another source or seed ({info_path})")
        info = old
    if int(info["rows"]) >= n:  # type: ignore[call-overload]
        return info
    titles: list[str] = []
    sentences: list[list[str]] = []
    for row in read_corpus(source):
        titles.append(row.title)
        sentences.append(_SENTENCE_END.split(" ".join(row.text.split())))
    dest.parent.mkdir(parents=True, exist_ok=True)
    rows, size = int(info["rows"]), int(info["bytes"])  # type: ignore[call-overload]
    if dest.exists():
        os.truncate(dest, size)
    with (
        dest.open("ab") as out,
        tqdm(total=n, initial=rows, unit="psg", unit_scale=True, disable=not show_progress) as bar,
    ):
        while rows < n:
            stop = min(n, (rows // _SCALE_BLOCK + 1) * _SCALE_BLOCK)
            text = io.StringIO()
            writer = csv.writer(text, delimiter="\t", lineterminator="\n")
            if rows == 0:
                writer.writerow(["id", "text", "title"])
            writer.writerows(_scale_row(r, seed, titles, sentences) for r in range(rows, stop))
            size += out.write(text.getvalue().encode("utf-8"))
            out.flush()
            os.fsync(out.fileno())
            bar.update(stop - rows)
            rows = stop
            info = {**identity, "rows": rows, "bytes": size}
            tmp = info_path.with_suffix(".tmp")
            tmp.write_text(json.dumps(info, indent=2))
            os.replace(tmp, info_path)
    return info


def _scale_row(
    r: int, seed: int, titles: list[str], sentences: list[list[str]]
) -> tuple[str, str, str]:
    key = hashlib.blake2b(f"{seed}:{r}".encode(), digest_size=8).digest()
    rng = random.Random(int.from_bytes(key, "little"))
    i, j = rng.randrange(len(titles)), rng.randrange(len(titles))
    a, b = sentences[i], sentences[j]
    chosen = a[: (len(a) + 1) // 2] + b[len(b) // 2 :]
    rng.shuffle(chosen)
    return f"syn-{r}", " ".join(chosen), titles[i]
