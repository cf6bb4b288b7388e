"""JSON schemas as llama.cpp grammars: escapes its parser lacks are refused with a hint."""

from __future__ import annotations

import json
import re

import pytest

from typed_rag.engines.grammar import GRAMMAR_ESCAPES, gbnf_of_schema, unsupported_escapes
from typed_rag.errors import UserError

pytest.importorskip("llama_cpp")


def string_with(pattern: str) -> str:
    schema = {"type": "object", "properties": {"v": {"type": "string", "pattern": pattern}}}
    return json.dumps(schema)


ACCEPTED = [r"^[0-9]+([.][0-9]+)*$", r"^a\-b$", r"^[A-Za-z_]+$", r'^say "hi"$']
REFUSED = {r"^\d+$": "d", r"^[0-9]+(\.[0-9]+)*$": ".", r"^[\w-]+$": "w", r"^\s*x$": "s"}


def test_escapes_are_read_in_pairs() -> None:
    assert unsupported_escapes(r'"a\\d" [\[\]] "\x41" "\n"') == []
    assert unsupported_escapes(r'"a\d" "\." [\w]') == [".", "d", "w"]


@pytest.mark.parametrize("pattern", ACCEPTED)
def test_patterns_the_parser_reads_pass(pattern: str) -> None:
    assert "root ::=" in gbnf_of_schema(string_with(pattern))


@pytest.mark.parametrize(("pattern", "escape"), list(REFUSED.items()))
def test_regex_escapes_are_refused_with_the_class_to_write(pattern: str, escape: str) -> None:
    with pytest.raises(UserError, match=re.escape(f"escape(s) \\{escape},")) as info:
        gbnf_of_schema(string_with(pattern))
    assert "write them as character classes" in str(info.value)


def test_properties_are_written_in_the_schemas_order() -> None:
    """The engine's grammar keeps the schema's key order (a parent before its children)."""
    from typed_rag.engines.grammar import schema_grammar
    from typed_rag.qtree.tree import tree_schema

    schema = tree_schema(3, 2)
    gbnf = gbnf_of_schema(json.dumps(schema))
    item = next(line for line in gbnf.splitlines() if line.startswith("subqueries-item ::="))
    assert item.index("question-kv") < item.index("children-kv")
    reverse = {"type": "object", "properties": {"zeta": {"type": "string"}, "alpha": {"type": "string"}},
               "required": ["zeta", "alpha"]}  # fmt: skip
    root = next(
        line for line in gbnf_of_schema(json.dumps(reverse)).splitlines() if "root ::=" in line
    )
    assert root.index("zeta") < root.index("alpha")
    assert schema_grammar(schema) is schema_grammar(tree_schema(3, 2))  # compiled once


@pytest.mark.slow
def test_the_escape_list_is_llama_cpps_own() -> None:
    """Every escape the check lets through parses in llama.cpp, and the refused ones do not
    (the parser runs on a real vocabulary; a refused grammar is never used for sampling)."""
    import llama_cpp

    from typed_rag.config import load_settings
    from typed_rag.models import ensure_model

    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    path = ensure_model(load_settings(), "smollm2-135m-instruct-q4_1")
    model = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
    vocab = llama_cpp.llama_model_get_vocab(model)

    def parses(gbnf: str) -> bool:
        sampler = llama_cpp.llama_sampler_init_grammar(vocab, gbnf.encode(), b"root")
        if sampler:
            llama_cpp.llama_sampler_free(sampler)
        return bool(sampler)

    try:
        hex_forms = {"x": "x41", "u": "u0041", "U": "U00000041"}
        for c in 'nrtxuU"-[\\]dws./':
            literal = f'root ::= "a\\{hex_forms.get(c, c)}"'
            assert parses(literal) == (c in GRAMMAR_ESCAPES), c
        from llama_cpp.llama_grammar import json_schema_to_gbnf

        for pattern in ACCEPTED:
            assert parses(gbnf_of_schema(string_with(pattern)))
        for pattern in REFUSED:
            assert not parses(json_schema_to_gbnf(string_with(pattern)))
    finally:
        llama_cpp.llama_model_free(model)
