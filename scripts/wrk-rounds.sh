#!/bin/bash
# HTTP ENTER against GET /healthz from an outside client, alternating builds
# (BENCHMARKS.md, "HTTP ENTER from outside").
#
#   scripts/wrk-rounds.sh ROUNDS "label=waitroom-binary serve [flags]" ...
#
# Starts a private redis-server on a random port >= 20000 and each build's
# serve on its own port and Redis database (--max-queue 100000000, else the
# defaults plus the flags given); each round runs, for each build in an
# order that rotates, wrk -t2 -c32 -d3s of ENTER (a new X-User-Id per
# request, scripts/wrk-enter.lua) and then of GET /healthz (WRK_CONNECTIONS
# sets -c: a drop's crowd keeps far more than 32 requests in flight). Per side it
# prints requests/s and the CPU one request cost: serve + redis-server (from
# /proc) + wrk (its rusage), in µs, and serve's own ("serve alone"). Other
# work on the machine moves the CPU per request far less than the requests
# per second. A build's command
# may set the environment: "p1=env GOMAXPROCS=1 /path/waitroom serve".
# WRK_PIN=1 gives the builds cores of their own, as in a deployment where
# Redis and the clients run elsewhere: redis-server and wrk on the last CPU,
# each build on the others (taskset; at least two CPUs).
set -eu
cd "$(dirname "$0")"
. ./wrk-lib.sh
for tool in wrk redis-server bc /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "$tool is missing (Debian: apt-get install -y wrk redis-server bc time)" >&2; exit 1; }
done
rounds=$1
shift
conns=${WRK_CONNECTIONS:-32}
pin_others=() pin_builds=()
if [ -n "${WRK_PIN:-}" ]; then
  command -v taskset >/dev/null || { echo "taskset is missing (Debian: apt-get install -y util-linux)" >&2; exit 1; }
  last=$(($(nproc) - 1))
  [ "$last" -ge 1 ] || { echo "WRK_PIN needs at least two CPUs" >&2; exit 1; }
  pin_others=(taskset -c "$last") pin_builds=(taskset -c "0-$((last - 1))")
fi
rport=$((20000 + RANDOM % 20000))
"${pin_others[@]}" redis-server --port "$rport" --save '' --appendonly no >/dev/null 2>&1 &
rpid=$!
labels=() ports=() pids=()
cleanup() {
  kill "${pids[@]}" "$rpid" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap cleanup EXIT
up "$rport" "$rpid"
for spec in "$@"; do
  i=${#labels[@]}
  port=$((rport + 100 + i))
  # shellcheck disable=SC2086 # the spec's command line splits into words
  "${pin_builds[@]}" ${spec#*=} --addr "127.0.0.1:$port" --redis-url "redis://127.0.0.1:$rport/$i" --max-queue 100000000 >/dev/null 2>&1 &
  pids+=($!) labels+=("${spec%%=*}") ports+=("$port")
done
for i in "${!pids[@]}"; do up "${ports[$i]}" "${pids[$i]}"; done


# side PID WRK-ARGS...: "requests/s cpu-µs-per-request non-2xx
# serve-cpu-µs-per-request"
side() {
  local pid=$1
  shift
  local s0 r0 s1 r1 out
  s0=$(ticks "$pid") r0=$(ticks "$rpid")
  out=$({ /usr/bin/time -f "wrkcpu %U %S" "${pin_others[@]}" wrk "$@"; } 2>&1)
  s1=$(ticks "$pid") r1=$(ticks "$rpid")
  echo "$out" | awk -v ticks=$((s1 - s0 + r1 - r0)) -v sticks=$((s1 - s0)) '
    /Requests\/sec/ { rps = $2 }
    /requests in/ { n = $1 }
    /wrkcpu/ { wrk = $2 + $3 }
    /Non-2xx/ { bad = $NF }
    END { printf "%.0f %.1f %d %.1f\n", rps, (ticks * 10000 + wrk * 1e6) / n, bad, sticks * 10000 / n }'
}

n=${#labels[@]}
for r in $(seq 1 "$rounds"); do
  for k in $(seq 0 $((n - 1))); do
    j=$(((k + r) % n))
    url=http://127.0.0.1:${ports[$j]}
    read -r enter ecpu ebad esrv < <(side "${pids[$j]}" -t2 "-c$conns" -d3s -s wrk-enter.lua "$url")
    read -r triv tcpu tbad tsrv < <(side "${pids[$j]}" -t2 "-c$conns" -d3s "$url/healthz")
    printf '%s round %d %s load %s: ENTER %s/s, trivial %s/s, ratio %.2f; CPU µs/request ENTER %s, trivial %s, ratio %.2f; serve alone ENTER %s, trivial %s, ENTER ÷ trivial %.2f; non-2xx %s/%s\n' \
      "$(date -u +%H:%M:%S)" "$r" "${labels[$j]}" "$(cut -d' ' -f1-3 /proc/loadavg)" \
      "$enter" "$triv" "$(echo "$enter / $triv" | bc -l)" "$ecpu" "$tcpu" "$(echo "$tcpu / $ecpu" | bc -l)" \
      "$esrv" "$tsrv" "$(echo "$esrv / $tsrv" | bc -l)" "$ebad" "$tbad"
  done
done
