"""A memory-cheap set of passage ids, for finding duplicate ids in a 21M-row corpus.

A Python ``set`` of 21M strings costs several GiB. Here every id becomes one 64-bit key
kept in a sorted numpy array (8 bytes per id) plus a small Python set of recent keys that
is merged into the array every ``flush_at`` ids. Decimal ids without leading zeros (DPR's
``1`` .. ``21015324``) are stored exactly, so they can never collide; any other id is
stored as a 62-bit hash in a disjoint (negative) key range, where a false "duplicate"
needs a hash collision (about 1 in 10^5 on 21M non-numeric ids).
"""

from __future__ import annotations

import numpy as np

_MAX_EXACT_DIGITS = 18  # < 2**62, so exact keys stay positive int64 values
_HASH_RANGE = 1 << 62


def id_key(pid: str) -> int:
    """The 64-bit key of a passage id: its value when it is a plain decimal, else a hash."""
    if (
        pid.isascii()
        and pid.isdigit()
        and len(pid) <= _MAX_EXACT_DIGITS
        and (pid[0] != "0" or pid == "0")
    ):
        return int(pid)
    return -(hash(pid) % _HASH_RANGE) - 1


class SeenIds:
    """Set of ids with ``add`` returning False for an id already seen."""

    def __init__(self, flush_at: int = 1 << 20) -> None:
        self._flush_at = flush_at
        self._recent: set[int] = set()
        self._sorted = np.empty(0, dtype=np.int64)

    def __len__(self) -> int:
        return len(self._recent) + int(self._sorted.size)

    def add(self, pid: str) -> bool:
        """Remember ``pid``; return False (and change nothing) if it was already there."""
        key = id_key(pid)
        if key in self._recent:
            return False
        arr = self._sorted
        if arr.size:
            i = int(arr.searchsorted(key))
            if i < arr.size and arr[i] == key:
                return False
        self._recent.add(key)
        if len(self._recent) >= self._flush_at:
            self._flush()
        return True

    def _flush(self) -> None:
        recent = np.fromiter(self._recent, dtype=np.int64, count=len(self._recent))
        merged = np.concatenate([self._sorted, np.sort(recent)])
        merged.sort(kind="stable")  # two sorted runs: a linear merge
        self._sorted = merged
        self._recent = set()

    @property
    def nbytes(self) -> int:
        """Approximate memory held (array bytes plus ~70 bytes per pending set entry)."""
        return int(self._sorted.nbytes) + 70 * len(self._recent)
