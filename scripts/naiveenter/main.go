// Command naiveenter is the yardstick of BENCHMARKS.md's "HTTP ENTER from
// outside": the naive go-redis server the room's ENTER is compared with.
// POST /rooms/{room}/enter runs the baseline ENTER script (one EVALSHA
// per request on the plain client: live token check, rank, size check,
// INCR, ZADD, rank) for the X-User-Id header and answers its position;
// GET /healthz is the trivial route. It takes the flags
// scripts/wrk-rounds.sh passes a build (--addr, --redis-url, --max-queue)
// and nothing else: no per-user limit, no store timeout, no batching, no
// admission. Not for production.
package main

import (
	"flag"
	"log"
	"net/http"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/baseline"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	redisURL := flag.String("redis-url", "redis://127.0.0.1:6379/0", "Redis")
	maxQueue := flag.Int64("max-queue", 100_000, "queue size limit")
	flag.Parse()
	opt, err := redis.ParseURL(*redisURL)
	if err != nil {
		log.Fatal(err)
	}
	client := redis.NewClient(opt)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
	})
	mux.HandleFunc("POST /rooms/{room}/enter", func(w http.ResponseWriter, r *http.Request) {
		// The same checks serve makes of the room and the user, so that a
		// request naming any key cannot reach Redis.
		room, users := r.PathValue("room"), r.Header.Values("X-User-Id")
		if !waitroom.ValidRoomName(room) || len(users) != 1 || !waitroom.ValidUserID(users[0]) {
			http.Error(w, "bad room or X-User-Id", http.StatusBadRequest)
			return
		}
		user := users[0]
		tag := "naive:{" + room + "}:"
		res, err := baseline.Enter.Run(r.Context(), client, []string{tag + "q", tag + "seq"}, user, tag+"tok:", *maxQueue).Int64Slice()
		switch {
		case err != nil || len(res) == 0 || (res[0] == 2 && len(res) != 2):
			http.Error(w, "store", http.StatusServiceUnavailable)
			return
		case res[0] != 2:
			http.Error(w, "full", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(strconv.AppendInt([]byte(`{"state":"waiting","room":"`+room+`","position":`), res[1], 10))
		_, _ = w.Write([]byte("}\n"))
	})
	log.Fatal(http.ListenAndServe(*addr, mux))
}
