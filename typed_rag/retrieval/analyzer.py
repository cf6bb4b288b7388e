"""Text analysis shared by index build and query: one config, so both sides agree.

The analysis is bm25s's ``Tokenizer``: lower-case, words of two or more word characters,
bm25s's English stop-word list, the PyStemmer (Snowball) English stemmer; terms get ids
in order of first appearance. :class:`Analyzer` produces exactly the same ids as
``bm25s.tokenization.Tokenizer.streaming_tokenize`` (a test checks it on real passages)
but maps words through a C-level dict lookup first and runs Python code only for words
not seen before, which makes index builds about 3x faster.

The config is written into the index manifest and the query side rebuilds its analyzer
from the manifest, never from the current settings, so a query is always analysed
exactly like the passages it is scored against.

bm25s pulls in scipy and numba (seconds to import), so it is imported when an analyzer
is made, not when this module is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import Stemmer

if TYPE_CHECKING:
    from bm25s.tokenization import Tokenizer

DEFAULT_ANALYZER: dict[str, Any] = {
    "lower": True,
    "pattern": r"(?u)\b\w\w+\b",  # bm25s's default: words of 2+ word characters
    "stopwords": "en",  # bm25s.stopwords.STOPWORDS_EN
    "stemmer": "english",  # PyStemmer / Snowball
}

_STOP = -1  # cache marker: a stop word, or (when not growing) a word with no known term
_CACHE_LIMIT = 2_000_000  # words cached before the word cache is reset


class Analyzer:
    """Maps texts to term-id lists; ``vocab`` (term -> id) grows only when ``grow``."""

    def __init__(
        self,
        config: dict[str, Any] | None = None,
        vocab: dict[str, int] | Any | None = None,
        *,
        grow: bool = True,
    ) -> None:
        """``vocab`` may be any mapping with ``get`` (e.g. a HashedVocab) when not growing."""
        from bm25s.tokenization import _infer_stopwords

        self.config = {**DEFAULT_ANALYZER, **(config or {})}
        cfg = self.config
        pattern = cfg["pattern"]
        if pattern == DEFAULT_ANALYZER["pattern"]:
            # Same matches: a greedy run of 2+ word characters already ends at word
            # boundaries; the explicit \b assertions only cost time.
            pattern = r"(?u)\w\w+"
        self._findall = re.compile(pattern).findall
        self._lower = bool(cfg["lower"])
        self._stopwords = frozenset(_infer_stopwords(cfg["stopwords"]) if cfg["stopwords"] else ())
        self._stem = Stemmer.Stemmer(cfg["stemmer"]).stemWord if cfg["stemmer"] else None
        self.vocab: dict[str, int] = vocab if vocab is not None else {}
        self.grow = grow
        self._cache: dict[str, int] = {}
        self._stem_cache: dict[str, str] = {}  # word -> term ("" for a stop word)
        self._reset_cache()

    def _reset_cache(self) -> None:
        self._cache.clear()
        self._cache.update(dict.fromkeys(self._stopwords, _STOP))

    def ids(self, texts: Iterable[str]) -> list[list[int]]:
        """Term ids per text, stop words and (when not growing) unknown terms removed."""
        get = self._cache.get
        out: list[list[int]] = []
        for text in texts:
            words = self._findall(text.lower() if self._lower else text)
            ids = list(map(get, words))
            if None in ids:
                for j, value in enumerate(ids):
                    if value is None:
                        ids[j] = self._term_id(words[j])
            out.append([i for i in ids if i >= 0] if _STOP in ids else ids)
        if len(self._cache) > _CACHE_LIMIT:
            self._reset_cache()
        return out

    def stems(self, texts: Iterable[str]) -> list[str]:
        """Each text's terms joined by spaces (no vocabulary needed): the part of the
        analysis that parallel index builds run in worker processes."""
        get = self._stem_cache.get
        out: list[str] = []
        for text in texts:
            words = self._findall(text.lower() if self._lower else text)
            terms = list(map(get, words))
            if None in terms:
                for j, value in enumerate(terms):
                    if value is None:
                        terms[j] = self._stem_of(words[j])
            out.append(" ".join(filter(None, terms)))
        if len(self._stem_cache) > _CACHE_LIMIT:
            self._stem_cache.clear()
        return out

    def ids_from_stems(self, joined: Iterable[str]) -> list[list[int]]:
        """Term ids for the output of :meth:`stems`, growing the vocabulary in order, so
        ``ids_from_stems(stems(texts)) == ids(texts)``."""
        vocab = self.vocab
        get = vocab.get
        out: list[list[int]] = []
        for line in joined:
            terms = line.split(" ") if line else []
            ids = list(map(get, terms))
            if None in ids:
                for j, value in enumerate(ids):
                    if value is None:
                        tid = get(terms[j])
                        if tid is None:
                            if not self.grow:
                                tid = _STOP
                            else:
                                tid = vocab[terms[j]] = len(vocab)
                        ids[j] = tid
                if _STOP in ids:
                    ids = [i for i in ids if i >= 0]
            out.append(ids)
        return out

    def _stem_of(self, word: str) -> str:
        stem = "" if word in self._stopwords else (self._stem(word) if self._stem else word)
        self._stem_cache[word] = stem
        return stem

    def _term_id(self, word: str) -> int:
        term = self._stem(word) if self._stem is not None else word
        tid = self.vocab.get(term)
        if tid is None:
            if not self.grow:
                return _STOP  # not cached: the vocabulary is fixed, the miss is cheap
            tid = self.vocab[term] = len(self.vocab)
        self._cache[word] = tid
        return tid

    def unknown(self, text: str) -> list[str]:
        """The words of ``text`` (stop words aside) whose term no indexed passage holds."""
        words = self._findall(text.lower() if self._lower else text)
        stem = self._stem or (lambda w: w)
        return [
            w
            for w in dict.fromkeys(words)
            if w not in self._stopwords and self.vocab.get(stem(w)) is None
        ]

    def terms(self, texts: Iterable[str]) -> list[list[str]]:
        """Term strings per text (for reference implementations such as rank-bm25)."""
        ids = self.ids(texts)
        inverse = {tid: term for term, tid in self.vocab.items()}
        return [[inverse[i] for i in doc] for doc in ids]


def bm25s_tokenizer(config: dict[str, Any] | None = None) -> Tokenizer:
    """The bm25s Tokenizer with the same config: the reference :class:`Analyzer` matches."""
    from bm25s.tokenization import Tokenizer

    cfg = {**DEFAULT_ANALYZER, **(config or {})}
    return Tokenizer(
        lower=cfg["lower"],
        splitter=cfg["pattern"],
        stopwords=cfg["stopwords"] or None,
        stemmer=Stemmer.Stemmer(cfg["stemmer"]) if cfg["stemmer"] else None,
    )


def analyze(texts: Iterable[str], config: dict[str, Any] | None = None) -> list[list[str]]:
    """Term strings for ``texts`` with a fresh vocabulary."""
    return Analyzer(config).terms(texts)
