package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
)

// child is one 'waitroom serve' process.
type child struct {
	cmd  *exec.Cmd
	addr string
	logs *testenv.LogBuffer
	done chan struct{} // closed when the process has exited
}

// startChild runs bin serve with args and env on port 0 and returns once
// it listens (its address read from its JSON log).
func startChild(t *testing.T, bin string, args, env []string) *child {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--log-format", "json"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &child{cmd: cmd, logs: &testenv.LogBuffer{}, done: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			_, _ = c.logs.Write([]byte(line + "\n"))
			var entry struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "waiting room listening" {
				addr <- entry.Addr
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		_ = cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-c.done
	})
	select {
	case c.addr = <-addr:
	case <-c.done:
		t.Fatalf("waitroom serve exited at start:\n%s", c.logs.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("waitroom serve did not listen within 20 s:\n%s", c.logs.String())
	}
	return c
}

// buildWaitroom builds this command into the test's temp dir, for tests
// that run it as a process of its own.
func buildWaitroom(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "waitroom")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// kill SIGKILLs the process: no shutdown, no settling of held tokens.
func (c *child) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, c.cmd.Process.Kill())
	<-c.done
}

// TestFaultServerKilledBetweenClaimAndComplete: the server process is
// SIGKILLed while a burst of orders holds claimed tokens (the pool of 2
// connections keeps most orders waiting after their claim). A new process
// on the same Redis and PostgreSQL serves the same users retrying with
// their tokens: a held token is claimable again once it is abandoned, its
// lease (2 s) and the settle window after it (waitroom.SettleWindow, in
// which a living gate would still be retrying its Complete) passed; no
// user gets a second order, and an order committed before the kill (its
// 2xx never settled) is answered again (200, replayed) by its
// Idempotency-Key rather than placed twice.
func TestFaultServerKilledBetweenClaimAndComplete(t *testing.T) {
	t.Parallel()
	bin := buildWaitroom(t)

	redisURL := testenv.RedisURL()
	prefix := fmt.Sprintf("wrtest-kill-%d", time.Now().UnixNano())
	t.Cleanup(func() { deleteKeys(t, redisURL, prefix) })
	conn, dbURL, schema := testSchema(t, "fault_kill")
	const lease = 2 * time.Second
	env := []string{
		"REDIS_URL=" + redisURL,
		"WAITROOM_REDIS_PREFIX=" + prefix,
		"DATABASE_URL=" + viaProxy(t, dbURL, hostOf(t, dbURL, "5432"), schema),
		"AMQP_URL=", "WAITROOM_UPSTREAM=",
	}
	args := []string{"--rate", "2000", "--lease", lease.String(), "--products", "drop:100000", "--db-pool", "2"}
	first := startChild(t, bin, args, env)
	base := "http://" + first.addr

	// Every user holds a token before the burst.
	const users = 200
	tokens := make([]string, users)
	user := func(i int) string { return fmt.Sprintf("buyer-%03d", i) }
	for i := range users {
		r := mustDo(t, "POST", base+"/queue/enter", user(i), "", "")
		require.Equal(t, http.StatusOK, r.status, r.body)
	}
	eventually(t, 20*time.Second, "every user admitted", func() bool {
		for i := range users {
			if tokens[i] != "" {
				continue
			}
			r := mustDo(t, "GET", base+"/queue/position", user(i), "", "")
			if r.body["state"] != "admitted" {
				return false
			}
			tokens[i] = r.body["token"].(string)
		}
		return true
	})
	ordersIn := func() int {
		var n int
		require.NoError(t, conn.QueryRow(t.Context(), "SELECT count(*) FROM "+schema+".orders").Scan(&n))
		return n
	}

	// The burst: every user orders at once; the process dies mid-burst.
	client := &http.Client{Timeout: 30 * time.Second}
	firstTry := make([]reply, users)
	firstErr := make([]error, users)
	var wg sync.WaitGroup
	begin := make(chan struct{})
	for i := range users {
		wg.Go(func() {
			<-begin
			firstTry[i], firstErr[i] = do(t.Context(), client, "POST", base+"/orders", user(i), tokens[i], `{"product_id":"drop"}`)
		})
	}
	close(begin)
	// Watched closely, not at eventually's pace: with an idle machine the
	// whole burst commits within a few of its polls, and a kill after the
	// last order finds no token held.
	for deadline := time.Now().Add(20 * time.Second); ordersIn() < 30; time.Sleep(2 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "30 orders committed: not within 20s")
	}
	first.kill(t)
	killedAt := time.Now()
	wg.Wait()

	// What the kill left: orders committed (a transaction cut by the
	// kill rolls back) and tokens held by the dead process.
	// A COMMIT the dead process sent before it died still completes in
	// PostgreSQL: count once the count stands still.
	committedAtKill := ordersIn()
	for settled := false; !settled; {
		time.Sleep(100 * time.Millisecond)
		n := ordersIn()
		settled, committedAtKill = n == committedAtKill, n
	}
	held := heldTokens(t, redisURL, prefix)
	answered, unanswered := 0, 0
	for i := range users {
		switch {
		case firstErr[i] != nil:
			unanswered++
		case firstTry[i].status == http.StatusCreated:
			answered++
		default:
			t.Fatalf("%s: unexpected first answer %d %v", user(i), firstTry[i].status, firstTry[i].body)
		}
	}
	require.Positive(t, held, "the kill should land while tokens are held")
	require.Positive(t, unanswered)

	second := startChild(t, bin, args, env)
	base = "http://" + second.addr
	var mu sync.Mutex
	outcomes := map[string]int{}
	var lastInUse time.Time
	orderOf := map[string]string{} // user → order id answered
	for i := range users {
		if firstErr[i] == nil {
			orderOf[user(i)] = firstTry[i].body["id"].(string)
		}
	}
	// The retries write orderOf too: they start once the loop above is done.
	for i := range users {
		if firstErr[i] == nil {
			continue
		}
		wg.Go(func() {
			deadline := time.Now().Add(lease + waitroom.SettleWindow + 15*time.Second)
			for time.Now().Before(deadline) {
				// A TOKEN_IN_USE answer proves the lease was live after the
				// request left; its send time bounds that moment from below
				// whatever a loaded machine does to the answer's way back.
				sent := time.Now()
				r, err := do(t.Context(), client, "POST", base+"/orders", user(i), tokens[i], `{"product_id":"drop"}`)
				mu.Lock()
				switch {
				case err != nil:
					mu.Unlock()
					t.Errorf("%s: retry: %v", user(i), err)
					return
				case r.status == http.StatusConflict && r.code() == "TOKEN_IN_USE":
					if sent.After(lastInUse) {
						lastInUse = sent
					}
					mu.Unlock()
					time.Sleep(50 * time.Millisecond) // the lease runs on Redis's clock
					continue
				case r.status == http.StatusCreated:
					outcomes["created on retry"]++
					orderOf[user(i)] = r.body["id"].(string)
				case r.status == http.StatusOK && r.header.Get("Idempotent-Replayed") == "true":
					outcomes["replayed"]++
					orderOf[user(i)] = r.body["id"].(string)
				case r.status == http.StatusForbidden && r.code() == "ENTRY_TOKEN_NOT_FOUND":
					// Completed before the kill, answer lost: spent.
					outcomes["spent"]++
				default:
					outcomes[fmt.Sprintf("%d %s", r.status, r.code())]++
				}
				mu.Unlock()
				return
			}
			t.Errorf("%s: no answer but TOKEN_IN_USE within %s", user(i), lease+waitroom.SettleWindow+15*time.Second)
		})
	}
	wg.Wait()

	inUseFor := time.Duration(0)
	if !lastInUse.IsZero() {
		inUseFor = lastInUse.Sub(killedAt)
	}
	t.Logf("kill after %d of %d orders committed: %d tokens held, %d answers delivered, %d lost in the kill; retries: %v; TOKEN_IN_USE seen until %s after the kill (lease %s)",
		committedAtKill, users, held, answered, unanswered, outcomes, inUseFor.Round(time.Millisecond), lease)

	// No token stayed held past its lease and the settle window (plus the
	// retry pause).
	require.Less(t, inUseFor, lease+waitroom.SettleWindow+500*time.Millisecond)
	// Every retry ended in an order or a spent token, nothing else.
	require.Equal(t, unanswered, outcomes["created on retry"]+outcomes["replayed"]+outcomes["spent"], outcomes)
	// What committed before the kill was answered again, not placed again.
	require.Equal(t, committedAtKill-answered, outcomes["replayed"]+outcomes["spent"])
	require.Equal(t, users-committedAtKill, outcomes["created on retry"])

	// In PostgreSQL: one order per user, one per idempotency key, and the
	// order each user was told about is that one.
	rows, err := conn.Query(t.Context(), "SELECT user_id, id FROM "+schema+".orders")
	require.NoError(t, err)
	stored := map[string]string{}
	for rows.Next() {
		var u, id string
		require.NoError(t, rows.Scan(&u, &id))
		require.NotContains(t, stored, u, "a second order for %s", u)
		stored[u] = id
	}
	require.NoError(t, rows.Err())
	require.Len(t, stored, users)
	for u, id := range orderOf {
		require.Equal(t, stored[u], id, u)
	}
	var keys, distinct int
	require.NoError(t, conn.QueryRow(t.Context(), "SELECT count(*), count(DISTINCT idempotency_key) FROM "+schema+".orders").Scan(&keys, &distinct))
	require.Equal(t, keys, distinct)
	require.NotContains(t, second.logs.String(), `"level":"ERROR"`)
}

// heldTokens counts the room's entry tokens in the "held" state (claimed by
// an order that has not completed or released them).
func heldTokens(t *testing.T, redisURL, prefix string) int {
	t.Helper()
	opts, err := redis.ParseURL(redisURL)
	require.NoError(t, err)
	client := redis.NewClient(opts)
	defer client.Close()
	entries, err := client.HGetAll(t.Context(), prefix+":{default}:tok").Result()
	require.NoError(t, err)
	held := 0
	for _, e := range entries {
		if strings.Contains(e, "|held|") {
			held++
		}
	}
	return held
}
