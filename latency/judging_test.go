package latency

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
)

// TestJudgedOnlyUnderJudging checks the rule of sloTracker.judging in the
// package's code: what observe alone keeps (judged) is reached only
// through judgingLock.lock, which takes the lock, and no judged is made
// elsewhere; prev and lastScrape are written only by functions given the
// *judged, so holding judging.
func TestJudgedOnlyUnderJudging(t *testing.T) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			for _, v := range judgingViolations(fn) {
				t.Errorf("%s: %s", fset.Position(v.pos), v.what)
			}
		}
	}
}

type violation struct {
	pos  token.Pos
	what string
}

// judgingViolations are fn's breaches of the rule of sloTracker.judging.
func judgingViolations(fn *ast.FuncDecl) []violation {
	lock := fn.Name.Name == "lock" && fn.Recv != nil && typeName(fn.Recv.List[0].Type) == "judgingLock"
	givenJudged := false
	for _, p := range fn.Type.Params.List {
		if typeName(p.Type) == "judged" {
			givenJudged = true
		}
	}
	var out []violation
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if n.Sel.Name == "guarded" && !lock {
				out = append(out, violation{n.Pos(), fn.Name.Name + " reaches judgingLock.guarded without lock"})
			}
		case *ast.CompositeLit:
			if typeName(n.Type) == "judged" {
				out = append(out, violation{n.Pos(), fn.Name.Name + " makes a judged of its own"})
			}
		case *ast.AssignStmt:
			for _, l := range n.Lhs {
				if sel, ok := l.(*ast.SelectorExpr); ok && (sel.Sel.Name == "prev" || sel.Sel.Name == "lastScrape") && !givenJudged {
					out = append(out, violation{sel.Pos(), fn.Name.Name + " writes " + sel.Sel.Name + " without holding judging"})
				}
			}
		}
		return true
	})
	return out
}

// typeName is the name of the type t, less a pointer.
func typeName(t ast.Expr) string {
	if st, ok := t.(*ast.StarExpr); ok {
		t = st.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// TestJudgingCheckCatches: the check above finds each breach.
func TestJudgingCheckCatches(t *testing.T) {
	src := `package latency
func (s *sloTracker) peek() { _ = s.judging.guarded.servers }
func (s *sloTracker) own() { j := &judged{}; _ = j }
func (s *sloTracker) base(h *histo) { s.prev = h }
func (s *sloTracker) fine(j *judged, h *histo) { s.prev = h }
func (l *judgingLock) lock() (*judged, func()) { return &l.guarded, nil }
`
	f, err := parser.ParseFile(token.NewFileSet(), "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range f.Decls {
		for _, v := range judgingViolations(d.(*ast.FuncDecl)) {
			got = append(got, v.what)
		}
	}
	want := []string{"peek reaches judgingLock.guarded without lock", "own makes a judged of its own", "base writes prev without holding judging"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("found %q, want %q", got, want)
	}
}

// TestObserveServeConcurrent: answers observed by several scrapes at once
// (judged one at a time: their start times take turns, so several
// servers are told apart, refused, and counted again), while the status
// is served, the interval and the epoch set: go test -race sees every
// access to what is judged and what is served.
func TestObserveServeConcurrent(t *testing.T) {
	src := &Source{URL: "sim://a", Preset: PresetVLLME2E, Timeout: time.Second, MaxBytes: 1 << 20}
	tr := newSLOTracker(Spec{Name: "x", Source: src, Objective: &Objective{Quantile: 0.9, Target: time.Second}, Window: time.Minute})
	answer := func(i int) histo {
		text := vllmText(fmt.Sprint(10*(i+1))) + fmt.Sprintf("# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %d\n", 1000+i/5%3)
		fams, err := parseExposition([]byte(text), expfmt.FmtText, families(src))
		if err != nil {
			t.Fatal(err)
		}
		h, err := extract(src, fams)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	const scrapes, answers = 3, 100
	var observers, servers sync.WaitGroup
	start := make(chan struct{})
	for range scrapes {
		hs := make([]histo, answers) // each scrape its own answers
		for i := range hs {
			hs[i] = answer(i)
		}
		observers.Go(func() {
			<-start
			for i, h := range hs {
				_ = tr.observe(time.Unix(int64(15*i), 0), h)
			}
		})
	}
	close(start)
	done := make(chan struct{})
	for k := range 2 {
		servers.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				if st := tr.Status(); st.RequestsTotal < 0 || st.GoodRequestsTotal > st.RequestsTotal {
					t.Errorf("status %+v", st)
					return
				}
				tr.setInterval(15 * time.Second)
				tr.setEpoch(uint64(k))
			}
		})
	}
	observers.Wait()
	close(done)
	servers.Wait()
	if st := tr.Status(); !st.SourceRead {
		t.Errorf("status %+v: no answer read", st)
	}
}
