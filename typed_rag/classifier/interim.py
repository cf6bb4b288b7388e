"""The embedding head stands in while the fine-tuned classifier trains.

A fresh set-up (``scripts/setup.sh assets``) trains the embedding head first (a few
minutes) and fine-tunes the default classifier (``classifier.kind = "finetuned"``) in the
background, niced, which takes longer. Until the fine-tuned artefact is there,
:class:`InterimClassifier` types questions with the head; it looks for the artefact (one
``stat``, at most every :data:`POLL_S` seconds, on the request path), loads it on a
background thread, and from then on answers with it. A file that does not load keeps the
head (logged) until another file replaces it.

``python -m typed_rag.classifier.interim`` prints, as ``key=value`` lines, the configured
kind and where the fine-tuned artefact, the background run's log and its pid file are: the
set-up script reads them, so both agree with the settings (``home``, ``classifier.path``).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from typed_rag.classifier.base import TypeClassifier
from typed_rag.config import Settings, load_settings

log = logging.getLogger(__name__)

# typed_rag.classifier.finetune.ARTEFACT_NAME (that module imports torch; a test keeps
# the two equal).
FINETUNED_ARTEFACT = "type_finetuned.safetensors"
FINETUNE_LOG = "classifier-finetune.log"
FINETUNE_PID = "classifier-finetune.pid"
# How often, at most, a request looks for the fine-tuned artefact.
POLL_S = 30.0


def finetuned_artefact_path(settings: Settings) -> Path:
    return settings.classifier_dir / FINETUNED_ARTEFACT


def finetune_log_path(settings: Settings) -> Path:
    """The log of the set-up's background fine-tuning."""
    return settings.home / "logs" / FINETUNE_LOG


def finetune_pid_path(settings: Settings) -> Path:
    """The pid file of the set-up's background fine-tuning (one run at a time)."""
    return settings.home / "logs" / FINETUNE_PID


def finetune_running(settings: Settings) -> bool:
    """Whether the pid file names a live process (the set-up's background fine-tuning)."""
    try:
        pid = int(finetune_pid_path(settings).read_text().strip())
        os.kill(pid, 0)
    except PermissionError:  # alive, another user's
        return True
    except (OSError, ValueError):
        return False
    return True


class InterimClassifier(TypeClassifier):
    """A stand-in classifier (the embedding head) until ``artefact`` appears and ``load``
    gives the classifier it holds; then that one."""

    def __init__(
        self,
        stand_in: TypeClassifier,
        artefact: Path,
        load: Callable[[], TypeClassifier],
        poll_s: float = POLL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.current = stand_in  # the head is let go once the fine-tuned one replaces it
        self.name = stand_in.name
        self.switched = False  # whether the fine-tuned classifier has replaced the stand-in
        self.artefact = artefact
        self.poll_s = poll_s
        self._load = load
        self._clock = clock
        self._lock = threading.Lock()
        self._next_look = clock() + poll_s
        self._loader: threading.Thread | None = None
        self._failed: tuple[int, int] | None = None  # (mtime, size) of a file that did not load

    def predict_proba(self, questions: Sequence[str]) -> list[list[float]]:
        self.look()
        return self.current.predict_proba(questions)

    def look(self) -> threading.Thread | None:
        """Start loading the artefact if it has appeared (one stat, at most every ``poll_s``);
        returns the loading thread when this call started one."""
        if self.switched:
            return None
        with self._lock:
            now = self._clock()
            if self._loader is not None or now < self._next_look:
                return None
            self._next_look = now + self.poll_s
            try:
                st = self.artefact.stat()
            except OSError:
                return None
            seen = (st.st_mtime_ns, st.st_size)
            if seen == self._failed:
                return None
            loader = threading.Thread(
                target=self._switch, args=(seen,), name="finetuned-classifier-load", daemon=True
            )
            self._loader = loader
        loader.start()
        return loader

    def _switch(self, seen: tuple[int, int]) -> None:
        try:
            loaded = self._load()
        except Exception as exc:  # any failure keeps the stand-in; the next file is tried
            log.warning(
                "the fine-tuned question-type classifier %s did not load (%s); %s keeps "
                "typing questions",
                self.artefact,
                exc,
                self.current.name,
            )
            with self._lock:
                self._failed, self._loader = seen, None
            return
        with self._lock:
            self.current, self.name, self.switched, self._loader = loaded, loaded.name, True, None
        log.info("fine-tuned question-type classifier %s loaded: it types questions now",
                 self.artefact)  # fmt: skip


def head_until_finetuned(settings: Settings) -> InterimClassifier | None:
    """The embedding head standing in for the fine-tuned classifier when only the head is
    trained; None when the fine-tuned artefact is there or the head's is not."""
    from typed_rag.classifier import embedding_head  # heavy: torch
    from typed_rag.classifier.finetune import FineTunedClassifier  # heavy: torch

    artefact = finetuned_artefact_path(settings)
    if artefact.is_file() or not embedding_head.artefact_path(settings).is_file():
        return None
    head = embedding_head.EmbeddingHeadClassifier.load(settings)
    if finetune_running(settings):
        how = f"it is training in the background (log: {finetune_log_path(settings)})"
    else:
        how = "train it with `typed-rag classifier train --kind finetuned` (about 8 minutes)"
    log.warning(
        "no fine-tuned question-type classifier yet at %s: the embedding head types questions "
        "until it appears (checked every %.0f s); %s",
        artefact,
        POLL_S,
        how,
    )
    return InterimClassifier(head, artefact, lambda: FineTunedClassifier.load(settings))


def main() -> None:
    """Print the configured kind and the fine-tuning's paths for ``scripts/setup.sh``."""
    settings = load_settings()
    print(f"kind={settings.classifier.kind}")
    print(f"finetuned={finetuned_artefact_path(settings)}")
    print(f"log={finetune_log_path(settings)}")
    print(f"pid={finetune_pid_path(settings)}")


if __name__ == "__main__":
    main()
