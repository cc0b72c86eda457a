package tenant

import (
	"math"
	"regexp"
	"strings"
	"unicode/utf8"
)

func hasGlobMeta(s string) bool { return strings.ContainsAny(s, "*?[") }

// glob is a compiled glob pattern: '*' matches any run of characters ('/'
// included), '?' one character, "[...]" a class ("[!...]" negated).
type glob struct {
	pat string
	re  *regexp.Regexp // patterns with classes; nil for '*' and '?' only
}

// compileGlob compiles g; "" gives nil, which matches everything.
func compileGlob(g string) *glob {
	if g == "" {
		return nil
	}
	if !strings.Contains(g, "[") {
		return &glob{pat: g}
	}
	return &glob{pat: g, re: globRegexp(g)}
}

// match reports whether s matches the whole pattern.
func (g *glob) match(s string) bool {
	ok, _ := g.matchWithin(s, math.MaxInt)
	return ok
}

// regexpStepCost is what matching a pattern with classes costs, in steps
// per byte of the pattern and byte of s: the regexp engine's work, at
// worst, grows with their product, each unit a few times a step of
// wildMatch.
const regexpStepCost = 4

// matchWithin is match with its work bounded: past limit steps it gives
// up, unmatched. steps is the work it took (or, for a pattern with
// classes, would have taken at worst).
func (g *glob) matchWithin(s string, limit int) (ok bool, steps int) {
	if g.re != nil {
		steps = regexpStepCost * len(g.pat) * len(s)
		if steps > limit {
			return false, steps
		}
		return g.re.MatchString(s), steps
	}
	return wildMatch(g.pat, s, limit)
}

// wildMatch matches '*' and '?' wildcards by backtracking to the last star,
// in steps (bytes of s compared) that grow with len(p)*len(s) at worst and
// without allocation; past limit steps it gives up, unmatched.
func wildMatch(p, s string, limit int) (ok bool, steps int) {
	px, sx := 0, 0
	starPx, starSx := -1, -1
	for px < len(p) || sx < len(s) {
		if steps++; steps > limit {
			return false, steps
		}
		if px < len(p) {
			switch c := p[px]; c {
			case '*':
				starPx, starSx = px, sx
				px++
				continue
			case '?':
				if sx < len(s) {
					_, n := utf8.DecodeRuneInString(s[sx:])
					px++
					sx += n
					continue
				}
			default:
				if sx < len(s) && s[sx] == c {
					px++
					sx++
					continue
				}
			}
		}
		if starPx >= 0 && starSx < len(s) {
			_, n := utf8.DecodeRuneInString(s[starSx:])
			starSx += n
			px, sx = starPx+1, starSx
			continue
		}
		return false, steps
	}
	return true, steps
}

// globRegexp turns a glob into an anchored regexp.
func globRegexp(g string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(g); i++ {
		c := g[i]
		switch c {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		case '[':
			j := strings.IndexByte(g[i+1:], ']')
			if j < 0 {
				b.WriteString(`\[`)
				continue
			}
			class := g[i+1 : i+1+j]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			if class == "" || class == "^" {
				b.WriteString(regexp.QuoteMeta(g[i : i+2+j]))
			} else {
				b.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
			}
			i += j + 1
		default:
			b.WriteString(regexp.QuoteMeta(g[i : i+1]))
		}
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return regexp.MustCompile("^" + regexp.QuoteMeta(g) + "$")
	}
	return re
}

func globMatch(g *glob, s string) bool { return g == nil || g.match(s) }
