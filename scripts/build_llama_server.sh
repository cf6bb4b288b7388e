#!/usr/bin/env bash
# Build llama.cpp's HTTP server (llama-server) once, from the llama.cpp source that ships inside
# the llama-cpp-python source distribution the set-up already pins, so the server and the
# in-process engine run the same llama.cpp. Cached under ~/.cache/typed-rag/llama-server/<version>.
#
#   scripts/build_llama_server.sh            prints the binary's path (builds it if missing)
#
# Why a separate binary: llama-server runs parallel slots with continuous batching, which the
# in-process engine cannot (it answers one request at a time).
set -euo pipefail

VERSION=${LLAMA_CPP_VERSION:-0.3.36}
CACHE=${TYPED_RAG_LLAMA_SERVER_DIR:-$HOME/.cache/typed-rag/llama-server}
DEST="$CACHE/$VERSION"
BIN="$DEST/bin/llama-server"
PY=${PYTHON:-python3}
JOBS=${JOBS:-$(nproc)}

if [ -x "$BIN" ]; then
  echo "$BIN"
  exit 0
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/llama-server-build.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
echo "==> fetching the llama-cpp-python $VERSION source distribution" >&2
"$PY" -m pip download -q --no-deps --no-binary llama-cpp-python -d "$WORK" "llama-cpp-python==$VERSION" >&2
tar -xzf "$WORK"/llama_cpp_python-"$VERSION".tar.gz -C "$WORK"
SRC="$WORK/llama_cpp_python-$VERSION/vendor/llama.cpp"
[ -f "$SRC/CMakeLists.txt" ] || { echo "no llama.cpp source in the sdist at $SRC" >&2; exit 1; }

echo "==> building llama-server (portable CPU build, $JOBS jobs; several minutes)" >&2
cmake -S "$SRC" -B "$WORK/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF \
  -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_SERVER=ON >&2
cmake --build "$WORK/build" --target llama-server -j "$JOBS" >&2

mkdir -p "$DEST/bin.tmp"
cp "$WORK/build/bin/llama-server" "$DEST/bin.tmp/"
rm -rf "$DEST/bin" && mv "$DEST/bin.tmp" "$DEST/bin"
echo "$BIN"
