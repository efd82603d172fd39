package admin_test

import (
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/servertest"
	"github.com/waitroom/waitroom/server"
)

// TestDashboardAccessibility: the operator's dashboard passes the same
// WCAG 2.2 A and AA rules as the page, signed out and signed in, light
// and dark, on a phone and a desktop.
func TestDashboardAccessibility(t *testing.T) {
	t.Parallel()
	a := &servertest.Auditor{T: t, Axe: servertest.AxeSource(t)}
	room := servertest.UniqueRoom(t)
	store := servertest.MemRoom(t, room, waitroom.RoomConfig{Rate: 40})
	srv := httptest.NewServer(servertest.MustServer(t, server.Config{Store: store, DefaultRoom: room, AdminToken: servertest.AdminToken}))
	t.Cleanup(srv.Close)
	for i := range 30 {
		_, err := store.Enter(t.Context(), room, fmt.Sprintf("u%d", i))
		require.NoError(t, err)
	}

	op := servertest.NewVisitor(t, servertest.NewBrowser(t))
	op.Open(srv.URL + "/admin/")
	op.WaitState("login")
	a.Audit(op, "dashboard sign-in")
	op.Do(chromedp.SendKeys(chromedp.ID("token"), servertest.AdminToken), chromedp.Click(chromedp.ID("signin")))
	op.Do(chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`[data-room=%q]`, room))))
	a.Audit(op, "dashboard")
	require.Equal(t, 2*2*len(servertest.Viewports), a.Runs)
}
