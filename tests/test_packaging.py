"""The runtime as users get it, without the research lab.

Every other test runs on the editable checkout, where ``eval`` and ``training`` sit beside the
runtime. These start the command the way the GPU image and a wheel install do: from exactly the
folders ``Dockerfile.gpu`` copies, and from the built wheel in a clean virtual environment with
only the runtime's declared dependencies; each serves a chat request with the fake engine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest

from cli.main import LAB_PACKAGES
from tests.conftest import TINY_PASSAGES, write_tsv
from tests.serving.conftest import REPO, cli_server

QUESTION = "Why do leaves change color in autumn?"


def image_copies(dockerfile: Path = REPO / "Dockerfile.gpu") -> list[tuple[list[str], str]]:
    """The sources and destination of each ``COPY`` line of the Dockerfile."""
    copies = []
    for line in dockerfile.read_text().splitlines():
        words = line.split()
        if words and words[0] == "COPY":
            copies.append((words[1:-1], words[-1]))
    return copies


def image_tree(out: Path) -> Path:
    """What the image's ``COPY`` lines put in its work folder, copied from the checkout."""
    for sources, dest in image_copies():
        for source in sources:
            src = REPO / source
            target = out / dest
            if src.is_dir():
                shutil.copytree(src, target, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                target.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, target / src.name)
    return out


def run(
    command: Sequence[str], *args: str, cwd: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """The command with this environment less its TYPED_RAG_ settings, plus ``env``."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("TYPED_RAG_")} | env
    return subprocess.run(
        [*command, *args], cwd=cwd, env=full, capture_output=True, text=True, timeout=300
    )


def check_runtime(command: Sequence[str], tmp: Path, cwd: Path, env: dict[str, str]) -> None:
    """--help, config show, a lab command's message, and one chat answer from ``serve``."""
    shown = run(command, "--help", cwd=cwd, env=env)
    assert shown.returncode == 0, shown.stderr
    for name in ("ask", "serve", "index", "retrieve", "config"):
        assert name in shown.stdout
    config = run(command, "config", "show", cwd=cwd, env=env)
    assert config.returncode == 0, config.stderr
    assert "engine.backend" in config.stdout
    keys = [line.split()[0] for line in config.stdout.splitlines() if line and line[0] != " "]
    assert "retrieval.kind" in keys and not [k for k in keys if k.startswith("eval.")]
    lab = run(command, "eval", "run", "--limit", "3", cwd=cwd, env=env)
    assert lab.returncode == 2
    assert "research-lab command" in lab.stderr and "Traceback" not in lab.stderr
    corpus = write_tsv(tmp / "tiny.tsv", TINY_PASSAGES)
    with cli_server(tmp, corpus, command=command, cwd=cwd, env_extra=env) as url:
        resp = httpx.post(
            f"{url}/v1/chat/completions",
            json={"model": "typed-rag", "messages": [{"role": "user", "content": QUESTION}]},
            timeout=60,
        )
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["choices"][0]["message"]["content"] == "A fake answer [1]."
    assert body["typed_rag"]["citations"]


def wheel_packages() -> set[str]:
    """The top-level packages the wheel ships (pyproject's ``packages.find`` include)."""
    with (REPO / "pyproject.toml").open("rb") as f:
        include = tomllib.load(f)["tool"]["setuptools"]["packages"]["find"]["include"]
    return {pattern.rstrip("*") for pattern in include}


def test_the_image_folders_alone_start_the_server(tmp_path: Path) -> None:
    app = image_tree(tmp_path / "app")
    for package in wheel_packages():  # the image's `pip install .` builds this same wheel
        assert (app / package / "__init__.py").is_file(), f"the image lacks {package}/"
    for package in LAB_PACKAGES:
        assert not (app / package).exists(), f"the image copies the lab's {package}/"
    # -S: no site-packages processing, so the checkout's editable install (a .pth) is not on
    # the path; the installed dependencies are, through PYTHONPATH.
    libs = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    env = {"PYTHONPATH": os.pathsep.join([str(app), *sorted(libs)])}
    check_runtime((sys.executable, "-S", "-m", "cli"), tmp_path, app, env)


def runtime_requirements() -> list[str]:
    """The runtime's declared dependencies: the base list; the CPU engines are an extra."""
    with (REPO / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)["project"]["dependencies"]


@pytest.mark.slow
def test_the_wheel_installs_into_a_clean_venv_and_serves(tmp_path: Path) -> None:
    # Built from a copy of what it needs (setuptools writes build/ beside the sources).
    src = tmp_path / "src"
    for name in ("pyproject.toml", "README.md", *wheel_packages()):
        from_repo = REPO / name
        if from_repo.is_dir():
            shutil.copytree(from_repo, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            src.mkdir(parents=True, exist_ok=True)
            shutil.copy2(from_repo, src / name)
    dist = tmp_path / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
        + ["-q", "-w", str(dist), str(src)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr
    assert "Deprecat" not in built.stderr  # no warnings of the project's own packaging
    (wheel,) = dist.glob("typed_rag-*.whl")
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert wheel_packages() <= tops
    assert not tops & {*LAB_PACKAGES, "benchmarks", "tests"}, tops

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    installed = subprocess.run(
        [*pip, "-c", str(REPO / "scripts" / "constraints.txt"), str(wheel)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert installed.returncode == 0, installed.stderr
    frozen = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "freeze"], capture_output=True, text=True
    ).stdout.lower()
    assert "torch" not in frozen and "llama" not in frozen  # only what the runtime declares
    assert len(runtime_requirements()) > 5
    env = {"PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
    check_runtime((str(venv / "bin" / "typed-rag"),), tmp_path, tmp_path, env)
