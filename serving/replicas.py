"""The server as N Ray Serve replicas: the same FastAPI app, one TypedRAG in each replica.

``typed-rag serve --replicas N`` (N > 1) calls :func:`serve_replicas`: it joins a Ray
cluster (or starts one on this machine), deploys :func:`application` behind Serve's HTTP
proxy on ``server.host:server.port`` and waits for a signal. Every replica builds the
app with :func:`serving.app.create_app`, so routes, streams (SSE), the admission queue
(429) and error bodies are the ones of a single server; Serve only picks the replica.
Collections and indexes are read-only memory-mapped files under ``settings.home``, which
every replica opens from the same (shared) path. The engine is the settings' one: built
inside each replica, or, with ``engine.backend=openai`` and ``engine.base_url``, one
shared OpenAI-compatible endpoint that all replicas call.

Ray is an optional extra (``typed-rag[ray]``), imported only inside these functions.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI

from serving.app import create_app
from typed_rag.config import Settings
from typed_rag.errors import UserError

log = logging.getLogger(__name__)

APP_NAME = "typed-rag"
DEPLOYMENT = "TypedRAGReplica"
REPLICA_HEADER = "x-typed-rag-replica"  # which replica answered (logs, the faults test)
INSTALL_HINT = "--replicas > 1 needs Ray Serve: pip install 'typed-rag[ray]'"

# Builds a replica's TypedRAG from the settings (None: the app builds it from the settings
# in the background, as a single server does). Tests and benchmarks pass one that gives
# the fake engine a delay; it must be importable by name on every node (cloudpickle).
RagFactory = Callable[[Settings], Any]


@dataclass(frozen=True)
class ReplicaPlan:
    """How many replicas and what each one reserves on the cluster."""

    replicas: int
    num_cpus: float
    num_gpus: float

    def describe(self) -> str:
        each = f"{self.num_gpus:g} GPU" if self.num_gpus else f"{self.num_cpus:g} CPU"
        return f"{self.replicas} Ray Serve replica(s), {each} each"


def plan_replicas(settings: Settings, replicas: int, num_cpus: float | None = None) -> ReplicaPlan:
    """Each replica holds its engine: a vLLM one needs its GPUs, others their CPU threads;
    a shared OpenAI-compatible endpoint leaves a replica only the pipeline's work (1 CPU)."""
    if replicas < 1:
        raise UserError(f"--replicas must be at least 1, got {replicas}")
    engine = settings.engine
    if engine.backend == "vllm":
        return ReplicaPlan(replicas, 1.0, float(engine.tensor_parallel_size))
    threads = engine.n_threads or 1
    cpus = num_cpus if num_cpus is not None else float(threads if engine.backend != "openai" else 1)
    return ReplicaPlan(replicas, cpus, 0.0)


def replica_settings(settings: Settings) -> Settings:
    """The settings each replica runs with. Uploads and ingestion jobs are off: N job
    queues over one ``home`` would race; build collections with ``typed-rag index build``
    (or a single server) and the replicas open them read-only."""
    docs = settings.documents
    if docs.uploads_with(settings.server.api_key) == "on":
        log.info("documents.uploads is off in Ray Serve replicas (collections are read-only)")
        settings = settings.with_section("documents", uploads="off")
    return settings


def _import_serve() -> Any:
    try:
        from ray import serve  # heavy: ray[serve]
    except ImportError:
        raise UserError(INSTALL_HINT) from None
    return serve


def application(
    settings: Settings,
    plan: ReplicaPlan,
    rag_factory: RagFactory | None = None,
) -> Any:
    """The Serve application: ``plan.replicas`` copies of the project's FastAPI app."""
    serve = _import_serve()
    server = settings.server
    # The app's own admission decides 429s: Serve hands a replica everything it may queue.
    ongoing = server.max_concurrent + server.short_slots + server.max_queue

    @serve.ingress()  # late-bound: the app is built in the replica, from the settings
    class TypedRAGReplica:
        """One replica: the single server's app, healthy once its TypedRAG is ready."""

        async def __init__(self, settings: Settings, rag_factory: RagFactory | None) -> None:
            self.settings = settings
            self.rag_factory = rag_factory
            self.built: FastAPI | None = None

        async def __serve_build_asgi_app__(self) -> FastAPI:
            rag = None
            if self.rag_factory is not None:
                rag = await asyncio.to_thread(self.rag_factory, self.settings)
            app = create_app(self.settings, rag)
            app.add_middleware(ReplicaHeader, replica=_replica_id())
            self.built = app
            return app

        async def check_health(self) -> None:
            """The first check (part of the replica's start) waits for TypedRAG to load,
            so Serve routes no request to a replica that would answer 503; later ones
            fail when the engine died, and Serve replaces the replica."""
            assert self.built is not None
            state = self.built.state.typed_rag
            while state.status in ("loading", "warming"):
                await asyncio.sleep(0.1)
            if not state.ready:
                raise RuntimeError(f"Typed-RAG is not ready: {state.describe()}")

    deployment = serve.deployment(
        TypedRAGReplica,
        name=DEPLOYMENT,
        num_replicas=plan.replicas,
        max_ongoing_requests=ongoing,
        ray_actor_options={"num_cpus": plan.num_cpus, "num_gpus": plan.num_gpus},
        health_check_period_s=5,
        graceful_shutdown_timeout_s=10,
    )
    return deployment.bind(replica_settings(settings), rag_factory)


def _replica_id() -> str:
    from ray import serve  # heavy: ray[serve]; only ever called inside a replica

    return str(serve.get_replica_context().replica_id.unique_id)


class ReplicaHeader:
    """Names the replica in every response's headers, so that a log line or a broken
    stream says which replica answered. Pure ASGI: streams pass through untouched."""

    def __init__(self, app: Any, replica: str) -> None:
        self.app = app
        self.header = (REPLICA_HEADER.encode(), replica.encode())

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def tagged(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), self.header]}
            await send(message)

        await self.app(scope, receive, tagged)


def connect(address: str | None, num_cpus: int | None = None) -> bool:
    """Join the Ray cluster at ``address`` (``auto``: the one this node belongs to), or
    start one on this machine when None; True when this call started Ray."""
    try:
        import ray  # heavy: ray
    except ImportError:
        raise UserError(INSTALL_HINT) from None
    _import_serve()
    if ray.is_initialized():
        return False
    try:
        if address is None:
            ray.init(num_cpus=num_cpus, include_dashboard=False)
        else:
            ray.init(address=address)
    except (ConnectionError, ValueError, RuntimeError, TimeoutError) as exc:
        raise UserError(f"cannot connect to the Ray cluster at {address!r}: {exc}") from None
    return True


def deploy(
    settings: Settings,
    replicas: int,
    *,
    rag_factory: RagFactory | None = None,
    num_cpus: float | None = None,
) -> str:
    """Deploy on the connected cluster, Serve's proxy on ``server.host:server.port``; the
    URL once every replica is ready."""
    serve = _import_serve()
    plan = plan_replicas(settings, replicas, num_cpus)
    srv = settings.server
    serve.start(http_options={"host": srv.host, "port": srv.port})
    log.info("deploying %s", plan.describe())
    serve.run(
        application(settings, plan, rag_factory),
        name=APP_NAME,
        route_prefix="/",
        blocking=False,
    )
    return f"http://{srv.host}:{srv.port}"


def healthy_replicas() -> int:
    """Replicas Serve counts as RUNNING (0 while the application is absent)."""
    serve = _import_serve()
    app = serve.status().applications.get(APP_NAME)
    if app is None or DEPLOYMENT not in app.deployments:
        return 0
    return int(app.deployments[DEPLOYMENT].replica_states.get("RUNNING", 0))


def replica_ids() -> set[str]:
    """The ids of the replica actors alive now (a killed one's name is gone at once)."""
    import ray  # heavy: ray

    prefix = f"SERVE_REPLICA::{APP_NAME}#{DEPLOYMENT}#"
    names = ray.util.list_named_actors(all_namespaces=True)
    return {n["name"][len(prefix) :] for n in names if n["name"].startswith(prefix)}


def replica_actor(replica: str) -> Any:
    """The Ray actor of the replica a :data:`REPLICA_HEADER` names (to kill it in tests)."""
    import ray  # heavy: ray

    return ray.get_actor(f"SERVE_REPLICA::{APP_NAME}#{DEPLOYMENT}#{replica}", namespace="serve")


def fake_rag(settings: Settings, delay_s: float) -> Any:
    """A TypedRAG from the settings whose fake engine takes ``delay_s`` per round, so that
    requests overlap (the faults test, the benchmark; no setting holds such a delay)."""
    from typed_rag.engines.fake import FakeEngine
    from typed_rag.system import TypedRAG

    rag = TypedRAG.from_settings(settings)
    rag.engine = FakeEngine(delay_s=delay_s)
    return rag


def _check_fits(plan: ReplicaPlan, resources: dict[str, float]) -> None:
    """On a cluster started here, more replicas than fit would wait forever: say so."""
    have_cpus, have_gpus = float(resources.get("CPU", 0)), float(resources.get("GPU", 0))
    if plan.replicas * plan.num_cpus > have_cpus or plan.replicas * plan.num_gpus > have_gpus:
        raise UserError(
            f"{plan.describe()} do not fit on this machine ({have_cpus:g} CPUs, "
            f"{have_gpus:g} GPUs): lower --replicas or engine.n_threads, or join a larger "
            "cluster with --ray-address"
        )


def serve_replicas(settings: Settings, replicas: int, address: str | None = None) -> int:
    """``typed-rag serve --replicas N``: deploy, then serve until SIGINT/SIGTERM."""
    import ray  # heavy: ray; connect() checked it is installed

    started = connect(address)
    if started:
        _check_fits(plan_replicas(settings, replicas), ray.cluster_resources())
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        url = deploy(settings, replicas)
        log.info(
            "serving Typed-RAG on %s with %d Ray Serve replicas (engine %s, model %s)",
            url,
            replicas,
            settings.engine.backend,
            settings.engine.model,
        )
        stop.wait()
    finally:
        serve = _import_serve()
        # Ends this application; Serve itself stays up on a cluster this call only joined.
        serve.delete(APP_NAME)
        if started:
            serve.shutdown()
            ray.shutdown()
    return 0


def build(args: dict[str, str]) -> Any:
    """Serve's application builder, for ``serve run serving.replicas:build config=...`` and
    a KubeRay RayService's ``import_path``: the settings file, and ``replicas`` (2)."""
    from typed_rag.config import load_settings

    settings = load_settings(args.get("config"))
    plan = plan_replicas(settings, int(args.get("replicas", 2)))
    return application(settings, plan)
