"""JSON schemas as llama.cpp decoding grammars, checked before llama.cpp sees them.

llama-cpp-python converts a schema to GBNF in Python and copies a ``pattern``'s
regex escapes (``\\d``, ``\\w``, ``\\s``, ``\\.``) into it as they are. llama.cpp's
grammar parser knows only a few escapes; on any other it fails, and llama-cpp-python
then crashes the whole process on the null sampler it gets back. So every grammar is
read here first, the way that parser reads escapes, and one it would reject is a
:class:`~typed_rag.errors.UserError` naming the escapes and what to write instead.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

from typed_rag.errors import UserError

# The characters llama.cpp's grammar parser accepts after a backslash (checked against
# the real parser in tests/engines/test_grammar.py): \n \r \t, \x.. \u.... \U........,
# and the literal " - [ \ ].
GRAMMAR_ESCAPES = frozenset('nrtxuU"-[\\]')
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_INSTEAD = {"d": "[0-9]", "w": "[A-Za-z0-9_]", "s": "[ \\t\\n]", ".": "[.]", "/": "/"}


def unsupported_escapes(gbnf: str) -> list[str]:
    """The backslash escapes in ``gbnf`` that llama.cpp's grammar parser rejects."""
    return sorted({m.group(1) for m in _ESCAPE.finditer(gbnf)} - GRAMMAR_ESCAPES)


def gbnf_of_schema(schema_json: str) -> str:
    """The GBNF grammar of a JSON schema; :class:`UserError` when llama.cpp could not parse it."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf  # heavy: llama_cpp

    gbnf = json_schema_to_gbnf(schema_json)
    bad = unsupported_escapes(gbnf)
    if bad:
        hints = ", ".join(f"\\{c} -> {_INSTEAD[c]}" for c in bad if c in _INSTEAD)
        raise UserError(
            "the JSON schema cannot be decoded by llama.cpp: a pattern uses the escape(s) "
            + " ".join(f"\\{c}" for c in bad)
            + ", which its grammars do not support; write them as character classes"
            + (f" ({hints})" if hints else "")
        )
    return gbnf


def schema_grammar(schema: dict[str, Any]) -> Any:
    """The grammar of ``schema`` with its properties in the order written.

    llama.cpp's grammar makes the model write an object's properties in the order
    the schema lists them, so the order is part of the request: a tree node's
    question before its children, a core question before its subtopics. (Keys
    sorted for the cache once made every object alphabetical.)
    """
    return grammar(json.dumps(schema))


@lru_cache(maxsize=64)
def grammar(schema_json: str) -> Any:
    """The llama.cpp grammar of a JSON schema (compiled once per schema)."""
    from llama_cpp import LlamaGrammar  # heavy: llama_cpp

    return LlamaGrammar.from_string(gbnf_of_schema(schema_json), verbose=False)
