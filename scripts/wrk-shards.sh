#!/bin/bash
# What one shard (one Redis) carries, measured from outside as it runs: 1, 2
# and 4 serve instances on one private Redis, the load split evenly across
# them (BENCHMARKS.md, "The biggest single room").
#
#   scripts/wrk-shards.sh ROUNDS /path/waitroom [serve flags...]
#
# Starts a redis-server of its own on a random port >= 20000. Each round,
# for 1, 2 and 4 instances (each serve --instances N, on the same Redis
# database, restarted per N) and 256 and 1,024 requests in flight in all
# (WRK_INFLIGHT="256 1024"), it runs one wrk per instance (a share of the
# connections each) for WRK_SECONDS (default 4) of ENTER (a new user per
# request) and then of STATUS (a crowd of 30,000 waiting users, entered
# first; scripts/wrk-enter.lua). Per operation it prints requests/s, users
# per Redis call (requests ÷ the growth of cmdstat_fcall's calls, which
# counts the admitters' and config reads' few calls too), redis-server's
# whole CPU per request (from /proc: its I/O as well as its scripts) and
# the ENTERs or polls per second one Redis core carries at that cost, and
# the serve instances' CPU per request, in µs.
set -eu
cd "$(dirname "$0")"
. ./wrk-lib.sh
for tool in wrk redis-server redis-cli bc; do
  command -v "$tool" >/dev/null || { echo "$tool is missing (Debian: apt-get install -y wrk redis-server bc)" >&2; exit 1; }
done
rounds=$1 bin=$2
shift 2
inflight=${WRK_INFLIGHT:-256 1024}
secs=${WRK_SECONDS:-4}
crowd=30000
rport=$((20000 + RANDOM % 20000))
redis-server --port "$rport" --save '' --appendonly no >/dev/null 2>&1 &
rpid=$!
spids=()
stop_serves() {
  [ ${#spids[@]} -eq 0 ] && return
  kill "${spids[@]}" 2>/dev/null || true
  wait "${spids[@]}" 2>/dev/null || true
  spids=()
}
trap 'stop_serves; kill $rpid 2>/dev/null || true; wait 2>/dev/null || true' EXIT
up "$rport" "$rpid"

fcalls() { redis-cli -p "$rport" info commandstats | awk -F'[=,:]' '/^cmdstat_fcall:/ { n = $3 } END { print n + 0 }'; }
serve_ticks() {
  local t=0 p
  for p in "${spids[@]}"; do t=$((t + $(ticks "$p"))); done
  echo "$t"
}

# load N CONNS SCRIPT-ARGS...: one wrk per instance, CONNS split between
# them; prints "requests non-2xx".
load() {
  local n=$1 conns=$2 i outs=() pids=()
  shift 2
  for i in $(seq 0 $((n - 1))); do
    outs+=("$(mktemp)")
    wrk -t1 "-c$((conns / n))" "-d${secs}s" -s wrk-enter.lua "http://127.0.0.1:$((rport + 1 + i))" -- "$@" >"${outs[$i]}" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}"
  cat "${outs[@]}" | awk '/requests in/ { n += $1 } /Non-2xx/ { bad += $NF } END { printf "%d %d\n", n, bad }'
  rm -f "${outs[@]}"
}

# measure N CONNS LABEL SCRIPT-ARGS...: one line of figures.
measure() {
  local n=$1 conns=$2 label=$3 s0 r0 c0 s1 r1 c1 reqs bad
  shift 3
  s0=$(serve_ticks) r0=$(ticks "$rpid") c0=$(fcalls)
  read -r reqs bad < <(load "$n" "$conns" "$@")
  s1=$(serve_ticks) r1=$(ticks "$rpid") c1=$(fcalls)
  awk -v n="$n" -v c="$conns" -v op="$label" -v reqs="$reqs" -v bad="$bad" -v secs="$secs" \
    -v calls=$((c1 - c0)) -v rt=$((r1 - r0)) -v st=$((s1 - s0)) -v when="$(date -u +%H:%M:%S)" -v la="$(cut -d' ' -f1-3 /proc/loadavg)" '
    BEGIN {
      redis = rt * 10000 / reqs
      printf "%s load %s: %d instance(s), %d in flight, %s %.0f/s, %.1f users per call, Redis %.2f µs per %s (%.0fk per Redis core), serve %.1f µs per %s, non-2xx %d\n",
        when, la, n, c, op, reqs / secs, reqs / calls, redis, op, 1000 / redis, st * 10000 / reqs, op, bad
    }'
}

for r in $(seq 1 "$rounds"); do
  for n in 1 2 4; do
    for i in $(seq 0 $((n - 1))); do
      # shellcheck disable=SC2086 # the flags given split into words
      "$bin" serve --addr "127.0.0.1:$((rport + 1 + i))" --redis-url "redis://127.0.0.1:$rport/0" \
        --max-queue 100000000 --instances "$n" "$@" >/dev/null 2>&1 &
      spids+=($!)
      up "$((rport + 1 + i))" "$!"
    done
    if [ "$r" = 1 ] && [ "$n" = 1 ]; then
      # The polling crowd, entered once: thread 1's users are everyone's.
      wrk -t1 -c64 -d12s -s wrk-enter.lua "http://127.0.0.1:$((rport + 1))" -- crowd "$crowd" >/dev/null
    fi
    for c in $inflight; do
      echo "round $r: $(measure "$n" "$c" ENTER)"
      echo "round $r: $(measure "$n" "$c" STATUS status "$crowd")"
    done
    stop_serves
  done
done
