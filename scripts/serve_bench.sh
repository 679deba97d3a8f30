#!/usr/bin/env bash
# `vit serve` under load from wrk (scripts/serve_bench.lua posting the sample JPEGs) at 1, 4, 16 and 64
# connections on loopback, each for a fixed time: images/s, p50/p99 latency and the mean batch size (from
# /metrics), then `vit classify --stats -b 16` and `vit bench --batch 1` on the same photos and model.
# VIT_BENCH_ENDPOINT=embeddings posts to /v1/embeddings instead (JSON, the photo as a base64 data URI, as
# OpenAI's client sends it) and compares with `vit embed --stats -b 16`.
#   [VIT_BENCH_ENDPOINT=embeddings] scripts/serve_bench.sh [SECONDS per level, default 20] [extra vit serve flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
shift || true
vit=build/vit
model=../shared/data/models/deit_tiny_patch16_224.fb_in1k
photos=../shared/data/images/imagenet-samples
[ -d "$photos" ] || { echo "no sample photos at $photos" >&2; exit 2; }
list=$(mktemp)
log=$(mktemp)
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -f "$list" "$log"' EXIT
ls "$photos"/*.JPEG > "$list"
$vit serve -m "$model" --port 0 "$@" 2> "$log" &
pid=$!
for _ in $(seq 600); do grep -q "at http://" "$log" && break; sleep 0.1; done
port=$(sed -n 's|.*at http://127.0.0.1:\([0-9]*\),.*|\1|p' "$log" | head -1)
url=http://127.0.0.1:$port
until curl -sf "$url/v2/health/ready" > /dev/null; do sleep 0.1; done
head -1 "$log"
# A metric's value summed over its labels (each model's).
metric() { curl -s "$url/metrics" | awk -v m="$1" '$1 == m || index($1, m "{") == 1 { s += $2 } END { print s + 0 }'; }
rss() { awk '/VmRSS/ { print $2 }' /proc/$pid/status; }
echo "clients  images/s  p50 ms  p99 ms  mean batch  errors  RSS MB"
for c in 1 4 16 64; do
  b0=$(metric vit_batch_size_sum); n0=$(metric vit_batch_size_count)
  out=$(VIT_BENCH_LIST=$list VIT_BENCH_MODEL=$(basename "$model") wrk -t $(( c < 2 ? 1 : 2 )) -c $c -d "${seconds}s" --timeout 30s -s scripts/serve_bench.lua "$url" | grep RESULT)
  b1=$(metric vit_batch_size_sum); n1=$(metric vit_batch_size_count)
  eval "$(echo "$out" | sed 's/RESULT //')"
  awk -v c=$c -v r=$requests -v s=$elapsed -v p50=$p50_ms -v p99=$p99_ms -v b0=$b0 -v b1=$b1 -v n0=$n0 -v n1=$n1 \
      -v e=$errors -v rss=$(rss) 'BEGIN { dn = n1 - n0; printf "%7d  %8.1f  %6.1f  %6.1f  %10.2f  %6d  %6.0f\n",
                                          c, r / s, p50, p99, dn ? (b1 - b0) / dn : 0, e, rss / 1024 }'
done
if [ "${VIT_BENCH_ENDPOINT:-}" = embeddings ]; then
  $vit embed --stats -b 16 --normalize -m "$model" "$photos" 2>&1 > /dev/null | tail -1
else
  $vit classify --stats -b 16 -m "$model" "$photos" 2>&1 > /dev/null | tail -1
fi
$vit bench -m "$model" --batch 1 2>&1 | tail -3
