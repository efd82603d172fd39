package server

import (
	"encoding/xml"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/waitroom/waitroom/internal/i18n"
)

func TestWantsJSON(t *testing.T) {
	t.Parallel()
	for accept, want := range map[string]bool{
		"": false,
		"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8": false,
		"*/*":                               false,
		"application/json":                  true,
		"Application/JSON":                  true,
		"application/json, text/plain, */*": true,
		"text/html, application/json":       false,
		"application/json, text/html":       true,
		"text/html;q=0.5, application/json": true,
		"application/json;q=0.1, text/html": false,
		"application/json;q=0":              false,
		"application/json;q=oops":           true,
		"garbage;;;, application/json":      true,
	} {
		if got := wantsJSON(accept); got != want {
			t.Errorf("wantsJSON(%q) = %v, want %v", accept, got, want)
		}
	}
}

func TestPageText(t *testing.T) {
	t.Parallel()
	for est, want := range map[[3]int64]string{ // eta, low, high
		{0, 0, 2}: "less than a minute", {40, 20, 59}: "less than a minute",
		{70, 50, 80}: "about a minute", {600, 590, 610}: "about 10 minutes",
		{750, 720, 900}: "about 12–15 minutes", {100, 50, 150}: "about 1–3 minutes",
		{3000, 2700, 3700}: "about 45–62 minutes", {3600, 3300, 3900}: "about 1 h",
		{3900, 3600, 4200}: "about 1 h 5 min", {7200, 6000, 8000}: "about 2 h",
	} {
		if got := waitText(i18n.English(), est[0], est[1], est[2]); got != want {
			t.Errorf("waitText(%v) = %q, want %q", est, got, want)
		}
	}
	// The same waits as each language says them.
	for _, tt := range []struct {
		lang string
		est  [3]int64
		want string
	}{
		{"ko", [3]int64{750, 720, 900}, "약 12–15분"}, {"ko", [3]int64{40, 20, 59}, "1분 미만"},
		{"ko", [3]int64{3900, 3600, 4200}, "약 1시간 5분"}, {"ja", [3]int64{750, 720, 900}, "約12～15分"},
		{"zh-Hans", [3]int64{600, 590, 610}, "约 10 分钟"}, {"es", [3]int64{70, 50, 80}, "alrededor de un minuto"},
		{"fr", [3]int64{750, 720, 900}, "environ 12 à 15 minutes"}, {"de", [3]int64{7200, 6000, 8000}, "etwa 2 Std."},
		{"de", [3]int64{600, 590, 610}, "etwa 10 Minuten"},
	} {
		if got := waitText(i18n.Find(tt.lang), tt.est[0], tt.est[1], tt.est[2]); got != tt.want {
			t.Errorf("%s: waitText(%v) = %q, want %q", tt.lang, tt.est, got, tt.want)
		}
	}
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 12345: "12,345", 100000: "100,000", 1234567: "1,234,567"} {
		if got := i18n.English().Number(n); got != want {
			t.Errorf("Number(%d) = %q, want %q", n, got, want)
		}
	}
	for ms, want := range map[int64]string{-5: "0:00", 999: "0:00", 1000: "0:01", 299_999: "4:59", 300_000: "5:00"} {
		if got := clockText(ms); got != want {
			t.Errorf("clockText(%d) = %q, want %q", ms, got, want)
		}
	}
	for _, tt := range []struct {
		from, position int64
		want           int
	}{{1, 1, 100}, {5, 5, 0}, {5, 3, 50}, {5, 1, 100}, {3, 7, 0}, {101, 2, 99}} {
		if got := progress(tt.from, tt.position); got != tt.want {
			t.Errorf("progress(%d, %d) = %d, want %d", tt.from, tt.position, got, tt.want)
		}
	}
}

func TestOrderPathOf(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		gated []string
		want  string
	}{
		{[]string{"POST /orders"}, "/orders"},
		{[]string{"GET /orders/{id}", "POST /api/orders"}, "/api/orders"},
		{[]string{"POST /orders/{sku}"}, ""},
		{[]string{"/orders"}, ""},
		{[]string{"POST shop.example/orders"}, ""},
	} {
		if got := orderPathOf(tt.gated); got != tt.want {
			t.Errorf("orderPathOf(%q) = %q, want %q", tt.gated, got, tt.want)
		}
	}
}

// TestPageMessageKeys: every message the page's template, its Go code and
// its script name is in the catalogue, and the script gets exactly the
// messages it uses (scriptKeys), no fewer and no more.
func TestPageMessageKeys(t *testing.T) {
	t.Parallel()
	en := i18n.English()
	known := func(where, key string) {
		t.Helper()
		if en.T(key) == key {
			t.Errorf("%s names %q, which messages/en.json lacks", where, key)
		}
	}
	html := mustRead("web/page.html")
	keys := regexp.MustCompile(`\.L\.T "([a-z_.]+)"`).FindAllStringSubmatch(html, -1)
	if len(keys) < 50 {
		t.Fatalf("found %d keys in page.html: the pattern no longer matches", len(keys))
	}
	for _, m := range keys {
		known("page.html", m[1])
	}
	src, err := os.ReadFile("page.go")
	if err != nil {
		t.Fatal(err)
	}
	goKeys := regexp.MustCompile(`(?:\.T|\.Plural)\("([a-z_.]+)"|return "([a-z_]+\.[a-z_]+)"`).FindAllStringSubmatch(string(src), -1)
	if len(goKeys) < 15 {
		t.Fatalf("found %d keys in page.go: the pattern no longer matches", len(goKeys))
	}
	for _, m := range goKeys {
		known("page.go", m[1]+m[2])
	}
	var used []string
	for _, m := range regexp.MustCompile(`"([a-z_]+\.[a-z_]+)"`).FindAllStringSubmatch(string(pageJS), -1) {
		used = append(used, m[1])
	}
	slices.Sort(used)
	used = slices.Compact(used)
	shipped := slices.Sorted(slices.Values(scriptKeys))
	if !slices.Equal(used, shipped) {
		t.Errorf("page.js uses %q,\nscriptKeys ships %q", used, shipped)
	}
	for _, k := range shipped {
		known("scriptKeys", k)
	}
}

// TestLiveRegionsHaveNoClock: no clock that ticks every second is inside
// a live region, which a screen reader would read out at each tick.
func TestLiveRegionsHaveNoClock(t *testing.T) {
	t.Parallel()
	var buf strings.Builder
	v := pageView{L: i18n.English(), State: pageAdmitted, PageURL: "/", CanOrder: true, TimeLeft: "5:00", OpensIn: "1:00:00", CSS: pageCSS} // no script: its "<" is not markup
	if err := pageTemplate.Execute(&buf, v); err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(strings.NewReader(buf.String()))
	d.Strict, d.AutoClose, d.Entity = false, xml.HTMLAutoClose, xml.HTMLEntity
	var live []bool // per open element: is it, or is it inside, a live region
	clocks := map[string]bool{"time-left": false, "opens-in": false, "retry-after": false}
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			inLive := len(live) > 0 && live[len(live)-1]
			id := ""
			for _, a := range el.Attr {
				switch {
				case a.Name.Local == "aria-live" && a.Value != "off", a.Name.Local == "role" && (a.Value == "status" || a.Value == "alert" || a.Value == "log"):
					inLive = true
				case a.Name.Local == "id":
					id = a.Value
				}
			}
			if _, ok := clocks[id]; ok {
				clocks[id] = true
				if inLive {
					t.Errorf("#%s ticks every second inside a live region", id)
				}
			}
			live = append(live, inLive)
		case xml.EndElement:
			live = live[:len(live)-1]
		}
	}
	for id, seen := range clocks {
		if !seen {
			t.Errorf("no #%s in the page", id)
		}
	}
}
