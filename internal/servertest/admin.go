package servertest

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/server"
)

const AdminToken = "s3cret-admin-token-for-tests"

// AdminFixture is a fixture whose server has the admin API on, a fake
// shop admin route behind it, and an admitter wired to the server's hook.
type AdminFixture struct {
	*Fixture
	Admitter  *waitroom.Admitter
	ShopCalls atomic.Int64
}

func NewAdminFixture(t *testing.T, opts FixtureOptions) *AdminFixture {
	t.Helper()
	f := &AdminFixture{Fixture: NewStoreFixture(t, opts.Room)}
	s := f.Serve(server.Config{
		Protected:  opts.Protected,
		AdminToken: AdminToken,
		AdminRoutes: map[string]http.Handler{
			"GET /admin/products": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				f.ShopCalls.Add(1)
				fmt.Fprint(w, `{"products":[]}`)
			}),
		},
	})
	f.Admitter = &waitroom.Admitter{Store: f.Store, OnAdmit: s.OnAdmit}
	return f
}

// Admin sends an authorized admin request.
func (f *AdminFixture) Admin(method, path, body string) Answer {
	f.T.Helper()
	return f.Do(method, path, body, "Authorization", "Bearer "+AdminToken)
}

// Tick moves the clock one slice and runs one admission tick.
func (f *AdminFixture) Tick(slice time.Duration) int {
	f.T.Helper()
	f.Clock.Advance(slice)
	n, err := f.Admitter.Tick(f.T.Context())
	require.NoError(f.T, err)
	return n
}

// MintPass creates a pass through the operator API and returns its answer.
func (f *AdminFixture) MintPass(room, body string) Answer {
	f.T.Helper()
	a := f.Admin("POST", "/admin/rooms/"+room+"/passes", body)
	require.Equal(f.T, http.StatusCreated, a.Status, a.Raw)
	return a
}

// EnterWithPass enters user with a pass code through the API.
func (f *Fixture) EnterWithPass(user, code string) Answer {
	f.T.Helper()
	return f.Do("POST", "/rooms/"+f.Room+"/enter", `{"pass":`+quote(code)+`}`, "X-User-Id", user)
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }
