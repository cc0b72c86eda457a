package tenant

import (
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
	if g.re != nil {
		return g.re.MatchString(s)
	}
	return wildMatch(g.pat, s)
}

// wildMatch matches '*' and '?' wildcards by backtracking to the last star,
// in time linear in len(p)*len(s) at worst and without allocation.
func wildMatch(p, s string) bool {
	px, sx := 0, 0
	starPx, starSx := -1, -1
	for px < len(p) || sx < len(s) {
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
		return false
	}
	return true
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
