package server_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

// The allocations of the server's own part of an ENTER and a STATUS on
// memstore: the requests are made beforehand and the writer keeps its
// header map, so that only the server's allocations (and the store's) are
// counted, not httptest's nor what net/http makes per request anyway.
// testing.AllocsPerRun counts exactly, so these are asserted; times never
// are (BENCHMARKS.md has them).
const (
	// maxEnterAllocs: 6 measured on 2026-12-02 (8 before the hot path,
	// hotpath.go), plus a margin of 1.
	maxEnterAllocs = 7
	// maxStatusAllocs: 6 measured on 2026-12-02 (8 before), plus 1.
	maxStatusAllocs = 7
)

// reusedWriter is a ResponseWriter that allocates nothing per request:
// net/http makes the header map of each request itself, so it is none of
// the handler's cost.
type reusedWriter struct {
	header http.Header
	code   int
	n      int
}

func (w *reusedWriter) Header() http.Header { return w.header }
func (w *reusedWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *reusedWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	w.n += len(b)
	return len(b), nil
}

func (w *reusedWriter) reset() {
	clear(w.header)
	w.code, w.n = 0, 0
}

// preparedRequests are n requests made before anything is counted, as
// user userOf(i) for the i-th.
func preparedRequests(n int, method, path string, userOf func(i int) string) []*http.Request {
	reqs := make([]*http.Request, n)
	for i := range reqs {
		reqs[i] = httptest.NewRequest(method, path, nil)
		reqs[i].RemoteAddr = "127.0.0.1:1234" // the user header is believed from loopback only
		reqs[i].Header.Set("X-User-Id", userOf(i))
	}
	return reqs
}

// serverAllocs is the average allocations of h serving reqs in turn, and
// fails on any answer but 200.
func serverAllocs(tb testing.TB, h http.Handler, reqs []*http.Request) float64 {
	tb.Helper()
	w := &reusedWriter{header: http.Header{}}
	i := 0
	avg := testing.AllocsPerRun(len(reqs)-1, func() {
		w.reset()
		h.ServeHTTP(w, reqs[i])
		if w.code != http.StatusOK {
			tb.Fatalf("request %d: status %d", i, w.code)
		}
		i++
	})
	return avg
}

const allocRuns = 2000

func enterAllocs(tb testing.TB) float64 {
	h, _ := benchServer(tb)
	return serverAllocs(tb, h, preparedRequests(allocRuns+1, "POST", "/rooms/bench/enter", func(i int) string { return "user-" + strconv.Itoa(i) }))
}

func statusAllocs(tb testing.TB) float64 {
	h, store := benchServer(tb)
	users := waitingUsers(tb, store, 100)
	return serverAllocs(tb, h, preparedRequests(allocRuns+1, "GET", "/rooms/bench/status", func(i int) string { return users[i%len(users)] }))
}

// TestEnterAllocations: a new place through the whole handler allocates
// no more than it did when it was measured.
func TestEnterAllocations(t *testing.T) {
	got := enterAllocs(t)
	t.Logf("ENTER: %.1f allocations", got)
	if got > maxEnterAllocs {
		t.Fatalf("ENTER allocates %.1f times per request on memstore, more than %d: see what the change added (go test -bench EnterHandler -memprofile)", got, maxEnterAllocs)
	}
}

// TestStatusAllocations: the same for a poll of a waiting user.
func TestStatusAllocations(t *testing.T) {
	got := statusAllocs(t)
	t.Logf("STATUS: %.1f allocations", got)
	if got > maxStatusAllocs {
		t.Fatalf("STATUS allocates %.1f times per request on memstore, more than %d: see what the change added (go test -bench StatusHandler -memprofile)", got, maxStatusAllocs)
	}
}

// benchHandler serves b.N requests prepared in chunks with the timer
// stopped, so that what it reports is the server's alone.
func benchHandler(b *testing.B, h http.Handler, method, path string, userOf func(i int) string) {
	const chunk = 4096
	w := &reusedWriter{header: http.Header{}}
	var reqs []*http.Request
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%chunk == 0 {
			b.StopTimer()
			reqs = preparedRequests(chunk, method, path, func(k int) string { return userOf(i + k) })
			b.StartTimer()
		}
		w.reset()
		h.ServeHTTP(w, reqs[i%chunk])
		if w.code != http.StatusOK {
			b.Fatalf("request %d: status %d", i, w.code)
		}
	}
}
