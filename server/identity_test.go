package server_test

import (
	"encoding/base64"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom/internal/servertest"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/server"
)

// A visitor is who the server says: with the join challenge on, the id a
// new visitor joins as is the one the server issued in its challenge,
// once; nobody joins as an id they merely know, nor from another site.

const identityDifficulty = 8

// bootOf reads the state a page hands its script.
func bootOf(t *testing.T, p page) map[string]any {
	t.Helper()
	m := regexp.MustCompile(`<script type="application/json" id="boot">([^<]*)</script>`).FindStringSubmatch(p.body)
	require.NotNil(t, m, "no boot state in the page")
	var boot map[string]any
	require.NoError(t, json.Unmarshal([]byte(html.UnescapeString(m[1])), &boot))
	return boot
}

// postJoin posts the join form as the page's script does (same origin),
// headers name, value pairs on top.
func (f *pageFixture) postJoin(form url.Values, cookies []*http.Cookie, headers ...string) page {
	f.t.Helper()
	req, err := http.NewRequestWithContext(f.t.Context(), "POST", f.srv.URL+"/", strings.NewReader(form.Encode()))
	require.NoError(f.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Origin", f.srv.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for _, c := range cookies {
		req.AddCookie(c)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i]) // a browser that does not send it
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	return pageOf(f.t, f.srv.Client(), req)
}

// solvedJoin loads the page as a new visitor and solves its challenge: the
// form the page's script posts.
func (f *pageFixture) solvedJoin() url.Values {
	f.t.Helper()
	boot := bootOf(f.t, f.get("/"))
	challenge, _ := boot["challenge"].(string)
	require.NotEmpty(f.t, challenge, "the join view carries a challenge")
	require.Nil(f.t, boot["visitor"], "the page names no id for the client to send back")
	return url.Values{"challenge": {challenge}, "nonce": {solve(challenge, identityDifficulty)}}
}

func errorCode(t *testing.T, p page) string {
	t.Helper()
	e, _ := p.json(t)["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

// cookieID is the visitor id a cookie names (its value's first part).
func cookieID(c *http.Cookie) string {
	id, _, _ := strings.Cut(c.Value, ".")
	return id
}

// The takeover: an attacker who knows a victim's visitor id (the entrants
// export lists them) and posts it gets neither the victim's cookie, nor
// its place, nor its entry token, with or without a solution of its own.
func TestJoinNeverAdoptsAKnownVisitorID(t *testing.T) {
	t.Parallel()
	f := newPageFixture(t, pageOptions{server: func(c *server.Config) { c.JoinChallenge = identityDifficulty }})
	// The victim joins as the page does and is admitted.
	victimJoin := f.postJoin(f.solvedJoin(), nil)
	require.Equal(t, http.StatusOK, victimJoin.status, victimJoin.body)
	victimCookie := victimJoin.visitorCookie()
	require.NotNil(t, victimCookie)
	victim := cookieID(victimCookie)
	f.admitNext(1)
	token, _ := f.statusOf(victimCookie).json(t)["token"].(string)
	require.NotEmpty(t, token)

	noVictim := func(p page, why string) {
		t.Helper()
		if c := p.visitorCookie(); c != nil {
			require.NotEqual(t, victim, cookieID(c), "%s: the victim's cookie was handed out", why)
		}
		require.NotContains(t, p.body, token, "%s: the victim's token was handed out", why)
	}
	// The id alone, as the old page's form sent it.
	p := f.postJoin(url.Values{"visitor": {victim}}, nil)
	require.Equal(t, http.StatusPreconditionRequired, p.status, p.body)
	require.Equal(t, "CHALLENGE_REQUIRED", errorCode(t, p))
	require.Nil(t, p.visitorCookie())
	noVictim(p, "the id alone")
	// The id with a solution of the attacker's own: a place, but its own.
	own := f.solvedJoin()
	own.Set("visitor", victim)
	p = f.postJoin(own, nil)
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.NotNil(t, p.visitorCookie())
	noVictim(p, "an own solution")
	// The page without scripts, posting the id.
	nojs := f.request("POST", "/?visitor="+victim, nil, "Accept", "text/html")
	noVictim(nojs, "the page without scripts")
	require.Nil(t, nojs.visitorCookie())
	// A challenge made up for the victim's id is not the server's.
	forged := "c1." + f.room + "." + base64.RawURLEncoding.EncodeToString([]byte("visitor-"+victim)) + ".1772366400.8.AAAA"
	p = f.postJoin(url.Values{"visitor": {victim}, "challenge": {forged}, "nonce": {solve(forged, identityDifficulty)}}, nil)
	require.Equal(t, http.StatusBadRequest, p.status, p.body)
	require.Equal(t, "BAD_REQUEST", errorCode(t, p))
	noVictim(p, "a forged challenge")
	require.Equal(t, int64(1), f.waiting(), "the victim (admitted) and the attacker's own place: one waits")

	// A known visitor's own challenge (its page after it left the line)
	// proves work for that visitor's cookie, and makes nobody else it.
	left := f.postJoin(f.solvedJoin(), nil).visitorCookie()
	require.NotNil(t, left)
	require.Equal(t, http.StatusNoContent, f.request("DELETE", "/rooms/"+f.room+"/queue", []*http.Cookie{left}).status)
	challenge, _ := bootOf(t, f.get("/", left))["challenge"].(string)
	require.NotEmpty(t, challenge)
	p = f.postJoin(url.Values{"challenge": {challenge}, "nonce": {solve(challenge, identityDifficulty)}}, nil)
	require.Equal(t, http.StatusBadRequest, p.status, p.body)
	require.Nil(t, p.visitorCookie(), "a known visitor's challenge issues no cookie")
}

// The spent challenge is refused on another instance too, even one that
// counts apart (an in-process limiter each): the id has a place by then.
func TestJoinChallengeSpentOnAnotherInstance(t *testing.T) {
	t.Parallel()
	f := newPageFixture(t, pageOptions{server: func(c *server.Config) { c.JoinChallenge = identityDifficulty }})
	other := newTestServer(t, servertest.MustServer(t, server.Config{Store: f.store, DefaultRoom: f.room, CookieSecret: testSecret, JoinChallenge: identityDifficulty}))
	form := f.solvedJoin()
	require.Equal(t, http.StatusOK, f.postJoin(form, nil).status)
	req, err := http.NewRequestWithContext(t.Context(), "POST", other+"/", strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	replay := pageOf(t, http.DefaultClient, req)
	require.Equal(t, http.StatusPreconditionRequired, replay.status, replay.body)
	require.Nil(t, replay.visitorCookie())
	require.Equal(t, int64(1), f.waiting())
}

// A challenge issued to a new visitor is spent by its join: posted again
// (a replay, or many copies at once) it makes no second cookie of its id.
// On both limiters, which keep the spent challenges.
func TestJoinChallengeIsSingleUse(t *testing.T) {
	t.Parallel()
	for name, limiter := range bothLimiters(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newPageFixture(t, pageOptions{server: func(c *server.Config) { c.JoinChallenge = identityDifficulty; c.Limiter = limiter }})
			form := f.solvedJoin()
			first := f.postJoin(form, nil)
			require.Equal(t, http.StatusOK, first.status, first.body)
			require.NotNil(t, first.visitorCookie())
			replay := f.postJoin(form, nil)
			require.Equal(t, http.StatusPreconditionRequired, replay.status, replay.body)
			require.Equal(t, "CHALLENGE_REQUIRED", errorCode(t, replay))
			require.NotEqual(t, form.Get("challenge"), replay.json(t)["challenge"], "a fresh challenge to solve")
			require.Nil(t, replay.visitorCookie())
			// Nor once the place it bought is gone (left, or used).
			require.Equal(t, http.StatusNoContent, f.request("DELETE", "/rooms/"+f.room+"/queue", []*http.Cookie{first.visitorCookie()}).status)
			replay = f.postJoin(form, nil)
			require.Equal(t, http.StatusPreconditionRequired, replay.status, replay.body)
			require.Nil(t, replay.visitorCookie())

			// Many copies of one solved challenge at once: one join.
			form = f.solvedJoin()
			answers := make([]page, 20)
			testenv.AtOnce(len(answers), func(i int) { answers[i] = f.postJoin(form, nil) })
			codes := map[int]int{}
			cookies := 0
			for _, a := range answers {
				codes[a.status]++
				if a.visitorCookie() != nil {
					cookies++
				}
			}
			require.Equal(t, map[int]int{http.StatusOK: 1, http.StatusPreconditionRequired: 19}, codes)
			require.Equal(t, 1, cookies)
			require.Equal(t, int64(1), f.waiting())
		})
	}
}

// A join from another site is refused with a code, whatever it carries:
// a form on another site cannot plant a visitor in a shopper's browser.
func TestCrossSiteJoinIsRefused(t *testing.T) {
	t.Parallel()
	for _, challenge := range []int{0, identityDifficulty} {
		f := newPageFixture(t, pageOptions{server: func(c *server.Config) { c.JoinChallenge = challenge }})
		form := url.Values{}
		if challenge > 0 {
			form = f.solvedJoin()
		}
		for _, headers := range [][]string{
			{"Origin", "https://evil.example", "Sec-Fetch-Site", ""},
			{"Sec-Fetch-Site", "cross-site"},
			{"Sec-Fetch-Site", "cross-site", "Origin", "null"},
			{"Sec-Fetch-Site", "same-site", "Origin", "https://shop.evil.example"},
		} {
			p := f.postJoin(form, nil, headers...)
			require.Equal(t, http.StatusForbidden, p.status, "%v: %s", headers, p.body)
			require.Equal(t, "CROSS_SITE_JOIN", errorCode(t, p), headers)
			require.Nil(t, p.visitorCookie(), headers)
			// The form without scripts is refused the same, on a page.
			html := f.request("POST", "/", nil, append([]string{"Accept", "text/html", "Content-Type", "application/x-www-form-urlencoded"}, headers...)...)
			require.Equal(t, http.StatusForbidden, html.status, headers)
			require.Nil(t, html.visitorCookie(), headers)
		}
		require.Zero(t, f.waiting())
		// The page's own join, and a client that is no browser, get in.
		ok := f.postJoin(form, nil)
		require.Equal(t, http.StatusOK, ok.status, ok.body)
		if challenge == 0 {
			require.Equal(t, http.StatusOK, f.request("POST", "/", nil, "Accept", "application/json").status)
		}
	}
}
