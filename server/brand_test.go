package server_test

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/servertest"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/server"
)

// testLogo is a small SVG logo, as a shop would give it.
const testLogo = `<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="120" height="32" viewBox="0 0 120 32"><rect width="120" height="32" rx="6" fill="#7a1f4f"/><text x="60" y="22" font-family="sans-serif" font-size="16" fill="#fff" text-anchor="middle">ACME</text></svg>
`

// testTheme is an operator's theme: the documented custom properties.
const testTheme = `:root { --accent: #7a1f4f; --accent-text: #ffffff; --radius: .25rem; --font: Georgia, serif; }
@media (prefers-color-scheme: dark) { :root { --accent: #e8a3c4; --accent-text: #2a0a1a; } }
`

// pageDir writes files (name → content) into a fresh page directory.
func pageDir(t *testing.T, files map[string]string) string { return testenv.Dir(t, files) }

func pngLogo(t *testing.T) string {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	img.Set(1, 1, color.RGBA{R: 200, A: 255})
	var buf bytes.Buffer
	require.NoError(t, png.Encode(&buf, img))
	return buf.String()
}

func brandedFixture(t *testing.T, dir string) *pageFixture {
	t.Helper()
	return newPageFixture(t, pageOptions{server: func(c *server.Config) { c.PageDir = dir }})
}

// TestBrandRoutes: the logo and the theme come from the binary's own
// routes with safe types and policies; what is not there is 404, and no
// URL reaches a file on disk.
func TestBrandRoutes(t *testing.T) {
	t.Parallel()
	dir := pageDir(t, map[string]string{"logo.svg": testLogo, "theme.css": testTheme, "messages/en.json": `{"page.logo": "ACME"}`})
	f := brandedFixture(t, dir)

	p := f.get("/page/logo")
	require.Equal(t, http.StatusOK, p.status)
	require.Equal(t, "image/svg+xml", p.header.Get("Content-Type"))
	require.Equal(t, "default-src 'none'; style-src 'unsafe-inline'", p.header.Get("Content-Security-Policy"),
		"an SVG may carry script: opened by itself it runs none")
	require.Equal(t, "nosniff", p.header.Get("X-Content-Type-Options"))
	require.Equal(t, testLogo, p.body)

	p = f.get("/page/theme.css?v=anything")
	require.Equal(t, http.StatusOK, p.status)
	require.Equal(t, "text/css; charset=utf-8", p.header.Get("Content-Type"))
	require.Equal(t, "nosniff", p.header.Get("X-Content-Type-Options"))
	require.Equal(t, testTheme, p.body, "served as the operator wrote it")

	page := f.get("/")
	require.Equal(t, http.StatusOK, page.status)
	require.Regexp(t, `^<link rel="stylesheet" href="/page/theme\.css\?v=[0-9a-f]{12}">$`, regexp.MustCompile(`<link [^>]*>`).FindString(page.body))
	require.Regexp(t, `^<img class="logo" src="/page/logo\?v=[0-9a-f]{12}" alt="ACME">$`, regexp.MustCompile(`<img [^>]*>`).FindString(page.body))
	csp := page.header.Get("Content-Security-Policy")
	require.Contains(t, csp, "style-src 'self' 'sha256-")
	require.Contains(t, csp, "script-src 'sha256-", "scripts stay the page's own")
	require.NotContains(t, csp, "unsafe")

	// Nothing else of the directory, and nothing beyond it, by any path.
	for _, path := range []string{"/page/messages/en.json", "/page/logo.svg", "/page/theme.css/../logo.svg",
		"/page/%2e%2e/%2e%2e/etc/passwd", "/page/..%2f..%2fetc%2fpasswd", "/page/logo/..%2f..%2f..%2fetc%2fpasswd", "/page/"} {
		p := f.get(path)
		require.Contains(t, []int{http.StatusNotFound, http.StatusMovedPermanently, http.StatusMethodNotAllowed}, p.status, path)
		require.NotContains(t, p.body, "page.logo", path)
		require.NotContains(t, p.body, "root:", path)
	}
	require.Equal(t, http.StatusMethodNotAllowed, f.request("POST", "/page/logo", nil).status)

	// A PNG logo is served as one.
	png := pngLogo(t)
	f = brandedFixture(t, pageDir(t, map[string]string{"logo.png": png}))
	p = f.get("/page/logo")
	require.Equal(t, http.StatusOK, p.status)
	require.Equal(t, "image/png", p.header.Get("Content-Type"))
	require.Equal(t, png, p.body)
	require.Equal(t, http.StatusNotFound, f.get("/page/theme.css").status, "no theme given: 404, not 500")
	require.NotContains(t, f.get("/").header.Get("Content-Security-Policy"), "'self' 'sha256-", "no theme: the page's policy is unchanged")

	// Without a page directory: both 404, the page as before.
	f = newPageFixture(t, pageOptions{})
	require.Equal(t, http.StatusNotFound, f.get("/page/logo").status)
	require.Equal(t, http.StatusNotFound, f.get("/page/theme.css").status)
	body := f.get("/").body
	require.NotContains(t, body, "/page/logo")
	require.NotContains(t, body, "/page/theme.css")
}

// TestBrandMessages: an operator's messages show on the page and in what
// the script writes, in their language only.
func TestBrandMessages(t *testing.T) {
	t.Parallel()
	f := brandedFixture(t, pageDir(t, map[string]string{
		"messages/en.json": `{"page.name": "ACME drop", "waiting.announce": "You are number {{.Position}}, about {{.Wait}}."}`,
		"messages/ko.json": `{"page.name": "ACME 드롭"}`,
	}))
	p := f.visit("/")
	require.Contains(t, p.body, `<p class="eyebrow">ACME drop</p>`)
	require.Contains(t, p.body, `"waiting.announce":"You are number {{.Position}}, about {{.Wait}}."`)
	cookie := p.visitorCookie()
	p = f.get("/?lang=ko", cookie)
	require.Contains(t, p.body, `<p class="eyebrow">ACME 드롭</p>`)
	p = f.get("/?lang=de", cookie)
	require.Contains(t, p.body, `<p class="eyebrow">Warteraum</p>`, "a language without overrides is as built in")
}

// TestBrandTemplate: the operator's own page template is rendered with
// the page's data; one that does not parse, or fails in any state,
// refuses the start with the file and the line.
func TestBrandTemplate(t *testing.T) {
	t.Parallel()
	tmpl := `<!doctype html><html lang="{{.L.Code}}"><title>{{.Title}}</title><style>{{.CSS}}</style>
<body data-state="{{.State}}"><h1>ACME · {{.L.T "page.name"}}</h1>{{if eq .State "waiting"}}<p id="position">{{.Position}}</p>{{end}}
<script type="application/json" id="boot">{{.Boot}}</script></body></html>`
	f := brandedFixture(t, pageDir(t, map[string]string{"page.html": tmpl}))
	p := f.visit("/")
	require.Equal(t, http.StatusOK, p.status)
	require.Contains(t, p.body, "<h1>ACME · Waiting room</h1>")
	require.Equal(t, "1", text(t, p.body, "position"))
	require.Contains(t, p.header.Get("Content-Security-Policy"), "script-src 'sha256-", "the page's own policy")

	for _, c := range []struct {
		name, tmpl, want string
	}{
		{"does not parse", "<p>\n{{.Title}</p>", "page.html: template: page.html:2: bad character U+007D '}'"},
		{"unknown field", "<p>\n\n{{.Shop}}</p>", `page.html: rendering the join state (en): template: page.html:3:2: executing "page.html" at <.Shop>: can't evaluate field Shop`},
		{"fails in one state", "<p>\n{{if eq .State \"sold_out\"}}{{index .Langs 99}}{{end}}</p>",
			`page.html: rendering the sold_out state (en): template: page.html:2:29: executing "page.html" at <index .Langs 99>: error calling index`},
		{"fails in one language", "<p>\n{{if eq .L.Code \"ko\"}}{{.L.Nope}}{{end}}</p>", `page.html: rendering the join state (ko): template: page.html:2:26: executing "page.html" at <.L.Nope>`},
	} {
		dir := pageDir(t, map[string]string{"page.html": c.tmpl})
		_, err := server.New(server.Config{Store: servertest.MemRoom(t, "default", waitroom.RoomConfig{}), PageDir: dir})
		require.ErrorContains(t, err, filepath.Join(dir, c.want), c.name)
	}
}

// TestBrandRefusals: a page directory that would show a broken page
// refuses the start, naming the file (and the key).
func TestBrandRefusals(t *testing.T) {
	t.Parallel()
	big := `<svg xmlns="http://www.w3.org/2000/svg">` + strings.Repeat(" ", 64<<10) + `</svg>`
	for _, c := range []struct {
		name  string
		files map[string]string
		want  string // after the directory
	}{
		{"logo too large", map[string]string{"logo.svg": big}, "logo.svg: larger than 64 KB"},
		{"not an SVG", map[string]string{"logo.svg": `<html><script>alert(1)</script></html>`}, "logo.svg: not an SVG image: the root element is <html>, not <svg>"},
		{"not XML", map[string]string{"logo.svg": "GIF89a"}, "logo.svg: not an SVG image"},
		{"not a PNG", map[string]string{"logo.png": testLogo}, "logo.png: not a PNG image"},
		{"two logos", map[string]string{"logo.png": pngLogo(t), "logo.svg": testLogo}, "logo.png and "},
		{"theme too large", map[string]string{"theme.css": strings.Repeat("a", 64<<10+1)}, "theme.css: larger than 64 KB"},
		{"theme not text", map[string]string{"theme.css": "\xff\xfe"}, "theme.css: not UTF-8 text"},
		{"an unknown file", map[string]string{"logo.jpg": "x"}, "logo.jpg: not a file of the page"},
		{"an unknown key", map[string]string{"messages/en.json": `{"page.title": "x"}`}, `messages/en.json: key "page.title": English has no such message`},
		{"a lost placeholder", map[string]string{"messages/fr.json": `{"page.title_waiting": "En file"}`}, `messages/fr.json: key "page.title_waiting": keep the placeholder {{.Position}}`},
		{"not a language", map[string]string{"messages/kr.json": `{}`}, "messages/kr.json: not a language of the page"},
		{"not JSON", map[string]string{"messages/en.json": `{"page.name": }`}, "messages/en.json: not a JSON object of messages"},
	} {
		dir := pageDir(t, c.files)
		_, err := server.New(server.Config{Store: servertest.MemRoom(t, "default", waitroom.RoomConfig{}), PageDir: dir})
		require.ErrorContains(t, err, filepath.Join(dir, c.want), c.name)
	}
	_, err := server.New(server.Config{Store: servertest.MemRoom(t, "default", waitroom.RoomConfig{}), PageDir: filepath.Join(t.TempDir(), "nosuch")})
	require.ErrorContains(t, err, "server: Config.PageDir: page directory: ")
}
