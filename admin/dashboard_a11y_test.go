package admin_test

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom/internal/servertest"
	"github.com/waitroom/waitroom/webhook"
)

// TestDashboardAccessibility: the operator's dashboard passes the same
// WCAG 2.2 A and AA rules as the page, signed out and signed in, with a
// webhook dead letter listed and with the dialog that redelivers it open,
// light and dark, on a phone and a desktop.
func TestDashboardAccessibility(t *testing.T) {
	t.Parallel()
	a := &servertest.Auditor{T: t, Axe: servertest.AxeSource(t)}
	rig := newDeadRig(t, webhook.NewMemLog())
	dead := rig.kill(webhook.TokenSpent, "sale", "alice")
	for i := range 30 {
		_, err := rig.store.Enter(t.Context(), rig.room, fmt.Sprintf("u%d", i))
		require.NoError(t, err)
	}

	op := servertest.NewVisitor(t, servertest.NewBrowser(t))
	op.Open(rig.srv.URL + "/admin/")
	op.WaitState("login")
	a.Audit(op, "dashboard sign-in")
	op.Do(chromedp.SendKeys(chromedp.ID("token"), servertest.AdminToken), chromedp.Click(chromedp.ID("signin")))
	op.Do(chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`[data-room=%q]`, rig.room))), chromedp.WaitVisible(chromedp.CSS(deadRow(dead.ID))))
	a.Audit(op, "dashboard")
	op.Do(chromedp.Click(chromedp.CSS(deadRow(dead.ID)+` [data-act="redeliver"]`)), chromedp.WaitVisible(chromedp.ID("confirm")))
	a.Audit(op, "dashboard, redelivery to confirm")
	require.Equal(t, 3*2*len(servertest.Viewports), a.Runs)
}
