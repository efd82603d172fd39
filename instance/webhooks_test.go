package instance_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/instance"
	"github.com/waitroom/waitroom/memstore"
	"github.com/waitroom/waitroom/webhook"
)

// SetWebhooks(false) turns every room's outbox off (admissions write
// none), true turns them on again as Run did; each twice in a row is the
// same as once, and Close after a stop still closes.
func TestSetWebhooks(t *testing.T) {
	t.Parallel()
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(hook.Close)
	store := memstore.New(memstore.Options{})
	cfg := instance.Config{Addr: "127.0.0.1:0", RedisPrefix: "wr", Rooms: []string{"sale"}, GatedRoutes: []string{"POST /orders"},
		UserHeader: waitroom.DefaultUserHeader, Room: waitroom.RoomConfig{Rate: 140}.WithDefaults(),
		WebhookURL: hook.URL, WebhookSecrets: []string{webhook.NewSecret()}}
	in := &instance.Instance{Config: cfg, Store: store, Hold: true}
	require.Error(t, in.SetWebhooks(t.Context(), false), "before Run")
	require.NoError(t, in.Run(t.Context()))
	t.Cleanup(func() { require.NoError(t, in.Close()) })
	// An operator's room made behind the instance's back: the marks
	// cover every room the store has.
	_, err := store.CreateRoom(t.Context(), "other", waitroom.RoomConfig{Rate: 140})
	require.NoError(t, err)
	outboxOn := func(room string) bool {
		t.Helper()
		read, err := store.ReadOutbox(t.Context(), room, 1)
		require.NoError(t, err)
		return read.On
	}
	require.True(t, outboxOn("sale"), "Run marks its rooms")
	require.False(t, outboxOn("other"), "made after Run")

	for range 2 {
		require.NoError(t, in.SetWebhooks(t.Context(), true))
		require.True(t, outboxOn("sale"))
		require.True(t, outboxOn("other"))
	}
	for range 2 {
		require.NoError(t, in.SetWebhooks(t.Context(), false))
		require.False(t, outboxOn("sale"))
		require.False(t, outboxOn("other"))
	}
}
