package waitroom_test

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// markdownLink matches an inline link or image, [text](target "title"),
// keeping the target.
var markdownLink = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)

// TestDocsLinksResolve checks that every relative link in the repository's
// own Markdown (the root's files and docs/) names a file that exists and,
// when it names a heading, a heading that exists: docs are moved and split,
// and a link left pointing at the old place is a dead end for the reader.
func TestDocsLinksResolve(t *testing.T) {
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir("docs", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no Markdown files found")
	}
	anchors := map[string]map[string]bool{}
	for _, file := range files {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, target := range relativeLinks(string(text)) {
			dest, anchor, _ := strings.Cut(target, "#")
			resolved := file
			if dest != "" {
				resolved = filepath.Join(filepath.Dir(file), filepath.FromSlash(dest))
				if _, err := os.Stat(resolved); err != nil {
					t.Errorf("%s: link %q: %s does not exist", file, target, resolved)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(resolved, ".md") {
				continue
			}
			if anchors[resolved] == nil {
				anchors[resolved] = headingAnchors(t, resolved)
			}
			if !anchors[resolved][anchor] {
				t.Errorf("%s: link %q: %s has no heading #%s", file, target, resolved, anchor)
			}
		}
	}
}

func TestRelativeLinksSkipCodeAndURLs(t *testing.T) {
	text := "see [a](a.md) and [b](docs/b.md#part \"title\")\n" +
		"`[not](inline.md)` [web](https://example.com) [mail](mailto:x@y) [here](#top)\n" +
		"```\n[not](fenced.md)\n```\n![img](pic.png)\n"
	got := strings.Join(relativeLinks(text), " ")
	want := "a.md docs/b.md#part #top pic.png"
	if got != want {
		t.Fatalf("relativeLinks = %q, want %q", got, want)
	}
	for heading, want := range map[string]string{
		"## Leavers, no-shows and the ETA: what to set": "leavers-no-shows-and-the-eta-what-to-set",
		"### `--redis-url` forms":                       "--redis-url-forms",
		"## HTTP ENTER ÷ trivial":                       "http-enter--trivial",
	} {
		if got := headingAnchor(strings.TrimLeft(heading, "# ")); got != want {
			t.Errorf("headingAnchor(%q) = %q, want %q", heading, got, want)
		}
	}
}

// relativeLinks returns the targets of the links in Markdown text that
// point into the repository, outside code blocks and code spans.
func relativeLinks(text string) []string {
	var links []string
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range markdownLink.FindAllStringSubmatch(withoutCodeSpans(line), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if dest, anchor, ok := strings.Cut(target, "#"); dest != "" {
				target = path.Clean(dest)
				if ok {
					target += "#" + anchor
				}
			}
			links = append(links, target)
		}
	}
	return links
}

func withoutCodeSpans(line string) string {
	parts := strings.Split(line, "`")
	for i := 1; i < len(parts); i += 2 {
		parts[i] = ""
	}
	return strings.Join(parts, "`")
}

// headingAnchors lists the anchors GitHub gives the headings of a
// Markdown file, a repeated heading numbered -1, -2, ….
func headingAnchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(string(text), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimLeft(line, "#")
		if !strings.HasPrefix(title, " ") {
			continue
		}
		anchor := headingAnchor(strings.TrimSpace(title))
		if n := seen[anchor]; n > 0 {
			anchors[anchor+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[anchor] = true
		}
		seen[anchor]++
	}
	return anchors
}

// headingAnchor is GitHub's anchor of a heading: lower case, letters,
// digits, hyphens and underscores kept, spaces made hyphens, the rest
// dropped.
func headingAnchor(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}
