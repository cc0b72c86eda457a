package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

var (
	mdHeading = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`)
	mdAnchor  = regexp.MustCompile(`<a (?:name|id)="([^"]+)"`)
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdFence   = regexp.MustCompile("(?ms)^[ \t]*```.*?^[ \t]*```")
	mdCode    = regexp.MustCompile("`[^`\n]*`")
	mdLinkTxt = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	urlScheme = regexp.MustCompile(`^[a-z]+:`)
)

// slug is the anchor GitHub gives a heading: lower case, letters, digits,
// '-' and '_' kept, spaces made '-', everything else dropped.
func slug(heading string) string {
	heading = mdLinkTxt.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the anchors of a markdown text: its headings' (the
// second of a name gets -1, as on GitHub) and its <a name>s.
func anchors(text string) map[string]bool {
	text = mdFence.ReplaceAllString(text, "")
	out, seen := map[string]bool{}, map[string]int{}
	for _, m := range mdHeading.FindAllStringSubmatch(text, -1) {
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	for _, m := range mdAnchor.FindAllStringSubmatch(text, -1) {
		out[m[1]] = true
	}
	return out
}

// brokenLinks returns the relative links of the markdown file name (text
// its content, read the others through read) that name no file, or a
// heading its target does not have. Links in code are not links.
func brokenLinks(name, text string, exists func(string) bool, read func(string) (string, error)) []string {
	prose := mdCode.ReplaceAllString(mdFence.ReplaceAllStringFunc(text, func(s string) string {
		return strings.Repeat("\n", strings.Count(s, "\n"))
	}), "")
	var out []string
	for _, line := range strings.SplitAfter(prose, "\n") {
		for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
			u := m[1]
			if urlScheme.MatchString(u) {
				continue
			}
			path, frag, _ := strings.Cut(u, "#")
			target := name
			if path != "" {
				target = filepath.Join(filepath.Dir(name), path)
			}
			if !exists(target) {
				out = append(out, fmt.Sprintf("%s: %s: no file %s", name, u, target))
				continue
			}
			if frag == "" || !strings.HasSuffix(target, ".md") {
				continue
			}
			t, err := read(target)
			if err != nil {
				out = append(out, fmt.Sprintf("%s: %s: %v", name, u, err))
			} else if !anchors(t)[frag] {
				out = append(out, fmt.Sprintf("%s: %s: %s has no heading #%s", name, u, target, frag))
			}
		}
	}
	return out
}

// TestDocsLinksResolve: every relative link of the repository's markdown
// names a file there and, with an anchor, a heading of it, as a reader
// following the docs on GitHub would need.
func TestDocsLinksResolve(t *testing.T) {
	out, err := exec.Command("git", "-C", root, "ls-files", "*.md").Output()
	if err != nil {
		t.Skipf("git ls-files: %v", err)
	}
	exists := func(p string) bool { _, err := os.Stat(filepath.Join(root, p)); return err == nil }
	read := func(p string) (string, error) { b, err := os.ReadFile(filepath.Join(root, p)); return string(b), err }
	files := strings.Fields(string(out))
	if !slices.Contains(files, "docs/runbooks.md") {
		t.Fatalf("git ls-files lists no docs/runbooks.md: %v", files)
	}
	for _, f := range files {
		text, err := read(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range brokenLinks(f, text, exists, read) {
			t.Error(p)
		}
	}
}

func TestBrokenLinksFindsThem(t *testing.T) {
	docs := map[string]string{
		"docs/a.md": "# A\n\n## Run it: `make`\n\n## Run it: `make`\n<a name=\"x\"></a>\n",
		"README.md": "[ok](docs/a.md#run-it-make) [dup](docs/a.md#run-it-make-1) [name](docs/a.md#x) " +
			"[web](https://example.com/#nope) `[code](nope.md)` [self](#b)\n\n## B\n" +
			"[gone](docs/b.md) [no heading](docs/a.md#run) [dir](deploy/)\n```\n[fenced](nope.md)\n```\n",
	}
	exists := func(p string) bool { _, ok := docs[p]; return ok || p == "deploy" }
	read := func(p string) (string, error) { return docs[p], nil }
	got := brokenLinks("README.md", docs["README.md"], exists, read)
	want := []string{"README.md: docs/b.md: no file docs/b.md", "README.md: docs/a.md#run: docs/a.md has no heading #run"}
	if !slices.Equal(got, want) {
		t.Errorf("brokenLinks = %q, want %q", got, want)
	}
}

// TestRunbooksAreAlerts: every section of docs/runbooks.md is an alert of
// the mixin (TestLint checks the other way), so that no runbook outlives
// its alert.
func TestRunbooksAreAlerts(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "docs", "runbooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	alerts := map[string]bool{}
	for _, r := range allRules(t) {
		if r.Alert != "" {
			alerts[r.Alert] = true
		}
	}
	for _, name := range runbookSections(string(b)) {
		if !alerts[name] {
			t.Errorf("docs/runbooks.md has a section ## %s, which is no alert of the mixin", name)
		}
	}
	if got := runbookSections("# Runbooks\n\n## VGPUA\n\ntext\n\n## VGPUB\n"); !slices.Equal(got, []string{"VGPUA", "VGPUB"}) {
		t.Errorf("runbookSections = %q", got)
	}
}

// runbookSections returns the names of the ## sections of runbooks.
func runbookSections(runbooks string) []string {
	var out []string
	for _, line := range strings.Split(mdFence.ReplaceAllString(runbooks, ""), "\n") {
		if name, ok := strings.CutPrefix(line, "## "); ok {
			out = append(out, strings.TrimSpace(name))
		}
	}
	return out
}
