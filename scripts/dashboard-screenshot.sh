#!/usr/bin/env bash
# Takes docs/figures/dashboard.png: the dashboard of a run of 20 no-op operators that grows
# from 1 to 4 and then 10 workers, shot in headless Chromium after 12 intervals.
# Usage: scripts/dashboard-screenshot.sh [OUT.png]   (needs a release build and chromium)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/figures/dashboard.png}
clasp=${CLASP:-target/release/clasp}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
scripts/wide-pipeline.sh 20 > "$work/wide.toml"
"$clasp" gen wc --count 200000 --out "$work/lines.txt" > /dev/null
"$clasp" run "$work/wide.toml" --input "file:$work/lines.txt" --rate 300 --batch 16 --slots 2 \
  --max-workers 10 --rescale-at 300:4,1200:10 --interval-ms 500 --quiet 2> "$work/stderr" &
run=$!
url=""
for _ in $(seq 100); do
  url=$(grep -o 'http://[0-9.:]*/' "$work/stderr" | head -1 || true)
  [[ -n $url ]] && break
  sleep 0.1
done
[[ -n $url ]] || { cat "$work/stderr"; exit 1; }
for _ in $(seq 300); do
  points=$( (curl -s "${url}api/v1/series" || true) | grep -o '"t":' | wc -l || true)
  (( points >= 24 )) && break
  sleep 0.2
done
chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
  --disable-component-update --disable-sync --no-first-run --user-data-dir="$work/profile" \
  --window-size=1400,1250 --virtual-time-budget=3000 --screenshot="$out" "$url" 2> /dev/null
kill "$run" 2> /dev/null || true
wait "$run" 2> /dev/null || true
echo "wrote $out"
