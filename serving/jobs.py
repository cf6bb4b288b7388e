"""Ingestion jobs: builds of a collection, run apart from the requests, in a worker process.

Why a process: reading PDFs is CPU work that would hold the event loop (and the GIL) the
requests need, a parser that crashes or runs out of memory must not take the server with
it, and the build code lives in ``indexes``, which the server does not import. A job runs
``python -m cli index build --docs <uploads> --name NAME --status-file FILE
--exit-with-parent`` under ``nice``, with the server's settings in a TOML file (0600,
removed afterwards; the server section, with its key, left out), and reports what the
status file says. With no file left to index it runs ``index delete --name NAME`` instead.

Jobs of one collection run one at a time, in the order they were made; one build runs
on the machine at a time. Each job's state is a JSON file in ``<home>/jobs/``: a server
that was killed marks its unfinished jobs failed when it starts again (its builds died
with it, leaving each collection at its previous version).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from serving.paths import PathScrubber, ServerPaths
from serving.uploads import stored_files
from typed_rag.config import Settings
from typed_rag.retrieval.collections import uploads_dir

log = logging.getLogger(__name__)

Status = Literal["queued", "running", "succeeded", "failed"]
TERMINAL = ("succeeded", "failed")
JOBS_DIR = "jobs"
KEEP_JOBS = 500  # finished jobs remembered; older records are removed at start
POLL_S = 0.25  # how often a running job's status file is read
NICE = 10  # builds yield the CPU to the requests
PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # where ``python -m cli`` is found


@dataclass
class Job:
    """One build of a collection, as ``GET /v1/jobs/ID`` shows it."""

    id: str
    collection: str
    action: str  # "add" (files uploaded) or "remove" (a file deleted)
    files: list[str]  # the file names it was made for
    status: Status = "queued"
    created_at: float = field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None
    phase: str | None = None  # the build's: reading, indexing, dense, done, failed
    files_total: int = 0
    files_done: int = 0
    passages: int = 0
    current_file: str | None = None
    outcomes: dict[str, dict[str, Any]] = field(default_factory=dict)  # file name -> outcome
    errors: list[str] = field(default_factory=list)
    error: str | None = None  # why it failed
    pid: int | None = None
    revision: int = 0  # bumped on every change, for the event stream

    def elapsed_s(self) -> float:
        if self.started_at is None:
            return 0.0
        return round((self.finished_at or time.time()) - self.started_at, 3)

    def to_json(self) -> dict[str, Any]:
        """The API's view (no pid, no revision)."""
        out = asdict(self)
        out.pop("pid")
        out.pop("revision")
        return {"object": "job", **out, "elapsed_s": self.elapsed_s()}

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> Job:
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in names})


class JobQueue:
    """The server's jobs: made by the documents API, run in order, kept on disk."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.folder = settings.home / JOBS_DIR
        self.jobs: dict[str, Job] = {}
        # The command a job runs (tests may put a wrapper in front of it).
        self.command: list[str] = [sys.executable, "-m", "cli"]
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._procs: dict[str, asyncio.subprocess.Process] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._machine = asyncio.Semaphore(1)
        self._cleanups: set[asyncio.Future[None]] = set()
        self._closing = False
        self.paths = ServerPaths(settings)

    # -- lifetime -------------------------------------------------------------

    def recover(self) -> None:
        """Read the jobs of earlier runs; mark those a stopped server left unfinished."""
        self.folder.mkdir(parents=True, exist_ok=True)
        records = []
        for path in self.folder.glob("job-*.json"):
            try:
                records.append(Job.from_record(json.loads(path.read_text(encoding="utf-8"))))
            except (OSError, ValueError, TypeError):
                log.warning("unreadable job record %s; removed", path.name)
                path.unlink(missing_ok=True)
        records.sort(key=lambda j: j.created_at)
        for old in records[:-KEEP_JOBS]:
            (self.folder / f"{old.id}.json").unlink(missing_ok=True)
        for job in records[-KEEP_JOBS:]:
            if job.status == "running":
                self._fail(
                    job,
                    "the server stopped while this job ran (killed or crashed); the build "
                    "stopped with it and the collection kept its previous version",
                )
            elif job.status == "queued":
                self._fail(job, "the server stopped before this job ran")
            self.jobs[job.id] = job
        for pattern in ("job-*.toml", "job-*.status"):  # settings and status files
            for leftover in self.folder.glob(pattern):
                leftover.unlink(missing_ok=True)

    async def close(self) -> None:
        """Server shutdown: stop the builds (their collections stay as they were)."""
        self._closing = True
        for job in self.jobs.values():
            if job.status == "queued":
                self._fail(job, "the server stopped before this job ran")
        for proc in list(self._procs.values()):
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- the API's operations ----------------------------------------------------

    def submit(self, collection: str, action: str, files: list[str]) -> Job:
        """A new job for ``collection``; it runs after the collection's earlier ones."""
        job = Job(id=f"job-{uuid.uuid4().hex[:24]}", collection=collection, action=action,
                  files=files)  # fmt: skip
        self.jobs[job.id] = job
        self._save(job)
        task = asyncio.create_task(self._run(job), name=job.id)
        self._tasks[job.id] = task
        task.add_done_callback(lambda _: self._tasks.pop(job.id, None))
        return job

    def get(self, job_id: str) -> Job | None:
        return self.jobs.get(job_id)

    def of_collection(self, collection: str) -> list[Job]:
        """The collection's jobs, oldest first."""
        return sorted(
            (j for j in self.jobs.values() if j.collection == collection),
            key=lambda j: j.created_at,
        )

    async def cancel_collection(self, collection: str, reason: str) -> None:
        """Fail the collection's queued jobs and stop its running one (it is being deleted)."""
        for job in self.of_collection(collection):
            if job.status == "queued":
                self._fail(job, reason)
            elif job.status == "running":
                job.error = reason
                proc = self._procs.get(job.id)
                if proc is not None:
                    with contextlib.suppress(ProcessLookupError):
                        proc.kill()
                task = self._tasks.get(job.id)
                if task is not None:
                    await asyncio.gather(task, return_exceptions=True)

    async def delete_index(self, collection: str) -> tuple[int, str]:
        """Run ``index delete --name`` now (the request waits): its exit status and error."""
        proc = await self._spawn(["index", "delete", "--name", collection], None)
        _, err = await proc.communicate()
        return proc.returncode or 0, self._error_line(err.decode("utf-8", "replace"), collection)

    # -- running ---------------------------------------------------------------

    async def _run(self, job: Job) -> None:
        lock = self._locks.setdefault(job.collection, asyncio.Lock())
        async with lock:
            if job.status != "queued" or self._closing:
                return
            async with self._machine:
                if job.status != "queued" or self._closing:
                    return
                try:
                    await self._execute(job)
                except asyncio.CancelledError:
                    self._fail(job, job.error or "the server stopped while this job ran")
                    raise
                except Exception as exc:  # noqa: BLE001 - a job never takes the server down
                    log.error("job %s failed unexpectedly", job.id, exc_info=exc)
                    self._fail(job, "the job failed unexpectedly; the server log has the details")

    async def _execute(self, job: Job) -> None:
        folder = uploads_dir(self.settings, job.collection)
        status_file = self.folder / f"{job.id}.status"
        job.status, job.started_at = "running", time.time()
        self._save(job)
        if stored_files(folder):
            args = ["index", "build", "--docs", str(folder.absolute()), "--name", job.collection,
                    "--quiet", "--status-file", str(status_file), "--exit-with-parent"]  # fmt: skip
        else:  # the last file was deleted: the collection has no index any more
            args = ["index", "delete", "--name", job.collection]
        proc = await self._spawn(args, job)
        self._save(job)  # with its pid
        output = asyncio.ensure_future(proc.communicate())
        try:
            saved = time.monotonic()
            while not output.done():
                await asyncio.wait({output}, timeout=POLL_S)
                if self._follow(job, status_file, folder) and time.monotonic() - saved > 1.0:
                    self._save(job)
                    saved = time.monotonic()
            _, err = output.result()
        finally:
            if not output.done():
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await asyncio.gather(output, return_exceptions=True)
            self._procs.pop(job.id, None)
        self._follow(job, status_file, folder)
        status_file.unlink(missing_ok=True)
        rc = proc.returncode
        if rc == 0:
            job.status, job.finished_at, job.phase = "succeeded", time.time(), "done"
            job.current_file = None
            self._bump(job)
            self._save(job)
            log.info("job %s on %s succeeded: %d passages", job.id, job.collection, job.passages)
            return
        text = err.decode("utf-8", "replace")
        if job.error is None:
            if rc is not None and rc < 0:
                job.error = f"the build process was killed (signal {-rc})"
            else:
                job.error = self._error_line(text, job.collection) or (
                    f"the build process exited with status {rc}"
                )
        self._fail(job, job.error)
        log.warning("job %s on %s failed: %s", job.id, job.collection, job.error)

    async def _spawn(self, args: list[str], job: Job | None) -> asyncio.subprocess.Process:
        config = self.folder / f"{job.id if job else 'job-delete-' + uuid.uuid4().hex}.toml"
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(settings_toml(self.settings))
        nice = shutil.which("nice")
        argv = [*([nice, "-n", str(NICE)] if nice else []), *self.command,
                "--config", str(config), *args]  # fmt: skip
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=PACKAGE_ROOT,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except BaseException:
            config.unlink(missing_ok=True)
            raise
        if job is not None:
            job.pid = proc.pid
            self._procs[job.id] = proc
        self._remove_when_done(proc, config)
        return proc

    def _remove_when_done(self, proc: asyncio.subprocess.Process, config: Path) -> None:
        """The settings file lives as long as the process that reads it."""

        async def remove() -> None:
            with contextlib.suppress(Exception):
                await proc.wait()
            config.unlink(missing_ok=True)

        task = asyncio.ensure_future(remove())
        self._cleanups.add(task)
        task.add_done_callback(self._cleanups.discard)

    def _follow(self, job: Job, status_file: Path, folder: Path) -> bool:
        """Copy the build's status file into ``job``; True if anything changed."""
        try:
            status = json.loads(status_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        scrub = self.scrubber(job.collection)
        before = (job.phase, job.files_done, job.passages, job.current_file, len(job.outcomes))
        job.phase = status.get("phase")
        job.files_total = int(status.get("files_total") or 0)
        job.files_done = int(status.get("files_done") or 0)
        job.passages = int(status.get("passages") or 0)
        current = status.get("current_file")
        job.current_file = scrub.text(current) if current else None
        outcomes = {
            scrub.text(p): {k: self.paths.message(v, scrub) if isinstance(v, str) else v
                            for k, v in o.items()}
            for p, o in (status.get("files") or {}).items()
        }  # fmt: skip
        job.outcomes = outcomes
        job.errors = [
            f"{name}: {o['reason']}" for name, o in outcomes.items() if o.get("state") == "skipped"
        ]
        if status.get("error"):
            job.error = self.paths.message(str(status["error"]), scrub)
        after = (job.phase, job.files_done, job.passages, job.current_file, len(job.outcomes))
        if after != before:
            self._bump(job)
            return True
        return False

    def scrubber(self, collection: str) -> PathScrubber:
        """What a job's messages may show: file names, not the server's folders."""
        folder = str(uploads_dir(self.settings, collection).absolute())
        return self.paths.home.with_roots([folder])

    def _error_line(self, stderr: str, collection: str) -> str:
        """The CLI's ``typed-rag: error: ...`` message (and what follows it), scrubbed."""
        marker = "typed-rag: error:"
        at = stderr.rfind(marker)
        if at < 0:
            return ""
        message = stderr[at + len(marker) :].strip()
        return self.paths.message(message, self.scrubber(collection))[:4000]

    def _fail(self, job: Job, reason: str) -> None:
        job.status, job.error = "failed", reason
        job.finished_at = job.finished_at or time.time()
        job.current_file = None
        if reason not in job.errors:
            job.errors.append(reason)
        self._bump(job)
        self._save(job)

    @staticmethod
    def _bump(job: Job) -> None:
        job.revision += 1

    def _save(self, job: Job) -> None:
        """The job's record, replaced in one rename."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            path = self.folder / f"{job.id}.json"
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text(json.dumps(asdict(job), ensure_ascii=False), encoding="utf-8")
            os.replace(tmp, path)
        except OSError as exc:
            log.warning("could not save job %s: %s", job.id, exc)


def settings_toml(settings: Settings) -> str:
    """``settings`` as a TOML file the CLI reads (``--config``), without the server section."""
    data = settings.model_dump(mode="json", exclude={"server"})
    top = [
        f"{k} = {_toml(v)}" for k, v in data.items() if not isinstance(v, dict) and v is not None
    ]
    lines = top
    for section, values in data.items():
        if not isinstance(values, dict):
            continue
        lines.append(f"\n[{section}]")
        lines += [f"{k} = {_toml(v)}" for k, v in values.items() if v is not None]
    return "\n".join(lines) + "\n"


def _toml(value: Any) -> str:
    if isinstance(value, dict):
        inner = ", ".join(
            f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items() if v is not None
        )
        return "{" + inner + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value)
