// Package i18n holds the waiting page's languages: one message file per
// language in messages/ (go-i18n's JSON, embedded), the choice of a
// language from a request, and numbers and plurals written as each
// language writes them. Adding a language is adding its file.
//
// A message is plain text with {{.Name}} placeholders and nothing else of
// Go's templates, so that the page's script fills in the same message the
// same way (see Script); a plural message has one text per CLDR plural
// form its language uses ("one", "few", "other", …) and its count as {{.N}}.
package i18n

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	goi18n "github.com/nicksnyder/go-i18n/v2/i18n"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"golang.org/x/text/number"
)

//go:embed messages/*.json
var files embed.FS

// Cookie is the cookie that remembers a visitor's choice of language.
const Cookie = "waitroom_lang"

// Bounds on what a request may name: a language tag is short (BCP 47's
// longest real ones are well under 35 bytes), and an Accept-Language
// header longer than a few kilobytes is not a browser's.
const (
	maxTag            = 35
	maxAcceptLanguage = 4 << 10
)

// Lang is one language of the page.
type Lang struct {
	Code string // its tag, as <html lang>, ?lang= and the cookie write it
	Name string // its own name for itself ("한국어"), for the switcher

	tag      language.Tag
	loc      *goi18n.Localizer
	printer  *message.Printer
	messages map[string]*goi18n.Message
}

var (
	langs   []*Lang // English first, then by code
	matcher language.Matcher
)

func init() {
	var err error
	if langs, err = load(files); err != nil {
		panic(err)
	}
	tags := make([]language.Tag, len(langs))
	for i, l := range langs {
		tags[i] = l.tag
	}
	matcher = language.NewMatcher(tags)
}

// load reads every messages/*.json into the bundle; en.json must be there
// and comes first, being the default.
func load(fsys fs.FS) ([]*Lang, error) {
	names, err := fs.Glob(fsys, "messages/*.json")
	if err != nil {
		return nil, err
	}
	bundle := goi18n.NewBundle(language.English)
	bundle.RegisterUnmarshalFunc("json", json.Unmarshal)
	var out []*Lang
	for _, name := range names {
		f, err := bundle.LoadMessageFileFS(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("i18n: %s: %w", name, err)
		}
		code := strings.TrimSuffix(path.Base(name), ".json")
		if f.Tag.String() != code {
			return nil, fmt.Errorf("i18n: %s: the file name is not a canonical language tag (%s)", name, f.Tag)
		}
		l := &Lang{
			Code:     code,
			tag:      f.Tag,
			loc:      goi18n.NewLocalizer(bundle, code),
			printer:  message.NewPrinter(f.Tag),
			messages: make(map[string]*goi18n.Message, len(f.Messages)),
		}
		for _, m := range f.Messages {
			l.messages[m.ID] = m
		}
		l.Name = l.T("lang.name")
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b *Lang) int {
		switch {
		case a.Code == b.Code:
			return 0
		case a.Code == "en":
			return -1
		case b.Code == "en":
			return 1
		}
		return strings.Compare(a.Code, b.Code)
	})
	if len(out) == 0 || out[0].Code != "en" {
		return nil, fmt.Errorf("i18n: messages/en.json is missing")
	}
	return out, nil
}

// All returns the page's languages, English first.
func All() []*Lang { return langs }

// English is the default language: the one a request that names none we
// have is answered in.
func English() *Lang { return langs[0] }

// Find returns the language a ?lang= value or the cookie names ("ko",
// "zh-CN", "de-AT"), or nil when it names none of ours or is not a
// language tag at all.
func Find(s string) *Lang {
	if s == "" || len(s) > maxTag {
		return nil
	}
	tag, err := language.Parse(s)
	if err != nil {
		return nil
	}
	return match(tag)
}

// FromAcceptLanguage returns the language an Accept-Language header
// prefers (quality values in order), or nil when it prefers none of ours
// or is malformed.
func FromAcceptLanguage(header string) *Lang {
	if header == "" || len(header) > maxAcceptLanguage {
		return nil
	}
	tags, _, err := language.ParseAcceptLanguage(header)
	if err != nil || len(tags) == 0 {
		return nil
	}
	return match(tags...)
}

func match(tags ...language.Tag) *Lang {
	// The index, not the tag: a matched tag carries the request's region
	// as an extension ("en-u-rg-gbzzzz").
	_, i, conf := matcher.Match(tags...)
	if conf == language.No {
		return nil
	}
	return langs[i]
}

// T returns the message id with its placeholders filled in from name,
// value pairs: T("no_room.text", "Room", room).
func (l *Lang) T(id string, pairs ...any) string {
	return l.localize(id, nil, pairs)
}

// Plural returns the plural message id for the count n, written in the
// language's digits as {{.N}}, with the other placeholders as in T.
func (l *Lang) Plural(id string, n int64, pairs ...any) string {
	return l.localize(id, n, append(pairs, "N", l.Number(n)))
}

func (l *Lang) localize(id string, count any, pairs []any) string {
	data := make(map[string]any, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		if name, ok := pairs[i].(string); ok {
			data[name] = pairs[i+1]
		}
	}
	s, err := l.loc.Localize(&goi18n.LocalizeConfig{MessageID: id, TemplateData: data, PluralCount: count})
	if err != nil && s == "" {
		// Never blank: TestCatalogue keeps every language whole, so this is
		// a programming error (an unknown id), shown as the id.
		return id
	}
	return s
}

// Number writes n as the language does: "2,501", "2.501", "2 501".
func (l *Lang) Number(n int64) string {
	return l.printer.Sprint(number.Decimal(n))
}

// Script returns the messages ids as the page's script takes them: a
// message's text, or a plural message's texts by form, placeholders
// unfilled. Only the chosen language's, and only these, go to the browser.
func (l *Lang) Script(ids ...string) map[string]any {
	out := make(map[string]any, len(ids))
	for _, id := range ids {
		m := l.messages[id]
		if m == nil {
			m = English().messages[id]
		}
		if m == nil {
			continue
		}
		if forms := pluralForms(m); forms != nil {
			out[id] = forms
		} else {
			out[id] = m.Other
		}
	}
	return out
}

// pluralForms returns a plural message's texts by form, or nil for a
// message of one text. A message is plural when any form but "other" is
// given, or, for languages with no other form (Korean, Japanese,
// Chinese), when English gives one.
func pluralForms(m *goi18n.Message) map[string]string {
	forms := map[string]string{}
	for form, text := range map[string]string{"zero": m.Zero, "one": m.One, "two": m.Two, "few": m.Few, "many": m.Many} {
		if text != "" {
			forms[form] = text
		}
	}
	if len(forms) == 0 {
		if en := English().messages[m.ID]; en == nil || en == m || en.One == "" {
			return nil
		}
	}
	forms["other"] = m.Other
	return forms
}
