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
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"regexp"
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

// maxOverrideFile bounds an operator's message file: the page's whole
// English catalogue is under 8 KB.
const maxOverrideFile = 64 << 10

var (
	placeholderRE = regexp.MustCompile(`\{\{\.([A-Za-z]+)\}\}`)
	actionRE      = regexp.MustCompile(`\{\{.*?\}\}`)
)

// Override returns the language the file name (LANG.json) names with the
// operator's messages in data put over its own: a JSON object of
// "key": "text", or for a plural message "key": {"one": "…", "other":
// "…"} with the forms the page's own file gives. A key English does not
// have, a text that drops or adds a placeholder, any other template
// syntax, a plural message given as one text or the reverse, or an empty
// text is refused with the file and the key.
func Override(name string, data []byte) (*Lang, error) {
	if len(data) > maxOverrideFile {
		return nil, fmt.Errorf("%s: %d bytes; at most %d", name, len(data), maxOverrideFile)
	}
	code, _ := strings.CutSuffix(path.Base(name), ".json")
	var base *Lang
	codes := make([]string, len(langs))
	for i, l := range langs {
		codes[i] = l.Code
		if l.Code == code && strings.HasSuffix(name, ".json") {
			base = l
		}
	}
	if base == nil {
		return nil, fmt.Errorf("%s: not a language of the page: name the file one of %s, with .json", name, strings.Join(codes, ", "))
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%s: not a JSON object of messages: %w", name, err)
	}
	merged := maps.Clone(base.messages)
	for _, id := range slices.Sorted(maps.Keys(raw)) {
		m, err := overrideMessage(base, id, raw[id])
		if err != nil {
			return nil, fmt.Errorf("%s: key %q: %w", name, id, err)
		}
		merged[id] = m
	}
	bundle := goi18n.NewBundle(base.tag)
	if err := bundle.AddMessages(base.tag, slices.Collect(maps.Values(merged))...); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &Lang{
		Code:     base.Code,
		Name:     base.Name,
		tag:      base.tag,
		loc:      goi18n.NewLocalizer(bundle, base.Code),
		printer:  base.printer,
		messages: merged,
	}, nil
}

// overrideMessage reads one of an operator's messages, held to the rules
// the page's own catalogue keeps (TestCatalogue).
func overrideMessage(base *Lang, id string, raw json.RawMessage) (*goi18n.Message, error) {
	en, own := English().messages[id], base.messages[id]
	if en == nil || own == nil {
		return nil, errors.New("English has no such message")
	}
	m := &goi18n.Message{ID: id}
	var text string
	var forms map[string]string
	switch {
	case json.Unmarshal(raw, &text) == nil:
		if pluralForms(own) != nil {
			return nil, errors.New(`is a plural message: give its texts by form, as {"other": "…"} and the forms ` + base.Code + `.json gives`)
		}
		m.Other = text
	case json.Unmarshal(raw, &forms) == nil:
		want := pluralForms(own)
		if want == nil {
			return nil, errors.New("is one text, not texts by plural form")
		}
		if !slices.Equal(slices.Sorted(maps.Keys(forms)), slices.Sorted(maps.Keys(want))) {
			return nil, fmt.Errorf("give the plural forms %s.json gives: %s", base.Code, strings.Join(slices.Sorted(maps.Keys(want)), ", "))
		}
		m.Zero, m.One, m.Two, m.Few, m.Many, m.Other = forms["zero"], forms["one"], forms["two"], forms["few"], forms["many"], forms["other"]
	default:
		return nil, errors.New(`is neither a text nor texts by plural form`)
	}
	allowed := map[string]bool{}
	for _, s := range []string{en.Zero, en.One, en.Two, en.Few, en.Many, en.Other} {
		for _, p := range placeholderRE.FindAllStringSubmatch(s, -1) {
			allowed[p[1]] = true
		}
	}
	for form, s := range map[string]string{"zero": m.Zero, "one": m.One, "two": m.Two, "few": m.Few, "many": m.Many, "other": m.Other} {
		if form == "other" && strings.TrimSpace(s) == "" {
			return nil, errors.New("is empty")
		}
		for _, a := range actionRE.FindAllString(s, -1) {
			p := placeholderRE.FindStringSubmatch(a)
			if p == nil || p[0] != a {
				return nil, fmt.Errorf("%q is not a placeholder: only {{.Name}} may be used", a)
			}
			if !allowed[p[1]] {
				return nil, fmt.Errorf("English has no placeholder %s", a)
			}
		}
		if strings.Count(s, "{{") != len(actionRE.FindAllString(s, -1)) {
			return nil, fmt.Errorf("has an unclosed {{")
		}
	}
	for _, p := range placeholderRE.FindAllStringSubmatch(en.Other, -1) {
		if !strings.Contains(m.Other, p[0]) {
			return nil, fmt.Errorf("keep the placeholder %s", p[0])
		}
	}
	return m, nil
}
