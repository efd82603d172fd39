package main

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/redistest"
)

// TestFaultOneOrderPerUserAcrossLossyFailover: buyers queue while Redis
// replicates, then the replica's link is cut, they are admitted and order,
// and the primary dies: Sentinel promotes a replica that never saw their
// admissions nor their orders, so it queues them again and the admitter
// gives each a new token. With one order per user the gate keys orders by
// buyer, so the shop's unique key answers each second attempt with the
// first order (200, the same id) and every buyer has exactly one order in
// PostgreSQL, whatever Redis forgot.
func TestFaultOneOrderPerUserAcrossLossyFailover(t *testing.T) {
	// Not parallel with other top-level tests: a Sentinel setup and a
	// failover (see heavyTests in redisstore).
	ctx := t.Context()
	sn := redistest.StartSentinel(t, redistest.SentinelOptions{})
	conn, dbURL, schema := testSchema(t, "oneorder")
	env := envOf("DATABASE_URL", viaProxy(t, dbURL, hostOf(t, dbURL, "5432"), schema))
	const adminTok = "one-order-admin-token"
	logs := &testenv.LogBuffer{}
	m := startMainLogging(t, []string{"--redis-url", sn.URL(), "--products", "drop:1000", "--rate", "500",
		"--one-order-per-user", "--admin-token", adminTok, "--db-pool", "4"}, env, logs)
	base := "http://" + m.Addr()
	patchState := func(state string) int {
		t.Helper()
		return bearerStatus(t, "PATCH", base+"/admin/rooms/default", adminTok, `{"state":"`+state+`"}`)
	}
	setState := func(state string) {
		t.Helper()
		require.Equal(t, http.StatusOK, patchState(state))
	}

	// Everyone queues while the link is healthy, and the replica has it.
	setState("paused")
	const buyers = 30
	user := func(i int) string { return fmt.Sprintf("buyer-%02d", i) }
	for i := range buyers {
		require.Equal(t, "waiting", call(t, "POST", base+"/queue/enter", user(i), "")["state"])
	}
	old, err := sn.PrimaryAddr(ctx)
	require.NoError(t, err)
	primary := redis.NewClient(&redis.Options{Addr: old, DisableIdentity: true})
	t.Cleanup(func() { primary.Close() })
	require.NoError(t, redistest.WaitReplicated(ctx, primary, "replicated-probe", 1))

	// The link is cut: from here on nothing reaches the replica.
	require.NoError(t, primary.ConfigSet(ctx, "maxclients", "1").Err())
	require.NoError(t, primary.Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err())
	setState("open")
	first := map[string]string{} // user → order id
	for i := range buyers {
		status, body := order(t, base, user(i), admitted(t, base, user(i)))
		require.Equal(t, http.StatusCreated, status, body)
		first[user(i)] = body["id"].(string)
	}
	require.Equal(t, "ALREADY_ORDERED", call(t, "POST", base+"/queue/enter", user(0), "")["error"].(map[string]any)["code"],
		"before the failover the store knows its buyers")

	require.Equal(t, old, sn.KillPrimary(ctx))
	_, err = sn.WaitFailover(ctx, old)
	require.NoError(t, err)

	// The promoted replica has the buyers queued in a paused room, as
	// before the cut. Reopened, the admitter admits them again.
	eventually(t, 20*time.Second, "serving after the failover", func() bool {
		r, err := do(ctx, http.DefaultClient, "GET", base+"/queue/position", user(0), "", "")
		return err == nil && r.status == http.StatusOK
	})
	// The admin's plain connections may meet the old primary a moment
	// longer than the hot path's pipeline (about a second here).
	eventually(t, 20*time.Second, "reopened after the failover", func() bool { return patchState("open") == http.StatusOK })
	outcomes := map[string]int{}
	for i := range buyers {
		st := call(t, "GET", base+"/queue/position", user(i), "")
		require.Contains(t, []any{"waiting", "admitted"}, st["state"], "%s was queued before the cut: %v", user(i), st)
		status, body := order(t, base, user(i), admitted(t, base, user(i)))
		switch {
		case status == http.StatusOK && body["id"] == first[user(i)]:
			outcomes["first order returned"]++
		case status == http.StatusCreated:
			outcomes["second order placed"]++
		default:
			outcomes[fmt.Sprintf("%d %v", status, body)]++
		}
	}
	require.Equal(t, map[string]int{"first order returned": buyers}, outcomes)

	var orders, users int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*), count(DISTINCT user_id) FROM "+schema+".orders").Scan(&orders, &users))
	require.Equal(t, buyers, orders, "one order per buyer in the shop")
	require.Equal(t, buyers, users)
	require.Contains(t, logs.String(), "lost", "the failover's loss is reported")
}
