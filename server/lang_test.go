package server_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/i18n"
)

// The waiting page's language: chosen by ?lang=, else the remembered
// choice (cookie), else Accept-Language by quality, else English.

// langOf reads the page's <html lang>.
func langOf(t *testing.T, p page) string {
	t.Helper()
	m := regexp.MustCompile(`^<!doctype html>\n<html lang="([^"]*)">`).FindStringSubmatch(p.body)
	require.NotNil(t, m, "no <html lang> at the start of %.200q", p.body)
	return m[1]
}

// langCookie is the cookie that remembers the choice, if p sets it.
func langCookie(p page) *http.Cookie {
	for _, c := range (&http.Response{Header: p.header}).Cookies() {
		if c.Name == "waitroom_lang" {
			return c
		}
	}
	return nil
}

const browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"

// Each language's join button, as the page writes it.
var joinButton = map[string]string{
	"en": "Join the line", "de": "Jetzt anstellen", "es": "Unirme a la fila", "fr": "Rejoindre la file",
	"ja": "列に並ぶ", "ko": "대기열에 들어가기", "zh-Hans": "加入排队",
}

func TestPageLanguage(t *testing.T) {
	t.Parallel()
	f := newPageFixture(t, pageOptions{})
	get := func(path string, cookies []*http.Cookie, acceptLanguage string) page {
		t.Helper()
		headers := []string{"Accept", browserAccept}
		if acceptLanguage != "" {
			headers = append(headers, "Accept-Language", acceptLanguage)
		}
		p := f.request("GET", path, cookies, headers...)
		require.Equal(t, http.StatusOK, p.status, "%s %q: %.300s", path, acceptLanguage, p.body)
		return p
	}
	requireLang := func(p page, want string, msgAndArgs ...any) {
		t.Helper()
		require.Equal(t, want, langOf(t, p), msgAndArgs...)
		require.Equal(t, want, p.header.Get("Content-Language"), msgAndArgs...)
		require.Equal(t, joinButton[want], text(t, p.body, "join-button"), msgAndArgs...)
	}

	t.Run("no header is English", func(t *testing.T) {
		p := get("/", nil, "")
		requireLang(p, "en")
		require.Contains(t, p.header.Values("Vary"), "Accept-Language")
		require.Nil(t, langCookie(p), "nothing chosen, nothing remembered")
	})
	t.Run("Accept-Language", func(t *testing.T) {
		for header, want := range map[string]string{
			"ko-KR,ko;q=0.9,en-US;q=0.8,en;q=0.7": "ko",
			"ja":                                  "ja",
			"zh-CN,zh;q=0.9":                      "zh-Hans",
			"es-MX":                               "es",
			"fr-CA, en;q=0.5":                     "fr",
			"de-AT":                               "de",
			"en-GB":                               "en",
		} {
			p := get("/", nil, header)
			requireLang(p, want, header)
			require.Nil(t, langCookie(p), "a header is not a choice to remember")
		}
	})
	t.Run("quality order", func(t *testing.T) {
		requireLang(get("/", nil, "ja;q=0.3, de;q=0.8, ko;q=0.5"), "de")
		requireLang(get("/", nil, "en;q=0.1, fr"), "fr")
		requireLang(get("/", nil, "pt-BR, es;q=0.4"), "es", "the first we have")
		requireLang(get("/", nil, "ko;q=0, ja"), "ja", "q=0 is a refusal")
	})
	t.Run("unknown tag is English", func(t *testing.T) {
		for _, header := range []string{"pt-BR", "xx", "*", "tlh;q=1, sw;q=0.5"} {
			requireLang(get("/", nil, header), "en", header)
		}
	})
	t.Run("?lang= overrides the header and is remembered", func(t *testing.T) {
		p := get("/?lang=fr", nil, "ko")
		requireLang(p, "fr")
		c := langCookie(p)
		require.NotNil(t, c, "the choice is remembered")
		require.Equal(t, "fr", c.Value)
		require.Equal(t, "/", c.Path)
		require.True(t, c.HttpOnly)
		require.Equal(t, http.SameSiteLaxMode, c.SameSite)
		require.Greater(t, c.MaxAge, 30*24*3600)

		// The cookie then wins over the header, on any page of the site.
		requireLang(get("/", []*http.Cookie{{Name: c.Name, Value: c.Value}}, "ko"), "fr")
		requireLang(get("/rooms/"+f.room, []*http.Cookie{{Name: c.Name, Value: c.Value}}, "de"), "fr")
		// A later ?lang= changes it.
		again := get("/?lang=zh-CN", []*http.Cookie{{Name: c.Name, Value: c.Value}}, "")
		requireLang(again, "zh-Hans")
		require.Equal(t, "zh-Hans", langCookie(again).Value, "remembered as the page's own tag")
	})
	t.Run("unknown ?lang= is passed over", func(t *testing.T) {
		p := get("/?lang=pt", nil, "")
		requireLang(p, "en")
		require.Nil(t, langCookie(p))
		p = get("/?lang=pt", nil, "de")
		requireLang(p, "de", "the next rule decides")
		requireLang(get("/", []*http.Cookie{{Name: "waitroom_lang", Value: "xx"}}, "ja"), "ja", "a cookie naming nothing of ours")
	})
	t.Run("switcher", func(t *testing.T) {
		p := get("/", nil, "ko")
		nav := regexp.MustCompile(`(?s)<nav class="langs" id="langs" aria-label="언어">(.*?)</nav>`).FindStringSubmatch(p.body)
		require.NotNil(t, nav, "the switcher, labelled in Korean")
		links := regexp.MustCompile(`<a href="([^"]*)" hreflang="([^"]*)" lang="([^"]*)"( aria-current="true")?>([^<]*)</a>`).FindAllStringSubmatch(nav[1], -1)
		require.Len(t, links, 7, nav[1])
		names := map[string]string{}
		for _, l := range links {
			require.Equal(t, "/?lang="+url.QueryEscape(l[2]), l[1])
			require.Equal(t, l[2], l[3])
			require.Equal(t, l[2] == "ko", l[4] != "", "only Korean is current")
			names[l[2]] = l[5]
		}
		require.Equal(t, map[string]string{"en": "English", "de": "Deutsch", "es": "Español", "fr": "Français",
			"ja": "日本語", "ko": "한국어", "zh-Hans": "简体中文"}, names)

		// A pass link's switch keeps the pass.
		p = get("/?pass=abc123", nil, "")
		require.Contains(t, p.body, `<a href="/?lang=ko&amp;pass=abc123" hreflang="ko"`)
	})
}

// TestPageLanguageHostile: whatever a client puts in ?lang=, the cookie or
// Accept-Language, the page answers 200 in English (or the language the
// rest of the request names), never echoes it, never a 500, and
// remembers nothing.
func TestPageLanguageHostile(t *testing.T) {
	t.Parallel()
	f := newPageFixture(t, pageOptions{})
	script := `"><script>alert(1)</script>`
	for name, tt := range map[string]struct{ query, cookie, header string }{
		"script ?lang=":      {query: script},
		"script header":      {header: script},
		"script cookie":      {cookie: url.QueryEscape(script)},
		"huge ?lang=":        {query: strings.Repeat("ko", 20_000)},
		"huge header":        {header: strings.Repeat("ko-KR;q=0.9, ", 600)},
		"long valid-ish tag": {query: "ko-" + strings.Repeat("abcdefgh-", 20) + "x"},
		"malformed header":   {header: "ko;q=;;;,,,=,en-;q=2"},
		"NUL and newline":    {query: "ko\x00\n"},
		"private use":        {query: "x-klingon"},
		"extension salad":    {query: "en-u-nu-thai-x-" + strings.Repeat("a", 30)},
		"header list of 1k":  {header: strings.Repeat("a,", 1000) + "ko"},
	} {
		path := "/"
		if tt.query != "" {
			path += "?lang=" + url.QueryEscape(tt.query)
		}
		headers := []string{"Accept", browserAccept}
		if tt.header != "" {
			headers = append(headers, "Accept-Language", tt.header)
		}
		var cookies []*http.Cookie
		if tt.cookie != "" {
			cookies = append(cookies, &http.Cookie{Name: "waitroom_lang", Value: tt.cookie})
		}
		p := f.request("GET", path, cookies, headers...)
		require.Equal(t, http.StatusOK, p.status, name)
		require.Equal(t, "en", langOf(t, p), name)
		require.False(t, strings.Contains(p.body, "alert(1)"), name)
		require.Nil(t, langCookie(p), name)
		require.Equal(t, "Join the line", text(t, p.body, "join-button"), name)
	}
}

// TestJSONIsLanguageNeutral: the API's answers are the same bytes whatever
// language the request asks for, and carry no language of their own.
func TestJSONIsLanguageNeutral(t *testing.T) {
	t.Parallel()
	f := newPageFixture(t, pageOptions{})
	f.enterUsers("alice")
	for _, path := range []string{"/rooms/" + f.room + "/status", "/", "/rooms/" + f.room} {
		for _, user := range []string{"alice", "bob"} { // bob: 404 NOT_IN_QUEUE, an error body
			plain := f.request("GET", path, nil, "Accept", "application/json", "X-User-Id", user)
			for _, lang := range []string{"ko", "de", "zh-CN,zh;q=0.9"} {
				p := f.request("GET", path+"?lang="+url.QueryEscape(lang), []*http.Cookie{{Name: "waitroom_lang", Value: "ja"}},
					"Accept", "application/json", "X-User-Id", user, "Accept-Language", lang)
				require.Equal(t, plain.status, p.status, path)
				require.Equal(t, plain.body, p.body, "%s as %s for %s", path, user, lang)
				require.Empty(t, p.header.Get("Content-Language"), path)
				require.Nil(t, langCookie(p), path)
			}
		}
	}
}

// TestPageInKorean: the no-JavaScript waiting view in Korean: its texts,
// its digits, the ETA as Korean says it, plurals by rule, and only
// Korean messages for the script.
func TestPageInKorean(t *testing.T) {
	t.Parallel()
	f := newPageFixture(t, pageOptions{room: waitroom.RoomConfig{Stock: 2}})
	ahead := make([]string, 2500)
	for i := range ahead {
		ahead[i] = "u" + strconv.Itoa(i)
	}
	f.enterUsers(ahead...)
	join := f.join("/")
	require.Equal(t, http.StatusSeeOther, join.status)
	p := f.request("GET", "/", []*http.Cookie{join.visitorCookie()}, "Accept", browserAccept, "Accept-Language", "ko-KR,ko;q=0.9,en;q=0.5")
	require.Equal(t, http.StatusOK, p.status)
	require.True(t, shown(t, p.body, "waiting"))

	require.Equal(t, "ko", langOf(t, p))
	require.Contains(t, p.body, "<title>대기 중 · 2,501번째</title>")
	require.Contains(t, p.body, "<h1>대기 중입니다</h1>")
	require.Equal(t, "2,501", text(t, p.body, "position"))
	require.Equal(t, "2,500", text(t, p.body, "ahead"))
	require.Equal(t, "약 39–45분", text(t, p.body, "wait"), "the ETA range, as Korean writes it")
	require.Equal(t, "맨 앞까지 0% 왔습니다", text(t, p.body, "progress-text"))
	require.Equal(t, "남은 수량은 2개입니다.", text(t, p.body, "units-left"))
	require.Equal(t, "내 앞에 2,500명이 있습니다.", text(t, p.body, "units-ahead"))
	require.Regexp(t, `<noscript><meta http-equiv="refresh" content="\d+; url=/\?from=2501"></noscript>`, p.body)
	// What a reader sees: the page up to its data and script.
	seen, _, ok := strings.Cut(p.body, `<script type="application/json"`)
	require.True(t, ok)
	for _, english := range []string{"You're in line", "Your place", "Estimated wait", "about", "minutes", "Join the line", "people", "Try again"} {
		require.False(t, strings.Contains(seen, english), "%q left in English on the Korean page", english)
	}
	// The script gets Korean messages only, as JSON data, not code.
	m := regexp.MustCompile(`<script type="application/json" id="messages">([^<]*)</script>`).FindStringSubmatch(p.body)
	require.NotNil(t, m)
	require.Contains(t, m[1], `"wait.range":"약 {{.Low}}–{{.High}}분"`)
	require.NotContains(t, m[1], "Only guests")

	// The same view in English says the plural's other form: "people".
	p = f.request("GET", "/", []*http.Cookie{join.visitorCookie()}, "Accept", browserAccept)
	require.Equal(t, "2,500 people are ahead of you.", text(t, p.body, "units-ahead"))
	require.Equal(t, "about 39–45 minutes", text(t, p.body, "wait"))
}

// TestPageWeight: a waiting view stays light in every language: the whole
// answer, headers and body, with no compression, within 40 KB.
func TestPageWeight(t *testing.T) {
	t.Parallel()
	f := newPageFixture(t, pageOptions{room: waitroom.RoomConfig{Stock: 2}})
	f.enterUsers("u1", "u2", "u3")
	join := f.join("/")
	require.Equal(t, http.StatusSeeOther, join.status)
	for _, l := range i18n.All() {
		lang := l.Code
		p := f.request("GET", "/?lang="+url.QueryEscape(lang), []*http.Cookie{join.visitorCookie()}, "Accept", browserAccept)
		require.True(t, shown(t, p.body, "waiting"), lang)
		require.Equal(t, lang, langOf(t, p))
		var head strings.Builder
		require.NoError(t, p.header.Write(&head))
		size := len("HTTP/1.1 200 OK\r\n") + head.Len() + len("\r\n") + len(p.body)
		t.Logf("%s: %d bytes transferred for a waiting view (%d of headers)", lang, size, head.Len())
		require.LessOrEqual(t, size, 40<<10, lang)
	}
}
