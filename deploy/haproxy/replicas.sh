#!/usr/bin/env bash
# N `vit serve` replicas on loopback behind HAProxy (deploy/haproxy/haproxy.cfg), the cores split between them:
# replica i runs with --threads C/N pinned (taskset) to its own C/N cores, so that their OpenMP teams never
# share a core. A replica that dies (a crash, SIGKILL) is started again after a second, and HAProxy takes it
# back once its /v2/health/ready answers 200; one that exits 0 (SIGTERM: it drains) is left stopped.
# SIGTERM or SIGINT to this script drains every replica and stops HAProxy, then it exits 0.
#
#   deploy/haproxy/replicas.sh -n 2 -m weights/deit_tiny_patch16_224.fb_in1k [--port 8080] [--first-port 8081]
#                              [--run-dir DIR] [--drain-grace-s 3] [-- more vit serve flags]
#
# Clients connect to 127.0.0.1:--port; replica i (from 1) listens on 127.0.0.1:(--first-port + i - 1). Each
# replica's pid is in DIR/replica-I.pid, HAProxy's admin socket at DIR/haproxy.sock (`show stat`). The vit
# binary is $VIT, else build/vit of this repository.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
n=2 model="" port=8080 first=8081 run_dir="" grace=3 host=127.0.0.1
usage() { echo "usage: $0 -n N -m MODEL [--port P] [--first-port P] [--run-dir DIR] [--drain-grace-s S] [-- vit serve flags]" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    -n) n="$2"; shift 2 ;;
    -m) model="$2"; shift 2 ;;
    --port) port="$2"; shift 2 ;;
    --first-port) first="$2"; shift 2 ;;
    --run-dir) run_dir="$2"; shift 2 ;;
    --drain-grace-s) grace="$2"; shift 2 ;;
    --) shift; break ;;
    *) usage ;;
  esac
done
[[ "$n" =~ ^[1-9][0-9]?$ ]] || { echo "$0: -n: '$n' is not a number of replicas from 1 to 99" >&2; exit 2; }
[ -n "$model" ] || usage
vit="${VIT:-$here/../../build/vit}"
[ -x "$vit" ] || { echo "$0: no vit binary at $vit (set VIT to it)" >&2; exit 2; }
run_dir="${run_dir:-$(mktemp -d)}"
mkdir -p "$run_dir"
cores=$(nproc)
threads=$(( cores / n > 0 ? cores / n : 1 ))

declare -A replica_of  # pid -> replica number
start_replica() {  # i, then the extra vit serve flags
  local i=$1 lo=$(( (($1 - 1) * threads) % cores ))
  shift
  taskset -c "$lo-$(( lo + threads - 1 ))" "$vit" serve -m "$model" --host "$host" --port $(( first + i - 1 )) \
    --threads "$threads" --drain-grace-s "$grace" "$@" 2>> "$run_dir/replica-$i.log" &
  replica_of[$!]=$i
  echo $! > "$run_dir/replica-$i.pid"
}

{
  echo "backend replicas"
  echo "    balance leastconn"
  for i in $(seq 1 "$n"); do echo "    server r$i $host:$(( first + i - 1 ))"; done
} > "$run_dir/backend.cfg"
for i in $(seq 1 "$n"); do start_replica "$i" "$@"; done
haproxy_pid=""

stopping=0
stop_all() {
  stopping=1
  for pid in "${!replica_of[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait "${!replica_of[@]}" 2>/dev/null || true
  if [ -n "$haproxy_pid" ]; then
    kill -TERM "$haproxy_pid" 2>/dev/null || true
    wait "$haproxy_pid" 2>/dev/null || true
  fi
  echo "replicas.sh: stopped" >&2
  exit "${1:-0}"
}
trap stop_all TERM INT

for i in $(seq 1 "$n"); do
  until curl -sf -o /dev/null "http://$host:$(( first + i - 1 ))/v2/health/ready"; do
    kill -0 "$(cat "$run_dir/replica-$i.pid")" 2>/dev/null || { echo "replicas.sh: replica $i did not start: $(tail -n 3 "$run_dir/replica-$i.log")" >&2; stop_all 1; }
    sleep 0.2
  done
done
# HAProxy once the replicas are ready: a server starts UP and stays so while its checks pass.
VIT_LB_HOST=$host VIT_LB_PORT=$port VIT_RUN_DIR=$run_dir haproxy -db -f "$here/haproxy.cfg" -f "$run_dir/backend.cfg" \
  2>> "$run_dir/haproxy.log" &
haproxy_pid=$!
echo $haproxy_pid > "$run_dir/haproxy.pid"
until curl -sf -o /dev/null "http://$host:$port/v2/health/ready"; do
  kill -0 "$haproxy_pid" 2>/dev/null || { echo "replicas.sh: HAProxy did not start: $(tail -n 3 "$run_dir/haproxy.log")" >&2; stop_all 1; }
  sleep 0.2
done
echo "replicas.sh: $n replicas ($threads threads each) ready behind http://$host:$port (run folder $run_dir)" >&2

while [ $stopping = 0 ]; do
  status=0
  wait -n -p done_pid || status=$?
  [ -n "${done_pid:-}" ] || continue  # a signal woke wait: its trap runs
  if [ "$done_pid" = "$haproxy_pid" ]; then
    echo "replicas.sh: HAProxy exited ($status); stopping the replicas" >&2
    stop_all 1
  fi
  i=${replica_of[$done_pid]}
  unset "replica_of[$done_pid]"
  if [ "$status" = 0 ]; then
    echo "replicas.sh: replica $i drained and stopped" >&2
  else
    echo "replicas.sh: replica $i ended ($status); starting it again" >&2
    sleep 1
    start_replica "$i" "$@"
  fi
  done_pid=""
done
