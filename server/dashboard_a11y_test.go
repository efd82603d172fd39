package server_test

import (
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/server"
)

// TestDashboardAccessibility: the operator's dashboard passes the same
// WCAG 2.2 A and AA rules as the page, signed out and signed in, light
// and dark, on a phone and a desktop.
func TestDashboardAccessibility(t *testing.T) {
	t.Parallel()
	a := &auditor{t: t, axe: axeSource(t)}
	room := uniqueRoom(t)
	store := memRoom(t, room, waitroom.RoomConfig{Rate: 40})
	srv := httptest.NewServer(mustServer(t, server.Config{Store: store, DefaultRoom: room, AdminToken: adminToken}))
	t.Cleanup(srv.Close)
	for i := range 30 {
		_, err := store.Enter(t.Context(), room, fmt.Sprintf("u%d", i))
		require.NoError(t, err)
	}

	op := newVisitor(t, newBrowser(t))
	op.open(srv.URL + "/admin/")
	op.waitState("login")
	a.audit(op, "dashboard sign-in")
	op.do(chromedp.SendKeys(chromedp.ID("token"), adminToken), chromedp.Click(chromedp.ID("signin")))
	op.do(chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`[data-room=%q]`, room))))
	a.audit(op, "dashboard")
	require.Equal(t, 2*2*len(viewports), a.runs)
}
