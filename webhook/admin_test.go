package webhook_test

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/webhook"
)

// A rotation through the admin API sends both signatures during the
// overlap, each accepted by the library with its own secret, and only the
// new one after it.
func TestRotationSendsBothSignatures(t *testing.T) {
	t.Parallel()
	c := newClock()
	log := redisLog(t)
	rc := newReceiver(t, func(*http.Request, int) int { return http.StatusOK })
	admin := (&webhook.Admin{Log: log, Now: c.Now}).Routes()
	d := &webhook.Dispatcher{Log: log, ID: "d1", Now: c.Now}
	em := &webhook.Emitter{Log: log, Now: c.Now}

	code, body := adminCall(t, admin, "POST", "/admin/webhooks", `{"url":"`+rc.URL+`","events":["room.paused"],"rooms":["r-a"]}`)
	if code != 201 || !strings.HasPrefix(body["secret"].(string), "whsec_") {
		t.Fatalf("create: %d %v", code, body)
	}
	id, old := body["id"].(string), body["secret"].(string)
	if rooms, events := body["rooms"].([]any), body["events"].([]any); len(rooms) != 1 || len(events) != 1 {
		t.Fatalf("create answered rooms %v, events %v", body["rooms"], body["events"])
	}
	if _, listed := adminCall(t, admin, "GET", "/admin/webhooks", ""); strings.Contains(toJSON(t, listed), old) {
		t.Fatal("the list shows the secret")
	}
	code, body = adminCall(t, admin, "POST", "/admin/webhooks/"+id+"/rotate", `{"overlap_seconds":3600}`)
	if code != 200 || body["secret"] == old {
		t.Fatalf("rotate: %d %v", code, body)
	}
	next := body["secret"].(string)

	emit := func() delivery {
		t.Helper()
		em.Emit(webhook.RoomResumed, "r-a", webhook.RoomData{State: "open"})  // not wanted: skipped
		em.Emit(webhook.RoomPaused, "r-b", webhook.RoomData{State: "paused"}) // another room: skipped
		em.Emit(webhook.RoomPaused, "r-a", webhook.RoomData{State: "paused"})
		if err := em.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		n := len(rc.deliveries())
		stepUntil(t, d, c, time.Second, 10, func() bool { return len(rc.deliveries()) == n+1 })
		got := rc.deliveries()[n]
		if got.Event.Type != webhook.RoomPaused || got.Event.Room != "r-a" {
			t.Fatalf("the filter let through %s", got.Body)
		}
		return got
	}
	during := emit()
	if n := len(strings.Fields(during.Signature)); n != 2 {
		t.Fatalf("%d signatures during the overlap, want 2: %s", n, during.Signature)
	}
	for _, s := range []string{old, next} {
		if err := verify(t, s, during, true); err != nil {
			t.Fatalf("during the overlap: %v", err)
		}
	}
	c.Advance(time.Hour)
	after := emit()
	if err := verify(t, next, after, false); err != nil {
		t.Fatalf("after the overlap, the new secret: %v", err)
	}
	if err := verify(t, old, after, false); !errors.Is(err, standardwebhooks.ErrNoMatchingSignature) {
		t.Fatalf("after the overlap the old secret still verifies: %v", err)
	}
}

// Every bad input of the admin API is a 400 (or 404, 409) with its code.
func TestAdminRefusesBadInput(t *testing.T) {
	t.Parallel()
	log := webhook.NewMemLog()
	static, err := webhook.StaticEndpoint("https://shop.example/hooks", []string{webhook.NewSecret()})
	if err != nil {
		t.Fatal(err)
	}
	admin := (&webhook.Admin{Log: log, Static: []webhook.Endpoint{static}}).Routes()
	for _, c := range []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"POST", "/admin/webhooks", `{"url":"ftp://shop.example/h"}`, 400, webhook.CodeURLInvalid},
		{"POST", "/admin/webhooks", `{"url":"/relative"}`, 400, webhook.CodeURLInvalid},
		{"POST", "/admin/webhooks", `{"url":"http://"}`, 400, webhook.CodeURLInvalid},
		{"POST", "/admin/webhooks", `{"url":"https://u:p@shop.example/h"}`, 400, webhook.CodeURLInvalid},
		{"POST", "/admin/webhooks", `{"url":"https://shop.example/h#x"}`, 400, webhook.CodeURLInvalid},
		{"POST", "/admin/webhooks", `{"url":"https://shop.example/` + strings.Repeat("a", webhook.MaxURLLen) + `"}`, 400, webhook.CodeURLInvalid},
		{"POST", "/admin/webhooks", `{"url":"https://shop.example/h","secret":"nope"}`, 400, webhook.CodeSecretInvalid},
		{"POST", "/admin/webhooks", `{"url":"https://shop.example/h","secret":"whsec_!!!"}`, 400, webhook.CodeSecretInvalid},
		{"POST", "/admin/webhooks", `{"url":"https://shop.example/h","secret":"whsec_c2hvcnQ="}`, 400, webhook.CodeSecretInvalid},
		{"POST", "/admin/webhooks", `{"url":"https://shop.example/h","events":["user.bogus"]}`, 400, webhook.CodeEventUnknown},
		{"POST", "/admin/webhooks", `{"url":"https://shop.example/h","rooms":["bad room"]}`, 400, webhook.CodeRoomInvalid},
		{"POST", "/admin/webhooks", `{"url":"https://shop.example/h","colour":"red"}`, 400, "BAD_REQUEST"},
		{"POST", "/admin/webhooks", `[1]`, 400, "BAD_REQUEST"},
		{"DELETE", "/admin/webhooks/ep_nope", "", 404, webhook.CodeNotFound},
		{"DELETE", "/admin/webhooks/" + static.ID, "", 409, webhook.CodeStatic},
		{"POST", "/admin/webhooks/" + static.ID + "/rotate", "", 409, webhook.CodeStatic},
		{"POST", "/admin/webhooks/ep_nope/rotate", `{"overlap_seconds":-1}`, 400, webhook.CodeOverlap},
		{"POST", "/admin/webhooks/ep_nope/rotate", `{"overlap_seconds":999999999}`, 400, webhook.CodeOverlap},
		{"POST", "/admin/webhooks/ep_nope/rotate", `{"secret":"whsec_"}`, 400, webhook.CodeSecretInvalid},
		{"POST", "/admin/webhooks/ep_nope/rotate", "", 404, webhook.CodeNotFound},
		{"GET", "/admin/webhooks/dead?limit=0", "", 400, "BAD_REQUEST"},
		{"GET", "/admin/webhooks/dead?limit=x", "", 400, "BAD_REQUEST"},
		{"POST", "/admin/webhooks/dead/x/redeliver", "", 404, webhook.CodeDeadNotFound},
	} {
		code, body := adminCall(t, admin, c.method, c.path, c.body)
		if code != c.status || errorCode(body) != c.code {
			t.Errorf("%s %s %.60s: %d %s, want %d %s", c.method, c.path, c.body, code, errorCode(body), c.status, c.code)
		}
	}
	// The limit of endpoints.
	for i := range webhook.MaxEndpoints - 1 {
		if code, body := adminCall(t, admin, "POST", "/admin/webhooks", `{"url":"https://shop.example/h"}`); code != 201 {
			t.Fatalf("endpoint %d: %d %v", i, code, body)
		}
	}
	if code, body := adminCall(t, admin, "POST", "/admin/webhooks", `{"url":"https://shop.example/h"}`); code != 409 || errorCode(body) != webhook.CodeTooMany {
		t.Fatalf("one endpoint too many: %d %v", code, body)
	}
}

// The flags' endpoint is checked as the admin API's are.
func TestStaticEndpointChecksItsFlags(t *testing.T) {
	t.Parallel()
	good := webhook.NewSecret()
	for _, c := range []struct {
		url     string
		secrets []string
		code    string
	}{
		{"https://shop.example/h", nil, webhook.CodeSecretInvalid},
		{"https://shop.example/h", []string{good, "whsec_x"}, webhook.CodeSecretInvalid},
		{"shop.example/h", []string{good}, webhook.CodeURLInvalid},
	} {
		_, err := webhook.StaticEndpoint(c.url, c.secrets)
		var in *webhook.InputError
		if !errors.As(err, &in) || in.Code != c.code {
			t.Errorf("%s %v: %v, want %s", c.url, c.secrets, err, c.code)
		}
	}
	a, err := webhook.StaticEndpoint("https://shop.example/h", []string{good})
	b, err2 := webhook.StaticEndpoint("https://shop.example/h", []string{webhook.NewSecret()})
	if err != nil || err2 != nil || a.ID != b.ID {
		t.Fatalf("the same URL's id differs: %s %s (%v %v)", a.ID, b.ID, err, err2)
	}
}

// Of eight redeliveries of one dead letter at once, one is taken (202)
// and appended once; the others find none (404).
func TestRedeliverOnceUnderRace(t *testing.T) {
	eachLog(t, func(t *testing.T, log webhook.Log, c *clock) {
		if err := log.AddGroup(t.Context(), "t"); err != nil {
			t.Fatal(err)
		}
		ev := webhook.NewEvent(webhook.RoomPaused, "r", c.Now(), webhook.RoomData{State: "paused"})
		dl := webhook.DeadLetter{ID: "dl_race", Endpoint: "ep_x", EventID: ev.ID, Type: ev.Type, Room: ev.Room, Body: ev.Body(), At: c.Now()}
		if err := log.AddDead(t.Context(), dl); err != nil {
			t.Fatal(err)
		}
		admin := (&webhook.Admin{Log: log, Now: c.Now}).Routes()
		codes := make([]int, 8)
		testenv.AtOnce(len(codes), func(i int) {
			codes[i], _ = adminCall(t, admin, "POST", "/admin/webhooks/dead/dl_race/redeliver", "")
		})
		counts := map[int]int{}
		for _, code := range codes {
			counts[code]++
		}
		if counts[202] != 1 || counts[404] != 7 {
			t.Fatalf("answers %v, want one 202 and seven 404", counts)
		}
		got := appended(t, log)
		if len(got) != 1 || got[0].Event.ID != ev.ID || got[0].Only != "ep_x" || string(got[0].Body) != string(ev.Body()) {
			t.Fatalf("appended %+v", got)
		}
	})
}

// A burst of rotations leaves the newest MaxSecrets signing.
func TestRotationsKeepTheNewestSecrets(t *testing.T) {
	t.Parallel()
	c := newClock()
	e, err := webhook.StaticEndpoint("https://shop.example/h", []string{webhook.NewSecret()})
	if err != nil {
		t.Fatal(err)
	}
	var newest []string
	for range 10 {
		s := webhook.NewSecret()
		e.Rotate(s, c.Now(), time.Hour)
		newest = append([]string{s}, newest...)
	}
	if len(e.Secrets) != webhook.MaxSecrets {
		t.Fatalf("%d secrets sign, want %d", len(e.Secrets), webhook.MaxSecrets)
	}
	for i, s := range e.Secrets {
		if s.Value != newest[i] {
			t.Fatalf("secret %d is not the %d-th newest", i, i)
		}
	}
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestRotationSignsTheNextDelivery: a secret rotated through this
// instance's admin API while its dispatcher is delivering (here while the
// receiver holds the first message) signs the very next message with
// both secrets, though the step that delivers it began before the
// rotation: a receiver that takes the new secret at once never sees a
// message without it.
func TestRotationSignsTheNextDelivery(t *testing.T) {
	t.Parallel()
	eachLog(t, func(t *testing.T, log webhook.Log, c *clock) {
		d := &webhook.Dispatcher{Log: log, ID: "d1", Now: c.Now}
		admin := (&webhook.Admin{Log: log, Now: c.Now, Changed: d.LoadEndpoints}).Routes()
		em := &webhook.Emitter{Log: log, Now: c.Now}
		arrived, proceed := make(chan struct{}, 1), make(chan struct{})
		var first sync.Once
		rc := newReceiver(t, func(*http.Request, int) int {
			first.Do(func() {
				arrived <- struct{}{}
				<-proceed
			})
			return http.StatusOK
		})
		code, body := adminCall(t, admin, "POST", "/admin/webhooks", `{"url":"`+rc.URL+`","events":["room.paused","room.resumed"],"rooms":["r-a"]}`)
		if code != 201 {
			t.Fatalf("create: %d %v", code, body)
		}
		id, old := body["id"].(string), body["secret"].(string)
		em.Emit(webhook.RoomPaused, "r-a", webhook.RoomData{State: "paused"})
		if err := em.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		stepped := make(chan error, 1)
		go func() { stepped <- d.Step(t.Context()) }()
		<-arrived // the first message is being delivered
		code, body = adminCall(t, admin, "POST", "/admin/webhooks/"+id+"/rotate", `{"overlap_seconds":3600}`)
		if code != 200 {
			t.Fatalf("rotate: %d %v", code, body)
		}
		next := body["secret"].(string)
		em.Emit(webhook.RoomResumed, "r-a", webhook.RoomData{State: "open"})
		if err := em.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		close(proceed)
		if err := <-stepped; err != nil {
			t.Fatal(err)
		}
		got := rc.deliveries()
		if len(got) != 2 || got[1].Event.Type != webhook.RoomResumed {
			t.Fatalf("one step delivered %d messages, want paused then resumed", len(got))
		}
		if err := verify(t, old, got[0], true); err != nil {
			t.Fatalf("the first message, before the rotation: %v", err)
		}
		for _, s := range []string{next, old} {
			if err := verify(t, s, got[1], true); err != nil {
				t.Fatalf("the next message, after the rotation: %v", err)
			}
		}
	})
}
