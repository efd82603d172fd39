package webhook_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom/webhook"
)

// sealedLogs are RedisLogs on one prefix of the test Redis: one per
// cookie secret given ("" seals nothing), and the raw client.
func sealedLogs(t *testing.T, secrets ...string) ([]*webhook.RedisLog, redis.UniversalClient, string) {
	t.Helper()
	client, prefix := testRedis(t)
	var logs []*webhook.RedisLog
	for _, s := range secrets {
		l := webhook.NewRedisLog(client, prefix)
		if s != "" {
			l.Secrets = webhook.NewSecretSealer([]byte(s))
		}
		logs = append(logs, l)
	}
	return logs, client, prefix + ":{wh}:endpoints"
}

// Sealed, an endpoint's secret is not in Redis: neither the whsec_ value
// nor its key. Every instance with the same cookie secret reads it back
// and signs with it; a secret stored before sealing was on still signs.
func TestSealedSecretsAreNotInRedis(t *testing.T) {
	t.Parallel()
	logs, client, hash := sealedLogs(t, strings.Repeat("a", 32), strings.Repeat("a", 32), "")
	sealed, sameKey, plain := logs[0], logs[1], logs[2]
	c := newClock()
	rc := newReceiver(t, func(*http.Request, int) int { return http.StatusOK })
	admin := (&webhook.Admin{Log: sealed, Now: c.Now}).Routes()
	code, body := adminCall(t, admin, "POST", "/admin/webhooks", `{"url":"`+rc.URL+`","events":["room.paused"]}`)
	if code != 201 {
		t.Fatalf("create: %d %v", code, body)
	}
	id, secret := body["id"].(string), body["secret"].(string)
	raw, err := client.HGet(t.Context(), hash, id).Result()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(raw, "whsec_") || strings.Contains(raw, strings.TrimPrefix(secret, "whsec_")) {
		t.Fatalf("the secret is stored readable: %s", raw)
	}
	got, err := sameKey.Endpoints(t.Context())
	if err != nil || len(got) != 1 || got[0].Secrets[0].Value != secret {
		t.Fatalf("read back %+v, %v; want the secret made", got, err)
	}

	// One stored by an instance without a cookie secret, read by one with.
	code, body = adminCall(t, (&webhook.Admin{Log: plain, Now: c.Now}).Routes(), "POST", "/admin/webhooks",
		`{"url":"`+rc.URL+`","events":["room.paused"]}`)
	if code != 201 {
		t.Fatalf("create: %d %v", code, body)
	}
	old := body["secret"].(string)
	if raw, _ := client.HGet(t.Context(), hash, body["id"].(string)).Result(); !strings.Contains(raw, old) {
		t.Fatalf("unsealed, the secret should be stored as given: %s", raw)
	}

	// Both sign a message sent by the instance with the same key.
	d := &webhook.Dispatcher{Log: sameKey, ID: "d1", Now: c.Now}
	em := &webhook.Emitter{Log: sameKey, Now: c.Now}
	if err := d.Step(t.Context()); err != nil {
		t.Fatal(err)
	}
	em.Emit(webhook.RoomPaused, "r-a", webhook.RoomData{State: "paused"})
	if err := em.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	stepUntil(t, d, c, time.Second, 10, func() bool { return len(rc.taken()) == 2 })
	for _, dl := range rc.taken() {
		if verify(t, secret, dl, false) != nil && verify(t, old, dl, false) != nil {
			t.Fatalf("%s is signed by neither secret: %s", dl.ID, dl.Signature)
		}
	}
}

// A sealed secret opens only with its cookie secret and on its own
// endpoint. One that does not open signs nothing: the receiver gets no
// unsigned message, the admin API marks the secret unreadable, and once
// the secret is rotated the event waiting is delivered, signed.
func TestUnreadableSecretSendsNothingUnsigned(t *testing.T) {
	t.Parallel()
	logs, client, hash := sealedLogs(t, strings.Repeat("a", 32), strings.Repeat("b", 32))
	before, after := logs[0], logs[1]
	c := newClock()
	rc := newReceiver(t, func(*http.Request, int) int { return http.StatusOK })
	code, body := adminCall(t, (&webhook.Admin{Log: before, Now: c.Now}).Routes(), "POST", "/admin/webhooks",
		`{"url":"`+rc.URL+`","events":["room.paused"]}`)
	if code != 201 {
		t.Fatalf("create: %d %v", code, body)
	}
	id := body["id"].(string)

	// Copied onto another endpoint, under the same key, it does not open.
	raw, err := client.HGet(t.Context(), hash, id).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := client.HSet(t.Context(), hash, "copy", strings.Replace(raw, `"id":"`+id+`"`, `"id":"copy"`, 1)).Err(); err != nil {
		t.Fatal(err)
	}
	eps, err := before.Endpoints(t.Context())
	if err != nil || len(eps) != 2 {
		t.Fatalf("%+v, %v", eps, err)
	}
	for _, ep := range eps {
		if v := ep.Redacted(); v.Secrets[0].Unreadable != (ep.ID == "copy") {
			t.Fatalf("%s: unreadable %v", ep.ID, v.Secrets[0].Unreadable)
		}
	}
	if err := client.HDel(t.Context(), hash, "copy").Err(); err != nil {
		t.Fatal(err)
	}

	// The cookie secret changed: nothing is sent.
	admin := (&webhook.Admin{Log: after, Now: c.Now}).Routes()
	_, listed := adminCall(t, admin, "GET", "/admin/webhooks", "")
	if !strings.Contains(toJSON(t, listed), `"unreadable":true`) {
		t.Fatalf("the list does not mark the secret: %s", toJSON(t, listed))
	}
	d := &webhook.Dispatcher{Log: after, ID: "d1", Now: c.Now, Jitter: func() float64 { return 0.5 }}
	em := &webhook.Emitter{Log: after, Now: c.Now}
	if err := d.Step(t.Context()); err != nil {
		t.Fatal(err)
	}
	em.Emit(webhook.RoomPaused, "r-a", webhook.RoomData{State: "paused"})
	if err := em.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if err := d.Step(t.Context()); err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Second)
	}
	if n := len(rc.deliveries()); n != 0 {
		t.Fatalf("%d messages sent with no secret to sign them: %+v", n, rc.deliveries())
	}

	// Rotated under the new cookie secret: the event goes out, signed.
	code, body = adminCall(t, admin, "POST", "/admin/webhooks/"+id+"/rotate", `{}`)
	if code != 200 {
		t.Fatalf("rotate: %d %v", code, body)
	}
	stepUntil(t, d, c, time.Second, 200, func() bool { return len(rc.taken()) == 1 })
	if err := verify(t, body["secret"].(string), rc.taken()[0], false); err != nil {
		t.Fatal(err)
	}
}
