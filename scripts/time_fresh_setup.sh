#!/usr/bin/env bash
# Time the README's first command on a fresh machine: a clone of this repository's HEAD with
# ../shared beside it and an empty home (no pip, model, wheel or index cache; the machine's
# pip configuration is copied, it names the package registry). Starts `make serve`, waits
# for /health, asks one Typed-RAG question, and records the minutes from the clone to the
# answer as fresh_setup_min in results/serving/summary.json (other keys kept).
#
#   bash scripts/time_fresh_setup.sh [WORKDIR]
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
W=${1:-$(mktemp -d /tmp/fresh-setup.XXXXXX)}
PORT=${PORT:-8765}
OUT=${OUT:-$REPO/results/serving/summary.json}
# The interpreter itself, not a shim: version managers (pyenv) look under $HOME, which
# is replaced below.
PY=$("${PYTHON:-python3.11}" -c 'import sys; print(sys.executable)')

start=$(date +%s)
git clone -q "$REPO" "$W/main"
ln -sfn "$(cd "$REPO/../shared" && pwd)" "$W/shared"
mkdir -p "$W/home/.config"
[ -d "$HOME/.config/pip" ] && cp -r "$HOME/.config/pip" "$W/home/.config/"
echo "fresh set-up in $W (log: $W/serve.log)"
(cd "$W/main" && HOME="$W/home" PYTHON="$PY" setsid make serve PORT="$PORT" >"$W/serve.log" 2>&1 & echo $! >"$W/serve.pid")
# make, the server and the background fine-tuning all run from the clone's venv
stop() { kill -- -"$(cat "$W/serve.pid")" 2>/dev/null || true; pkill -f "$W/main/.venv/" || true; }
trap stop EXIT

until curl -sf "http://127.0.0.1:$PORT/health" >/dev/null; do
  if ! kill -0 "$(cat "$W/serve.pid")" 2>/dev/null; then
    echo "make serve exited before the server was healthy:" >&2
    tail -20 "$W/serve.log" >&2
    exit 1
  fi
  sleep 5
done
healthy=$(date +%s)
curl -sf "http://127.0.0.1:$PORT/v1/chat/completions" -H 'content-type: application/json' \
  -d '{"model": "typed-rag", "max_tokens": 128, "messages": [{"role": "user", "content": "Why do leaves change color in autumn?"}]}' \
  >"$W/answer.json"
answered=$(date +%s)

"$PY" - "$OUT" "$start" "$healthy" "$answered" "$W" "$(git -C "$REPO" rev-parse --short HEAD)" <<'EOF'
import json, sys
from pathlib import Path
out, start, healthy, answered, work, commit = sys.argv[1:]
start, healthy, answered = int(start), int(healthy), int(answered)
answer = json.loads(Path(work, "answer.json").read_text())
summary = json.loads(Path(out).read_text()) if Path(out).exists() else {}
summary["fresh_setup_min"] = round((answered - start) / 60, 1)
summary["fresh_setup"] = {
    "commit": commit,
    "healthy_min": round((healthy - start) / 60, 1),
    "answer_min": round((answered - start) / 60, 1),
    "answer": answer["choices"][0]["message"]["content"],
    "what": "clone + make serve with an empty home (pip, wheels, models, classifier, index) "
    "until the first Typed-RAG answer",
}
Path(out).parent.mkdir(parents=True, exist_ok=True)
Path(out).write_text(json.dumps(summary, indent=1, ensure_ascii=False) + "\n")
print(f"healthy after {summary['fresh_setup']['healthy_min']} min, first answer after "
      f"{summary['fresh_setup_min']} min; wrote {out}")
EOF
