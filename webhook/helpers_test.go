package webhook_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/memstore"
	"github.com/waitroom/waitroom/redisstore"
	"github.com/waitroom/waitroom/webhook"
)

// clock is the fake clock the tests move by hand.
type clock = memstore.ManualClock

func newClock() *clock { return memstore.NewManualClock(time.Now().Truncate(time.Second)) }

// eachLog runs f, in parallel, on each Log every behaviour is checked
// on, Redis and in process, with a fresh fake clock.
func eachLog(t *testing.T, f func(t *testing.T, log webhook.Log, c *clock)) {
	for name, newLog := range map[string]func(t testing.TB) webhook.Log{
		"redis": redisLog,
		"mem":   func(testing.TB) webhook.Log { return webhook.NewMemLog() },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f(t, newLog(t), newClock())
		})
	}
}

// redisLog is a RedisLog on the test Redis under a prefix of its own.
func redisLog(t testing.TB) webhook.Log {
	t.Helper()
	client, prefix := testRedis(t)
	return webhook.NewRedisLog(client, prefix)
}

// testRedis is a client of the test Redis and a prefix of its own,
// deleted at the end.
func testRedis(t testing.TB) (redis.UniversalClient, string) {
	t.Helper()
	client, err := redisstore.Open(testenv.RedisURL())
	if err != nil {
		t.Fatal(err)
	}
	prefix := testenv.Unique("wh")
	t.Cleanup(func() {
		_ = redisstore.DeletePrefix(context.Background(), client, prefix)
		_ = client.Close()
	})
	if err := client.Ping(t.Context()).Err(); err != nil {
		t.Fatalf("Redis at %s (set REDIS_URL): %v", testenv.RedisURL(), err)
	}
	return client, prefix
}

// delivery is one request the receiver got.
type delivery struct {
	ID, Timestamp, Signature string
	Body                     []byte
	Event                    struct {
		Version int             `json:"version"`
		Type    string          `json:"type"`
		Room    string          `json:"room"`
		Data    json.RawMessage `json:"data"`
	}
	Status int
}

// receiver is the shop's webhook endpoint: it records every request and
// answers what answer says for the n-th request with that webhook-id
// (0-based).
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []delivery
	seen   map[string]int
	answer func(r *http.Request, nth int) int
}

func newReceiver(t *testing.T, answer func(r *http.Request, nth int) int) *receiver {
	rc := &receiver{seen: map[string]int{}, answer: answer}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		d := delivery{ID: r.Header.Get("webhook-id"), Timestamp: r.Header.Get("webhook-timestamp"),
			Signature: r.Header.Get("webhook-signature"), Body: body}
		if err := json.Unmarshal(body, &d.Event); err != nil {
			t.Errorf("body is not JSON: %v: %s", err, body)
		}
		rc.mu.Lock()
		nth := rc.seen[d.ID]
		rc.seen[d.ID]++
		rc.mu.Unlock()
		d.Status = rc.answer(r, nth)
		rc.mu.Lock()
		rc.got = append(rc.got, d)
		rc.mu.Unlock()
		w.WriteHeader(d.Status)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) deliveries() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]delivery(nil), rc.got...)
}

// taken are the deliveries answered 2xx.
func (rc *receiver) taken() []delivery {
	var out []delivery
	for _, d := range rc.deliveries() {
		if d.Status/100 == 2 {
			out = append(out, d)
		}
	}
	return out
}

// verify checks d's signature with the Standard Webhooks library, as the
// receiver would; checkTime also checks the timestamp against the real
// clock (its 5-minute tolerance).
func verify(t *testing.T, secret string, d delivery, checkTime bool) error {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("webhook-id", d.ID)
	h.Set("webhook-timestamp", d.Timestamp)
	h.Set("webhook-signature", d.Signature)
	if checkTime {
		return wh.Verify(d.Body, h)
	}
	return wh.VerifyIgnoringTimestamp(d.Body, h)
}

// adminCall calls the admin API's handler h directly.
func adminCall(t *testing.T, routes map[string]http.Handler, method, path, body string) (int, map[string]any) {
	t.Helper()
	mux := http.NewServeMux()
	for p, h := range routes {
		mux.Handle(p, h)
	}
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if body == "" {
		req.ContentLength = 0
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	var out map[string]any
	if rec.Body.Len() > 0 {
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("%s %s answered non-JSON %d: %s", method, path, rec.Code, rec.Body)
		}
	}
	return rec.Code, out
}

func errorCode(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

func toJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
