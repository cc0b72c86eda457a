package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
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
	exists := func(p string) bool { _, err := os.Stat(filepath.Join(root, p)); return err == nil }
	read := func(p string) (string, error) { b, err := os.ReadFile(filepath.Join(root, p)); return string(b), err }
	files := repoFiles(t, false, "*.md")
	if !slices.Contains(files, "docs/runbooks.md") || !slices.Contains(files, "README.md") {
		t.Fatalf("found no docs/runbooks.md or README.md: %v", files)
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

// proseDocs returns the docs a reader follows, relative to root:
// README.md, scenarios/README.md and every docs/*.md.
func proseDocs(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(docs) < 20 {
		t.Fatalf("docs/*.md: %d files, %v", len(docs), err)
	}
	for i, d := range docs {
		docs[i] = filepath.ToSlash(strings.TrimPrefix(d, root+"/"))
	}
	return append([]string{"README.md", "scenarios/README.md"}, docs...)
}

var (
	goTestFunc = regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)[A-Z0-9_]\w*)\(`)
	docTest    = regexp.MustCompile(`\b(?:Test|Fuzz|Benchmark)[A-Z0-9_]\w*`)
	// runPattern is the pattern of a go test -run or -bench in the docs.
	runPattern = regexp.MustCompile(`(?:^|[\s` + "`" + `])-(?:run|bench)[ =]'?([^'\s` + "`" + `]+)'?`)
	// notOurs are paths the docs name in other projects' trees.
	notOurs = map[string]bool{"docs/references/production_metrics.md": true}
)

// missingTests returns the tests, fuzz targets and benchmarks a doc (name,
// text) names that are not defined (defined holds their names): a name
// alone must be one, a -run or -bench pattern must select one.
func missingTests(name, text string, defined []string) []string {
	var out []string
	for i, line := range strings.Split(text, "\n") {
		for _, m := range runPattern.FindAllStringSubmatch(line, -1) {
			if m[1] == "^$" {
				continue
			}
			if !selectsTests(m[1], defined) {
				out = append(out, fmt.Sprintf("%s:%d: %s selects no test", name, i+1, strings.Trim(m[0], " \t`")))
			}
		}
		for _, n := range docTest.FindAllString(runPattern.ReplaceAllString(line, ""), -1) {
			if !slices.Contains(defined, n) {
				out = append(out, fmt.Sprintf("%s:%d: %s is no test, fuzz target or benchmark", name, i+1, n))
			}
		}
	}
	return out
}

// selectsTests reports whether the -run or -bench pattern selects a test
// of defined in each of its alternatives: go test splits it at each | and
// / outside brackets and parentheses (TestA/sub|TestB is TestA's subtest
// sub, or TestB), and matches the first element of each alternative
// against the top-level names; what follows a / names subtests, which the
// source does not list.
func selectsTests(pattern string, defined []string) bool {
	var alts [][]string
	elems := []string{}
	brackets, parens, start := 0, 0, 0
	for i := 0; i < len(pattern); i++ {
		switch pattern[i] {
		case '[':
			brackets++
		case ']':
			brackets = max(brackets-1, 0)
		case '(':
			if brackets == 0 {
				parens++
			}
		case ')':
			if brackets == 0 {
				parens--
			}
		case '\\':
			i++
		case '/', '|':
			if brackets == 0 && parens == 0 {
				elems = append(elems, pattern[start:i])
				start = i + 1
				if pattern[i] == '|' {
					alts, elems = append(alts, elems), []string{}
				}
			}
		}
	}
	alts = append(alts, append(elems, pattern[min(start, len(pattern)):]))
	for _, alt := range alts {
		re, err := regexp.Compile(alt[0])
		if err != nil || !slices.ContainsFunc(defined, re.MatchString) {
			return false
		}
	}
	return true
}

// TestDocsNameExistingTests: every test, fuzz target or benchmark the
// docs name (as the proof of a claim, or in a command to run) is one of
// the repository's, so that a renamed or removed test is not left cited.
func TestDocsNameExistingTests(t *testing.T) {
	var defined []string
	for _, f := range repoFiles(t, true, "*_test.go") {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range goTestFunc.FindAllStringSubmatch(string(b), -1) {
			defined = append(defined, m[1])
		}
	}
	if len(defined) < 500 {
		t.Fatalf("only %d tests found in the repository", len(defined))
	}
	for _, doc := range proseDocs(t) {
		b, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range missingTests(doc, string(b), defined) {
			t.Error(p)
		}
	}
	doc := "`TestA` and `FuzzB` hold it; `go test -run 'TestC' ./x`, `-bench D -run '^$'`; TestGone, BenchmarkNone, `-run Nothing`, a long-run Test\n" +
		"`-run 'TestA/a_pod_tenant'`, `-run 'TestA|TestCalib/x'`, `-run '^(TestA|FuzzB)$/[a/b]'`, `-run 'TestA|TestGone/x'`, `-run TestGone/TestA`\n"
	got := missingTests("x.md", doc, []string{"TestA", "FuzzB", "TestCalib", "BenchmarkDx"})
	want := []string{"x.md:1: -run Nothing selects no test", "x.md:1: TestGone is no test, fuzz target or benchmark", "x.md:1: BenchmarkNone is no test, fuzz target or benchmark",
		"x.md:2: -run 'TestA|TestGone/x' selects no test", "x.md:2: -run TestGone/TestA selects no test"}
	if !slices.Equal(got, want) {
		t.Errorf("missingTests = %q, want %q", got, want)
	}
}

// fenceLine is the opening or closing line of a fenced code block.
var fenceLine = regexp.MustCompile("^[ \t]*```")

// pathNamer returns a function listing the paths from the repository's
// root (a directory of tops first) that a doc's text names, each as
// "LINE:PATH": any in code (`collector/docs_test.go`, a fenced command),
// and in prose only those ending in an extension or a / (deploy/systemd/):
// "latency/throughput trade-off" or "per tenant/GPU pair" is no path.
// Link targets are TestDocsLinksResolve's.
func pathNamer(tops []string) func(text string) []string {
	quoted := make([]string, len(tops))
	for i, top := range tops {
		quoted[i] = regexp.QuoteMeta(top)
	}
	path := regexp.MustCompile("(?:^|[\\s`(\\[\"])((?:" + strings.Join(quoted, "|") + `)/[\w./-]*[\w/])`)
	file := regexp.MustCompile(`(?:/|\.\w+)$`)
	return func(text string) []string {
		var out []string
		add := func(i int, s string, code bool) {
			for _, m := range path.FindAllStringSubmatch(s, -1) {
				p := strings.TrimRight(m[1], ".")
				if code || file.MatchString(p) {
					out = append(out, fmt.Sprintf("%d:%s", i+1, p))
				}
			}
		}
		fenced := false
		for i, line := range strings.Split(text, "\n") {
			if fenceLine.MatchString(line) {
				fenced = !fenced
				continue
			}
			if fenced {
				add(i, line, true)
				continue
			}
			for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
				add(i, m[1], true)
			}
			add(i, codeSpan.ReplaceAllString(line, " "), false)
		}
		return out
	}
}

// TestDocsPathsExist: every path the docs name from the repository's
// root (`collector/docs_test.go`, deploy/systemd/) exists, so that a
// moved file is not left cited.
func TestDocsPathsExist(t *testing.T) {
	tops := map[string]bool{}
	for _, f := range repoFiles(t, false, "*") {
		if top, _, ok := strings.Cut(f, "/"); ok {
			tops[top] = true
		}
	}
	if len(tops) < 10 {
		t.Fatalf("only %d top-level directories: %v", len(tops), tops)
	}
	names := pathNamer(slices.Sorted(maps.Keys(tops)))
	for _, doc := range proseDocs(t) {
		b, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, lp := range names(string(b)) {
			line, p, _ := strings.Cut(lp, ":")
			if _, err := os.Stat(filepath.Join(root, p)); err != nil && !notOurs[p] {
				t.Errorf("%s:%s names %s, which the repository does not have", doc, line, p)
			}
		}
	}
	doc := "A latency/throughput trade-off per tenant/GPU pair, sim/test.\n" +
		"`tenant/gone.go` and `latency/x`; see deploy/systemd/ or sim/a.go. (kube/b.yaml)\n" +
		"```\ngo test ./sim/... && cat test/c\n```\nlatency/y\n"
	got := pathNamer([]string{"deploy", "kube", "latency", "sim", "tenant", "test"})(doc)
	want := []string{"2:tenant/gone.go", "2:latency/x", "2:deploy/systemd/", "2:sim/a.go", "2:kube/b.yaml", "4:test/c"}
	if !slices.Equal(got, want) {
		t.Errorf("paths named = %q, want %q", got, want)
	}
}

// alertWord is a word of an alert's shape (VGPUTunerRestoreFailed).
var alertWord = regexp.MustCompile(`\bVGPU[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*\b`)

// TestDocsNameAlerts: every alert the docs name is an alert of the mixin,
// so that a renamed alert is not left in the runbooks of other pages.
// Package gpu's identifiers of that shape (gpu.VGPUSchedulerActuator,
// VGPUInstance) are not alerts.
func TestDocsNameAlerts(t *testing.T) {
	alerts := map[string]bool{}
	for _, r := range allRules(t) {
		if r.Alert != "" {
			alerts[r.Alert] = true
		}
	}
	goFiles, err := filepath.Glob(filepath.Join(root, "gpu", "*.go"))
	if err != nil || len(goFiles) == 0 {
		t.Fatalf("gpu/*.go: %v", err)
	}
	var gpuSource strings.Builder
	for _, f := range goFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		gpuSource.Write(b)
	}
	identifier := map[string]bool{}
	for _, w := range alertWord.FindAllString(gpuSource.String(), -1) {
		identifier[w] = true
	}
	for _, doc := range proseDocs(t) {
		b, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, w := range alertWord.FindAllString(line, -1) {
				if !alerts[w] && !identifier[w] {
					t.Errorf("%s:%d names %s, which is no alert of the mixin", doc, i+1, w)
				}
			}
		}
	}
}

var (
	promqlBlock = regexp.MustCompile("(?ms)^[ \t]*```promql\n(.*?)^[ \t]*```")
	// labelSet is the docs' notation of a series' labels, name{a,b}: no
	// query.
	labelSet = regexp.MustCompile(`\{[a-z_]+(?:, ?[a-z_]+)*\}`)
	// queryShape is what makes a span naming a series a query: a call, a
	// selector, a range or an operator.
	queryShape = regexp.MustCompile(`[(\[]|\{[^}]*=|\s(?:[<>=!]=?|[-+*/]|and|or|unless)\s`)
)

// docQueries returns the PromQL queries of a doc: its promql blocks and
// the inline code naming a series (not the program, notSeries) in a
// query's shape (not a URL, not the label notation name{a,b}).
func docQueries(text string) []string {
	var out []string
	for _, m := range promqlBlock.FindAllStringSubmatch(text, -1) {
		out = append(out, strings.TrimSpace(m[1]))
	}
	prose := mdFence.ReplaceAllString(text, "")
	for _, m := range codeSpan.FindAllStringSubmatch(prose, -1) {
		s := m[1]
		named := slices.ContainsFunc(seriesName.FindAllString(s, -1), func(n string) bool { return !notSeries[n] })
		if named && queryShape.MatchString(s) && !labelSet.MatchString(s) && !strings.HasPrefix(s, "/") {
			out = append(out, s)
		}
	}
	return out
}

// TestDocsQueriesParse has promtool parse, as recording rules, every
// query README.md, scenarios/README.md and docs/*.md quote, so that one
// copied from them runs.
func TestDocsQueriesParse(t *testing.T) {
	var b strings.Builder
	b.WriteString("groups:\n")
	n := 0
	for _, doc := range proseDocs(t) {
		text, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		qs := docQueries(string(text))
		if len(qs) == 0 {
			continue
		}
		fmt.Fprintf(&b, "  - name: %q\n    rules:\n", doc)
		for _, q := range qs {
			e, _ := json.Marshal(q)
			fmt.Fprintf(&b, "      - record: doc:check\n        expr: %s\n", e)
			n++
		}
	}
	if n < 30 {
		t.Errorf("only %d queries found in the docs", n)
	}
	p := filepath.Join(t.TempDir(), "docs.rules.yaml")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	runPromtool(t, ".", "check", "rules", p)
	got := docQueries("`vgpu_a{b,c}`, `/metrics?name[]=vgpu_a`, `pgrep -x vgpu_exporter (x)`, `vgpu_a`, `rate(vgpu_a[5m])`, `vgpu_a > 0`\n```promql\nsum(vgpu_b)\n```\n")
	if want := []string{"sum(vgpu_b)", "rate(vgpu_a[5m])", "vgpu_a > 0"}; !slices.Equal(got, want) {
		t.Errorf("docQueries = %q, want %q", got, want)
	}
}
