package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"html/template"
	"image/png"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/waitroom/waitroom/internal/i18n"
)

// The shop's brand on the waiting page (Config.PageDir): a logo, a theme
// stylesheet, message overrides per language and, optionally, a page
// template of its own. Everything is read and checked once, at start, and
// served from memory on the binary's own routes, so the page's policy
// stays as strict as without it and nothing on disk is reached by a URL.

// Bounds on the operator's files: the page itself is about 29 KB, and a
// waiting view stays within 40 KB with a small logo.
const (
	maxLogo     = 64 << 10
	maxTheme    = 64 << 10
	maxTemplate = 256 << 10
)

// The routes the brand is served on: pageFiles + "/theme.css" and
// "/logo" (a room's own page's under roomPagePath).
const (
	pageFiles = "/page"
	themePath = pageFiles + "/theme.css"
	logoPath  = pageFiles + "/logo"
)

// logoPolicy is the logo's own Content-Security-Policy: an SVG is a
// document that may carry script, and opened by itself it runs none.
const logoPolicy = "default-src 'none'; style-src 'unsafe-inline'"

// brand is what the page is rendered with: the built-in page, or the
// operator's pieces over it.
type brand struct {
	template *template.Template
	policy   string // the page's Content-Security-Policy
	theme    []byte // theme.css as written; nil: none
	themeURL string
	logo     []byte // nil: none
	logoType string
	logoURL  string
	langs    map[string]*i18n.Lang     // by code: with the operator's messages
	script   map[string]map[string]any // scriptKeys by language code
}

func defaultBrand() *brand {
	b := &brand{template: pageTemplate, policy: pagePolicy, langs: map[string]*i18n.Lang{}}
	for _, l := range i18n.All() {
		b.langs[l.Code] = l
	}
	b.fillScript()
	return b
}

func (b *brand) fillScript() {
	b.script = map[string]map[string]any{}
	for code, l := range b.langs {
		b.script[code] = l.Script(scriptKeys...)
	}
}

// lang is the language the page is rendered in: l with the operator's
// messages.
func (b *brand) lang(l *i18n.Lang) *i18n.Lang {
	if o := b.langs[l.Code]; o != nil {
		return o
	}
	return l
}

// loadBrand reads a page directory; every problem is an error naming the
// file (and its line or key), so that serve refuses to start rather than
// show a broken page.
func loadBrand(dir string) (*brand, error) {
	if dir == "" {
		return defaultBrand(), nil
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("page directory: %w", err)
	}
	defer root.Close()
	return loadBrandFS(root.FS(), dir, pageFiles)
}

// loadBrandFS reads a page directory from fsys, named dir in errors; its
// theme and logo are served under routes (routes+"/theme.css",
// routes+"/logo").
func loadBrandFS(fsys fs.FS, dir, routes string) (*brand, error) {
	b := defaultBrand()
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("page directory %s: %w", dir, err)
	}
	var logos []string
	for _, e := range entries {
		name := e.Name()
		file := filepath.Join(dir, name)
		switch {
		case strings.HasPrefix(name, ".") || name == "__MACOSX":
			// An editor's, a file manager's or an archiver's; nothing of
			// the page.
		case name == "logo.svg" || name == "logo.png":
			logos = append(logos, file)
			data, err := readCapped(fsys, name, maxLogo)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			if b.logoType, err = checkLogo(name, data); err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			b.logo = data
		case name == "theme.css":
			data, err := readCapped(fsys, name, maxTheme)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			if !utf8.Valid(data) {
				return nil, fmt.Errorf("%s: not UTF-8 text", file)
			}
			b.theme = data
		case name == "page.html":
			data, err := readCapped(fsys, name, maxTemplate)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			t, err := template.New("page.html").Parse(string(data))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			b.template = t
		case name == "messages" && e.IsDir():
			if err := b.loadMessages(fsys, filepath.Join(dir, name)); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("%s: not a file of the page: a page directory holds logo.svg or logo.png, theme.css, page.html and messages/LANG.json", file)
		}
	}
	if len(logos) > 1 {
		return nil, fmt.Errorf("%s: give one logo, logo.svg or logo.png", strings.Join(logos, " and "))
	}
	if b.theme != nil {
		b.themeURL = routes + "/theme.css?v=" + shortHash(b.theme)
		// The operator's stylesheet, from this origin; scripts stay the
		// page's own by hash.
		b.policy = strings.Replace(pagePolicy, "style-src ", "style-src 'self' ", 1)
	}
	if b.logo != nil {
		b.logoURL = routes + "/logo?v=" + shortHash(b.logo)
	}
	b.fillScript()
	if b.template != pageTemplate {
		if err := b.checkTemplate(); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "page.html"), err)
		}
	}
	return b, nil
}

func (b *brand) loadMessages(fsys fs.FS, dir string) error {
	entries, err := fs.ReadDir(fsys, "messages")
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		file := filepath.Join(dir, e.Name())
		data, err := readCapped(fsys, "messages/"+e.Name(), 1<<20)
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		l, err := i18n.Override(file, data)
		if err != nil {
			return err
		}
		b.langs[l.Code] = l
	}
	return nil
}

// readCapped reads a regular file of at most max bytes.
func readCapped(fsys fs.FS, name string, max int64) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("larger than %d KB", max>>10)
	}
	return data, nil
}

// shortHash names a file's content, for its URL and its ETag.
func shortHash(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:6])
}

// checkLogo makes sure a logo is what its name says, and gives its type.
func checkLogo(name string, data []byte) (string, error) {
	if name == "logo.png" {
		if _, err := png.DecodeConfig(bytes.NewReader(data)); err != nil {
			return "", fmt.Errorf("not a PNG image: %w", err)
		}
		return "image/png", nil
	}
	if !utf8.Valid(data) {
		return "", errors.New("not an SVG image: not UTF-8 text")
	}
	d := xml.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := d.Token()
		if err != nil {
			return "", fmt.Errorf("not an SVG image: %w", err)
		}
		if el, ok := tok.(xml.StartElement); ok {
			if el.Name.Local != "svg" {
				return "", fmt.Errorf("not an SVG image: the root element is <%s>, not <svg>", el.Name.Local)
			}
			return "image/svg+xml", nil
		}
	}
}

// checkTemplate renders the operator's template in every state the page
// has, in every language, with sample data: one that fails on any of
// them is refused at start, not shown to the first visitor in that state.
func (b *brand) checkTemplate() error {
	for _, l := range i18n.All() {
		for _, v := range sampleViews(b.lang(l)) {
			v.ThemeURL, v.LogoURL = b.themeURL, b.logoURL
			v.Messages = b.script[l.Code]
			if err := b.template.Execute(io.Discard, v); err != nil {
				return fmt.Errorf("rendering the %s state (%s): %w", v.State, l.Code, err)
			}
		}
	}
	return nil
}

// sampleViews is a view of every state with every field set, as the page
// renders them.
func sampleViews(l *i18n.Lang) []pageView {
	base := func(state string) pageView {
		v := pageView{
			L: l, Room: "sale", PageURL: "/rooms/sale", State: state, ShowRoom: true, CanOrder: true,
			ShopURL: "https://shop.example/sale", ShopName: "Sample Shop", ProductName: "Sample Sneaker",
			Boot: pageBoot{Room: "sale", State: state, PageURL: "/rooms/sale", StatusURL: "/rooms/sale/status"},
			CSS:  pageCSS, JS: pageJS,
		}
		for _, o := range i18n.All() {
			v.Langs = append(v.Langs, langLink{Code: o.Code, Name: o.Name, Href: "/rooms/sale?lang=" + o.Code, Current: o.Code == l.Code})
		}
		return v
	}
	var out []pageView
	for _, state := range []string{pageJoin, pageWaiting, pageAdmitted, pageSoldOut, pageScheduled, pageOrdered,
		pageQueueFull, pageClosed, pageInvitation, pageNoRoom, pageUnavailable, pageError} {
		v := base(state)
		switch state {
		case pageJoin:
			v.Pass, v.Challenge, v.Message = "VIP-2026", "c.sample", l.T("join.challenge")
		case pageWaiting:
			v.Position, v.Ahead, v.Wait = l.Number(2501), l.Number(2500), waitText(l, 2520, 2340, 2700)
			v.UnitsLeft, v.UnitsAhead = l.Plural("waiting.units_left", 12), l.Plural("waiting.units_ahead", 2500)
			v.Progress, v.ProgressText = 20, l.T("waiting.progress", "Percent", l.Number(20))
			v.Refresh, v.Paused = "5; url=/rooms/sale?from=3000", true
		case pageAdmitted:
			v.TimeLeft = "5:00"
		case pageScheduled:
			v.OpensIn, v.Position = "1:00:00", l.Number(12)
			v.ByArrival, v.Refresh = l.T("scheduled.by_arrival", "Position", v.Position), "30; url=/rooms/sale"
		case pageQueueFull:
			v.RetryAfter, v.RetryText = 30, l.Plural("queue_full.retry", 30)
		case pageInvitation:
			v.Message = l.T("invitation.invite_only")
		case pageError:
			v.Message = l.T("error.refused")
		}
		v.Title = l.T("page.name")
		out = append(out, v)
	}
	// The other turn of each branch: no order button, drawn places, not
	// paused.
	v := base(pageAdmitted)
	v.CanOrder, v.TimeLeft = false, "0:59"
	out = append(out, v)
	v = base(pageAdmitted)
	v.CanOrder, v.ShopURL, v.ShopName, v.ProductName = false, "", "", ""
	out = append(out, v)
	v = base(pageScheduled)
	v.Drawn, v.OpensIn = true, "0:00:05"
	out = append(out, v)
	return out
}

// theme and logo: GET /page/theme.css and GET /page/logo, the operator's
// files as written, or 404 without them.
func (s *Server) theme(w http.ResponseWriter, r *http.Request) {
	serveBrandFile(w, r, s.brand.theme, "text/css; charset=utf-8", "")
}

func (s *Server) logo(w http.ResponseWriter, r *http.Request) {
	serveBrandFile(w, r, s.brand.logo, s.brand.logoType, logoPolicy)
}

func serveBrandFile(w http.ResponseWriter, r *http.Request, data []byte, contentType, policy string) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	if data == nil {
		http.NotFound(w, r)
		return
	}
	h.Set("Content-Type", contentType)
	if policy != "" {
		h.Set("Content-Security-Policy", policy)
	}
	// The page links each file with its hash (?v=), and a change needs a
	// restart: a day in caches is safe.
	h.Set("Cache-Control", "public, max-age=86400")
	h.Set("ETag", `"`+shortHash(data)+`"`)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
}
