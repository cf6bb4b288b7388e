#!/usr/bin/env bash
# Time the README's first command on a fresh machine: a clone of this repository's HEAD with
# ../shared beside it and an empty home (no pip, model, wheel or index cache; the machine's
# pip configuration is copied, it names the package registry). Starts `make serve`, waits
# for /health, asks five Typed-RAG questions one after another (the first five answers of a
# newcomer, while the set-up's classifier fine-tuning is still due in the background), then
# waits for the fine-tuning to finish, restarts the server (so no prompt of the first round
# is cached) and asks the same five again. Records the minutes from the clone to the first
# answer as fresh_setup_min, and each round's answer seconds with the ratio of their
# medians (issue 79: a fresh machine is not slower than a warm one), in
# results/serving/summary.json (other keys kept).
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
# ... and waits (up to 60 s) until the port answers no more: a server still shutting down
# answers /health, and the next round's first question would reach it
stop() {
  kill -- -"$(cat "$W/serve.pid")" 2>/dev/null || true
  pkill -f "$W/main/.venv/" || true
  for _ in $(seq 60); do curl -s -o /dev/null "http://127.0.0.1:$PORT/health" || return 0; sleep 1; done
}
trap stop EXIT

QUESTIONS=(
  "Why do leaves change color in autumn?"
  "How do I make sourdough bread at home?"
  "What is the difference between a violin and a viola?"
  "Is nuclear power a good way to reduce carbon emissions?"
  "What should I know before adopting a cat?"
)
wait_healthy() { # PIDFILE
  until curl -sf "http://127.0.0.1:$PORT/health" >/dev/null; do
    if ! kill -0 "$(cat "$1")" 2>/dev/null; then
      echo "the server exited before it was healthy:" >&2
      tail -20 "$W/serve.log" >&2
      exit 1
    fi
    sleep 5
  done
}
ask_all() { # ROUND: each answer to $W/ROUND-i.json, its seconds to $W/ROUND.times
  local i=0 q
  : >"$W/$1.times"
  for q in "${QUESTIONS[@]}"; do
    i=$((i + 1))
    "$PY" -c 'import json, sys; print(json.dumps({"model": "typed-rag", "max_tokens": 128,
      "messages": [{"role": "user", "content": sys.argv[1]}]}))' "$q" >"$W/body.json"
    curl -sf -o "$W/$1-$i.json" -w '%{time_total}\n' "http://127.0.0.1:$PORT/v1/chat/completions" \
      -H 'content-type: application/json' --data-binary @"$W/body.json" >>"$W/$1.times"
    # an if, not `test && ...`: a failed test as the function's last command ends it with
    # status 1, and set -e then stops the script before the second round
    if [ "$i" = 1 ] && [ "$1" = first ]; then date +%s >"$W/answered"; fi
  done
}

wait_healthy "$W/serve.pid"
healthy=$(date +%s)
ask_all first
answered=$(cat "$W/answered")
# The set-up's fine-tuning (paused while the answers ran) finishes while the server idles.
ft_pid="$W/home/.cache/typed-rag/logs/classifier-finetune.pid"
while [ -f "$ft_pid" ] && kill -0 "$(cat "$ft_pid")" 2>/dev/null; do sleep 10; done
stop
(cd "$W/main" && HOME="$W/home" setsid .venv/bin/typed-rag serve --port "$PORT" >>"$W/serve.log" 2>&1 & echo $! >"$W/serve.pid")
wait_healthy "$W/serve.pid"
ask_all later

"$PY" - "$OUT" "$start" "$healthy" "$answered" "$W" "$(git -C "$REPO" rev-parse --short HEAD)" <<'EOF'
import json, statistics, sys
from pathlib import Path
out, start, healthy, answered, work, commit = sys.argv[1:]
start, healthy, answered = int(start), int(healthy), int(answered)
answer = json.loads(Path(work, "first-1.json").read_text())
rounds = {r: [float(t) for t in Path(work, f"{r}.times").read_text().split()]
          for r in ("first", "later")}
types = {r: [json.loads(Path(work, f"{r}-{i}.json").read_text()).get("typed_rag", {}).get("type")
             for i in range(1, 6)] for r in rounds}
summary = json.loads(Path(out).read_text()) if Path(out).exists() else {}
summary["fresh_setup_min"] = round((answered - start) / 60, 1)
summary["fresh_setup"] = {
    "commit": commit,
    "healthy_min": round((healthy - start) / 60, 1),
    "answer_min": round((answered - start) / 60, 1),
    "answer": answer["choices"][0]["message"]["content"],
    "what": "clone + make serve with an empty home (pip, wheels, models, classifier, index) "
    "until the first Typed-RAG answer",
    "first5_s": rounds["first"],
    "later5_s": rounds["later"],
    "first5_types": types["first"],
    "later5_types": types["later"],
    "first5_vs_later_median": round(
        statistics.median(rounds["first"]) / statistics.median(rounds["later"]), 2),
    "later": "the same five questions after the background fine-tuning finished, the "
    "server restarted (no prompt cached)",
}
Path(out).parent.mkdir(parents=True, exist_ok=True)
Path(out).write_text(json.dumps(summary, indent=1, ensure_ascii=False) + "\n")
print(f"healthy after {summary['fresh_setup']['healthy_min']} min, first answer after "
      f"{summary['fresh_setup_min']} min; first five / later five median "
      f"{summary['fresh_setup']['first5_vs_later_median']}x; wrote {out}")
EOF
