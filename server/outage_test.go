package server_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/redisstore"
	"github.com/waitroom/waitroom/redistest"
	"github.com/waitroom/waitroom/server"
)

// TestRedisFreezeLoggedOnce: a real Redis frozen (SIGSTOP) under a crowd of
// pollers, with the admitter and the keeper ticking on the same guarded
// store, then resumed: the calls that waited through the freeze settle out
// of order after it, yet the log says "store unavailable" once when it
// starts and "store reachable again" once when it ends.
func TestRedisFreezeLoggedOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	rdb := redistest.StartServer(t)
	client, err := redisstore.Open(rdb.URL())
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	store := redisstore.New(client, redisstore.Options{})
	_, err = store.CreateRoom(ctx, "default", waitroom.RoomConfig{Rate: 20})
	require.NoError(t, err)

	var logs testenv.LogBuffer
	srv := mustServer(t, server.Config{Store: store, Logger: slog.New(slog.NewTextHandler(&logs, nil)), StoreTimeout: 300 * time.Millisecond})
	web := httptest.NewServer(srv)
	t.Cleanup(web.Close)
	runCtx, stop := context.WithCancel(ctx)
	var running sync.WaitGroup
	t.Cleanup(func() { stop(); running.Wait() })
	admitter := &waitroom.Admitter{Store: srv.Store(), Every: 25 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
	running.Go(func() { _ = admitter.Run(runCtx) })
	running.Go(func() { _ = srv.Store().Keeper().Run(runCtx) })

	// The crowd: each poller enters, then asks for its status in a loop.
	var (
		mu       sync.Mutex
		statuses = map[int]int{}
		resumed  time.Time
		okAfter  int // 200s answered to requests sent after the resume
	)
	const pollers = 60
	for i := range pollers {
		running.Go(func() {
			user := "u" + strconv.Itoa(i)
			method, path := "POST", "/queue/enter"
			for runCtx.Err() == nil {
				req, _ := http.NewRequestWithContext(runCtx, method, web.URL+path, nil)
				req.Header.Set("X-User-Id", user)
				sent := time.Now()
				resp, err := web.Client().Do(req)
				if err != nil {
					return // the test is over
				}
				resp.Body.Close()
				mu.Lock()
				statuses[resp.StatusCode]++
				if resp.StatusCode == http.StatusOK && !resumed.IsZero() && sent.After(resumed) {
					okAfter++
				}
				mu.Unlock()
				if resp.StatusCode == http.StatusOK {
					method, path = "GET", "/queue/position"
				}
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	resume := rdb.Freeze()
	time.Sleep(3 * time.Second)
	mu.Lock()
	resumed = time.Now()
	mu.Unlock()
	resume()
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return okAfter >= 10*pollers
	}, 20*time.Second, 10*time.Millisecond, "the crowd is served again")
	stop()
	running.Wait()

	mu.Lock()
	t.Logf("answers: %v; 200s after the resume: %d", statuses, okAfter)
	require.Positive(t, statuses[http.StatusServiceUnavailable], "the freeze was seen")
	mu.Unlock()
	out := logs.String()
	require.Equal(t, 1, strings.Count(out, `msg="store unavailable`), out)
	require.Equal(t, 1, strings.Count(out, `msg="store reachable again"`), out)
}
