# Shared by scripts/wrk-rounds.sh and scripts/wrk-shards.sh (sourced).

# ticks PID: the process's CPU so far, utime + stime, in 1/100 s.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# up PORT [PID]: waits until something listens on PORT (at most 20 s), and
# fails if PID ends first: a loaded machine starts servers slowly.
up() {
  local i
  for i in $(seq 1 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    if [ -n "${2:-}" ] && ! kill -0 "$2" 2>/dev/null; then
      echo "the server for port $1 ended at start" >&2
      exit 1
    fi
    sleep 0.1
  done
  echo "nothing listens on port $1 after 20 s" >&2
  exit 1
}
