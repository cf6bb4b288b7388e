"""KV snapshots of recent prompts, so a prompt that starts like an earlier one skips that part.

Typed-RAG's prompts repeat long fixed parts: a plan prompt is the same ~220
tokens of instructions for every question of its type, an answer prompt starts
with the same system prompt and instructions, and a judge sees the same question
and references for every candidate. Prefill runs at ~55 tokens/s on a 2-core
CPU, so those parts cost seconds per call.

The cache keeps, per recent prompt, the KV cells of llama.cpp's sequence 0
(``llama_state_seq_get_data``: KV only, ~29 KB per token for a 1.5B model),
evicting the least recently used beyond a byte budget. A new prompt restores
the snapshot sharing its longest prefix and evaluates only the rest.

Reuse must not change what a seeded request samples. llama.cpp's CPU matrix
kernels process a batch's rows in groups, so a token's numbers depend on where
it sits in its batch. The engine therefore always evaluates a prompt in blocks
that end at multiples of ``block`` (absolute positions), cached or not, and
reuses a prefix only up to a multiple of ``GRAIN`` tokens (a divisor of
``block``), leaving at least ``MIN_TAIL`` tokens to evaluate in the first block
unless it reuses whole blocks: every token is then computed in the same row
group, by the same kind of kernel (a batch of a few tokens takes another code
path), either way. Measured on the captured typed-rag prompts: identical texts
with and without reuse (prefixes of 32 to 208 tokens reused); reusing all but
the last token of a prompt, without the ``MIN_TAIL`` rule, changed the text.
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

GRAIN = 16  # reuse granularity in tokens; divides every supported block size
MIN_TAIL = 16  # fewest tokens evaluated in a partly reused block


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """Length of the longest common prefix of two token arrays."""
    n = min(len(a), len(b))
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if len(differ) else n


def reusable(shared: int) -> int:
    """How many of ``shared`` common tokens may be reused (a multiple of GRAIN)."""
    return shared // GRAIN * GRAIN


def safe_reuse(keep: int, prompt_len: int, block: int) -> int:
    """``keep`` cut back so that the block it ends in evaluates at least MIN_TAIL tokens
    (or to that block's start): the rest is then computed as in a cold run."""
    if keep % block == 0:
        return keep
    tail = min(prompt_len, (keep // block + 1) * block) - keep
    return keep if tail >= MIN_TAIL else keep // block * block


def aligned_blocks(start: int, end: int, block: int) -> list[tuple[int, int]]:
    """Spans covering [start, end) that end at multiples of ``block`` (and at ``end``)."""
    spans = []
    pos = start
    while pos < end:
        stop = min(end, (pos // block + 1) * block)
        spans.append((pos, stop))
        pos = stop
    return spans


@dataclass
class Snapshot:
    tokens: np.ndarray  # the prompt whose KV cells ``data`` holds
    data: bytes


class PromptCache:
    """Least-recently-used KV snapshots of prompts within a byte budget."""

    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self._snapshots: OrderedDict[int, Snapshot] = OrderedDict()
        self._next_key = 0
        self.size_bytes = 0

    def __len__(self) -> int:
        return len(self._snapshots)

    def best(self, ids: np.ndarray) -> tuple[Snapshot | None, int]:
        """The snapshot sharing the longest reusable prefix with ``ids`` (marked as used)."""
        best_key, best_len = None, 0
        for key, snap in self._snapshots.items():
            n = reusable(common_prefix(snap.tokens, ids))
            if n > best_len:
                best_key, best_len = key, n
        if best_key is None:
            return None, 0
        self._snapshots.move_to_end(best_key)
        return self._snapshots[best_key], best_len

    def covers(self, ids: np.ndarray) -> bool:
        """Whether a snapshot already holds all of ``ids`` that could ever be reused."""
        return any(
            reusable(common_prefix(s.tokens, ids)) >= reusable(len(ids))
            for s in self._snapshots.values()
        )

    def add(self, tokens: np.ndarray, data: bytes) -> None:
        """Store a snapshot; evict the least recently used ones beyond the budget."""
        if len(data) > self.budget_bytes:
            return
        self._snapshots[self._next_key] = Snapshot(tokens=tokens.copy(), data=data)
        self._next_key += 1
        self.size_bytes += len(data)
        while self.size_bytes > self.budget_bytes:
            _, old = self._snapshots.popitem(last=False)
            self.size_bytes -= len(old.data)


def save_sequence(llama_cpp: Any, ctx: Any) -> bytes:
    """The KV cells of sequence 0 (no logits, no other sequences)."""
    size = llama_cpp.llama_state_seq_get_size(ctx, 0)
    buf = (ctypes.c_uint8 * size)()
    written = llama_cpp.llama_state_seq_get_data(ctx, buf, size, 0)
    return bytes(buf)[:written]


def load_sequence(llama_cpp: Any, ctx: Any, data: bytes) -> bool:
    """Replace sequence 0's KV cells with a snapshot; False if llama.cpp refused it."""
    buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
    return llama_cpp.llama_state_seq_set_data(ctx, buf, len(data), 0) > 0


def as_tokens(ids: Sequence[int]) -> np.ndarray:
    return np.asarray(ids, dtype=np.int64)
