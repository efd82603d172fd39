package webhook_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/waitroom/waitroom/redisstore"
	"github.com/waitroom/waitroom/redistest"
	"github.com/waitroom/waitroom/webhook"
)

// On a Redis Cluster every key of the log is on one slot ({wh}): appends,
// the consumers' lease, claims after a handover, dead letters and the
// counters all work, and a receiver failing once per event still gets
// every one in order.
func TestRedisClusterLog(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, redistest.ClusterOptions{Primaries: 3})
	client, err := redisstore.Open(cluster.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	log := webhook.NewRedisLog(client, "wrcluster")
	c := newClock()
	rc := newReceiver(t, func(_ *http.Request, nth int) int {
		if nth == 0 {
			return http.StatusBadGateway
		}
		return http.StatusOK
	})
	ep, em, a := setup(t, log, c, rc, "a")
	order := emitRooms(t, em, []string{"r-a", "r-b", "r-c", "r-d", "r-e"}, 25)
	c.Advance(webhook.QuietRead)
	// a is handed every entry, then falls silent; b takes over.
	if err := a.Step(t.Context()); err != nil {
		t.Fatal(err)
	}
	b := &webhook.Dispatcher{Log: log, ID: "b", Static: []webhook.Endpoint{ep}, Now: c.Now, Jitter: func() float64 { return 0.5 }}
	c.Advance(webhook.LeaseTTL + time.Second)
	stepUntil(t, b, c, time.Second, 100, func() bool { return len(rc.taken()) == 25 })
	checkOrder(t, rc.deliveries(), order)

	dl := webhook.DeadLetter{ID: "dl_1", Endpoint: ep.ID, EventID: "msg_1", Type: webhook.RoomPaused, Room: "r-a", Body: []byte(`{}`), At: c.Now()}
	if err := log.AddDead(t.Context(), dl); err != nil {
		t.Fatal(err)
	}
	if got, err := log.Dead(t.Context(), 10); err != nil || len(got) != 1 || got[0].ID != "dl_1" {
		t.Fatalf("dead letters %v, %v", got, err)
	}
	if _, err := log.TakeDead(t.Context(), "dl_1"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ total, want int64 }{{5, 0}, {8, 3}, {8, 0}} {
		if n, err := log.Advance(t.Context(), "r-a\x00count", c.total); err != nil || n != c.want {
			t.Fatalf("Advance to %d: %d, %v; want %d", c.total, n, err, c.want)
		}
	}
}
