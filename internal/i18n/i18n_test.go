package i18n

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	goi18n "github.com/nicksnyder/go-i18n/v2/i18n"
)

// The page's languages, as the issue lists them: a file lost from
// messages/ fails here, not in production.
var wantLangs = []string{"en", "de", "es", "fr", "ja", "ko", "zh-Hans"}

// placeholder is the only template syntax a message may use: the script
// fills in {{.Name}} and nothing else.
var (
	placeholder = regexp.MustCompile(`\{\{\.([A-Za-z]+)\}\}`)
	anyAction   = regexp.MustCompile(`\{\{.*?\}\}`)
)

func texts(m *goi18n.Message) map[string]string {
	out := map[string]string{}
	for form, s := range map[string]string{"zero": m.Zero, "one": m.One, "two": m.Two, "few": m.Few, "many": m.Many, "other": m.Other} {
		if s != "" {
			out[form] = s
		}
	}
	return out
}

func placeholders(s string) []string {
	var names []string
	for _, m := range placeholder.FindAllStringSubmatch(s, -1) {
		names = append(names, m[1])
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// TestCatalogue: every language has every English key and no other, each
// text uses the placeholders English uses for that key (the "other" form
// exactly; a form like English's "about a minute" may leave the count
// out), and plural messages have every form the language's rules pick.
func TestCatalogue(t *testing.T) {
	var codes []string
	for _, l := range All() {
		codes = append(codes, l.Code)
	}
	if !slices.Equal(codes, wantLangs) {
		t.Fatalf("languages = %q, want %q", codes, wantLangs)
	}
	en := English()
	if len(en.messages) < 50 {
		t.Fatalf("English has %d messages: the file did not load whole", len(en.messages))
	}
	for _, l := range All() {
		for _, id := range slices.Sorted(maps.Keys(l.messages)) {
			if en.messages[id] == nil {
				t.Errorf("%s: %q is not an English key", l.Code, id)
			}
		}
		for _, id := range slices.Sorted(maps.Keys(en.messages)) {
			m, want := l.messages[id], en.messages[id]
			if m == nil {
				t.Errorf("%s: %q is missing", l.Code, id)
				continue
			}
			enAll := placeholders(strings.Join(slices.Collect(maps.Values(texts(want))), " "))
			for form, s := range texts(m) {
				if strings.TrimSpace(s) == "" {
					t.Errorf("%s: %q (%s) is blank", l.Code, id, form)
				}
				for _, a := range anyAction.FindAllString(s, -1) {
					if !placeholder.MatchString(a) {
						t.Errorf("%s: %q (%s) uses %s: only {{.Name}} placeholders", l.Code, id, form, a)
					}
				}
				got := placeholders(s)
				for _, p := range got {
					if !slices.Contains(enAll, p) {
						t.Errorf("%s: %q (%s) has {{.%s}}, which English does not", l.Code, id, form, p)
					}
				}
				if form == "other" && !slices.Equal(got, placeholders(want.Other)) {
					t.Errorf("%s: %q has placeholders %q, English %q", l.Code, id, got, placeholders(want.Other))
				}
			}
			if want.One != "" {
				// A plural message: each count a page can show picks a form
				// the language has (go-i18n says when it had to fall back).
				if !strings.Contains(m.Other, "{{.N}}") {
					t.Errorf("%s: plural %q does not say its count {{.N}}", l.Code, id)
				}
				for _, n := range []int64{0, 1, 2, 3, 5, 11, 21, 101, 1000, 1_000_000} {
					_, err := l.loc.Localize(&goi18n.LocalizeConfig{MessageID: id, PluralCount: n, TemplateData: map[string]any{"N": n}})
					if err != nil {
						t.Errorf("%s: %q for %d: %v", l.Code, id, n, err)
					}
				}
			}
		}
	}
}

func TestLocalize(t *testing.T) {
	ko, de, fr := Find("ko"), Find("de"), Find("fr")
	for _, tt := range []struct{ got, want string }{
		{ko.T("wait.range", "Low", ko.Number(12), "High", ko.Number(15)), "약 12–15분"},
		{English().Plural("waiting.units_ahead", 1), "1 person is ahead of you."},
		{English().Plural("waiting.units_ahead", 2), "2 people are ahead of you."},
		{de.Plural("waiting.units_ahead", 1), "Vor Ihnen steht 1 Person."},
		{de.Plural("waiting.units_ahead", 2501), "Vor Ihnen stehen 2.501 Personen."},
		{fr.Plural("waiting.units_ahead", 0), "Il y a 0 personne devant vous."},
		{fr.Plural("waiting.units_ahead", 1_000_000), "Il y a 1\u00a0000\u00a0000 de personnes devant vous."},
		{ko.Plural("waiting.units_ahead", 1), "내 앞에 1명이 있습니다."},
		{English().T("no_room.text", "Room", "x"), "No waiting room is called “x”. Check the link you followed."},
		{English().Number(1234567), "1,234,567"},
		{English().T("no.such.key"), "no.such.key"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func TestFind(t *testing.T) {
	for in, want := range map[string]string{
		"ko": "ko", "KO": "ko", "ko-KR": "ko", "zh": "zh-Hans", "zh-CN": "zh-Hans", "zh-Hans": "zh-Hans",
		"de-AT": "de", "en-GB": "en", "es-419": "es", "fr-CA": "fr", "ja-JP": "ja",
		"pt": "", "xx": "", "": "", "en_US!": "", "<script>": "", strings.Repeat("a", 10_000): "", "ko-" + strings.Repeat("x", 40): "",
	} {
		if got := code(Find(in)); got != want {
			t.Errorf("Find(%.40q) = %q, want %q", in, got, want)
		}
	}
}

// code is l's tag, "" for none.
func code(l *Lang) string {
	if l == nil {
		return ""
	}
	return l.Code
}

func TestFromAcceptLanguage(t *testing.T) {
	for in, want := range map[string]string{
		"ko-KR,ko;q=0.9,en-US;q=0.8,en;q=0.7": "ko",
		"ja;q=0.2, de;q=0.9":                  "de",
		"pt-BR, fr;q=0.5":                     "fr",
		"en;q=0, ko":                          "ko",
		"*":                                   "",
		"pt-BR":                               "",
		"":                                    "",
		"ko;q=abc":                            "",
		"<script>alert(1)</script>":           "",
		strings.Repeat("ko,", 5000):           "",
	} {
		if got := code(FromAcceptLanguage(in)); got != want {
			t.Errorf("FromAcceptLanguage(%.40q) = %q, want %q", in, got, want)
		}
	}
}

// A file whose name is not its canonical tag, or a missing English, is
// refused when the package loads, not met at the first request.
func TestLoadRefuses(t *testing.T) {
	for name, fsys := range map[string]fstest.MapFS{
		"no English":    {"messages/ko.json": {Data: []byte(`{"lang.name": "한국어"}`)}},
		"not canonical": {"messages/en.json": {Data: []byte(`{"lang.name": "English"}`)}, "messages/zh-hans.json": {Data: []byte(`{"lang.name": "x"}`)}},
		"not JSON":      {"messages/en.json": {Data: []byte(`{"lang.name": `)}},
	} {
		if _, err := load(fsys); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
}

func TestScript(t *testing.T) {
	got := Find("ko").Script("wait.range", "waiting.units_ahead", "no.such.key")
	if got["wait.range"] != "약 {{.Low}}–{{.High}}분" {
		t.Errorf("wait.range = %#v", got["wait.range"])
	}
	if forms, ok := got["waiting.units_ahead"].(map[string]string); !ok || forms["other"] != "내 앞에 {{.N}}명이 있습니다." {
		t.Errorf("waiting.units_ahead = %#v, want its forms", got["waiting.units_ahead"])
	}
	if _, ok := got["no.such.key"]; ok || len(got) != 2 {
		t.Errorf("script messages = %#v", got)
	}
	if forms := English().Script("wait.minutes")["wait.minutes"].(map[string]string); forms["one"] != "about a minute" {
		t.Errorf("English wait.minutes = %#v", forms)
	}
}

// TestOverride: an operator's file changes only its keys, in its
// language, and whatever breaks the catalogue's rules is refused with the
// file and the key.
func TestOverride(t *testing.T) {
	ko, err := Override("brand/messages/ko.json", []byte(`{"page.name": "행사 대기실", "wait.minutes": {"other": "약 {{.N}}분 남음"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := ko.T("page.name"); got != "행사 대기실" {
		t.Errorf("page.name = %q", got)
	}
	if got := ko.Plural("wait.minutes", 3); got != "약 3분 남음" {
		t.Errorf("wait.minutes = %q", got)
	}
	if got, want := ko.T("join.title"), Find("ko").T("join.title"); got != want {
		t.Errorf("an unchanged key: %q, want %q", got, want)
	}
	if got := Find("ko").T("page.name"); got == "행사 대기실" {
		t.Error("the override changed the built-in language")
	}
	if got := ko.Script("page.name")["page.name"]; got != "행사 대기실" {
		t.Errorf("the script gets %q", got)
	}
	for _, c := range []struct{ name, data, want string }{
		{"m/kr.json", `{}`, `m/kr.json: not a language of the page`},
		{"m/en.txt", `{}`, `m/en.txt: not a language of the page`},
		{"m/en.json", `["x"]`, `m/en.json: not a JSON object`},
		{"m/en.json", `{"page.nam": "x"}`, `m/en.json: key "page.nam": English has no such message`},
		{"m/en.json", `{"no_room.text": "No room here"}`, `m/en.json: key "no_room.text": keep the placeholder {{.Room}}`},
		{"m/en.json", `{"page.name": "Hi {{.User}}"}`, `key "page.name": English has no placeholder {{.User}}`},
		{"m/en.json", `{"page.name": "Hi {{printf \"%s\" 1}}"}`, `key "page.name": "{{printf \"%s\" 1}}" is not a placeholder`},
		{"m/en.json", `{"page.name": "Hi {{.Room"}`, `key "page.name": has an unclosed {{`},
		{"m/en.json", `{"page.name": " "}`, `key "page.name": is empty`},
		{"m/en.json", `{"page.name": {"other": "x"}}`, `key "page.name": is one text, not texts by plural form`},
		{"m/en.json", `{"wait.minutes": "about {{.N}} minutes"}`, `key "wait.minutes": is a plural message`},
		{"m/en.json", `{"wait.minutes": {"other": "about {{.N}} minutes"}}`, `key "wait.minutes": give the plural forms en.json gives: one, other`},
		{"m/en.json", `{"page.name": 3}`, `key "page.name": is neither a text nor texts by plural form`},
		{"m/en.json", `{"page.name": "x"` + strings.Repeat(" ", 64<<10) + `}`, `m/en.json: 65554 bytes; at most 65536`},
	} {
		_, err := Override(c.name, []byte(c.data))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %.60s: err = %v, want %q", c.name, c.data, err, c.want)
		}
	}
}
