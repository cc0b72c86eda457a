package tenant

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

func hasGlobMeta(s string) bool { return strings.ContainsAny(s, "*?[") }

// glob is a compiled glob pattern: '*' matches any run of characters ('/'
// included), '?' one character, "[...]" one character of a class: runes
// and ranges (a-z), negated by a leading '!' or '^', a '-' first or last
// being itself. A '[' without a ']' after it is itself, and so are "[]",
// "[!]" and "[^]". A glob with a reversed range (z-a) or a named class
// ([[:digit:]]) matches only itself.
// The pattern is read as it is matched: a glob costs no memory beyond its
// text, whatever its length.
type glob struct {
	pat string
	// lastClose is the index of the pattern's last ']' (-1: none): a '['
	// after it opens no class
	lastClose int
	// literal: a class has a reversed range; the glob matches only itself
	literal bool
	// meta: the pattern has a '*', '?' or '['; without, it is a literal
	meta bool
	// longClass is the length of a class longer than maxClassBytes, which
	// the file is refused for (0: none)
	longClass int
	// prefix and suffix are the literal text before the first '*', '?' or
	// '[' and after the last (or the last ']'): what a name must begin
	// and end with; inner is the longest run of literal text between
	// them, which it must contain
	prefix, suffix, inner string
}

// maxClassBytes bounds a class: it is read again at each character it is
// tried on, and a star before it tries it at each character of the name.
const maxClassBytes = 256

// classProblem says what is wrong with the glob of key, if anything.
func (g *glob) classProblem(key string) string {
	if g == nil || g.longClass == 0 {
		return ""
	}
	return fmt.Sprintf("%s: a class ([...]) of %d bytes; at most %d", key, g.longClass, maxClassBytes)
}

// compileGlob compiles g; "" gives nil, which matches everything.
func compileGlob(g string) *glob {
	if g == "" {
		return nil
	}
	gl := &glob{pat: g, lastClose: strings.LastIndexByte(g, ']'), meta: hasGlobMeta(g)}
	gl.prefix, gl.suffix = g, g
	if i := strings.IndexAny(g, "*?["); i >= 0 {
		gl.prefix, gl.suffix = g[:i], g[strings.LastIndexAny(g, "*?[]")+1:]
	}
	gl.inner = gl.longestLiteral()
	for i := 0; i <= gl.lastClose; i++ {
		if g[i] != '[' {
			continue
		}
		set, _, width := gl.classAt(i)
		if width-2 > maxClassBytes && gl.longClass == 0 {
			gl.longClass = width - 2
		}
		// a name ([[:digit:]]) is not supported; as a reversed range, it
		// leaves the glob to match only itself
		if _, valid := inSet(set, 0); !valid || namedClass(set) {
			gl.literal = true
			break
		}
		i += width - 1
	}
	return gl
}

// longestLiteral is the longest run of the pattern's literal text between
// two '*', '?' or classes (the prefix and suffix are checked apart).
func (g *glob) longestLiteral() string {
	best := ""
	for i, start := 0, 0; i < len(g.pat); {
		c := g.pat[i]
		if c != '*' && c != '?' && c != '[' {
			i++
			continue
		}
		if start > 0 && i-start > len(best) {
			best = g.pat[start:i]
		}
		width := 1
		if c == '[' {
			_, _, width = g.classAt(i)
		}
		i += width
		start = i
	}
	return best
}

// namedClass reports whether set ends in what a regexp reads as a named
// class: "[:", a name, ':' (the class's ']' closing it).
func namedClass(set string) bool {
	i := strings.Index(set, "[:")
	return i >= 0 && strings.HasSuffix(set, ":") && len(set)-1 >= i+2
}

// classAt reads what the '[' at pat[i] opens, width bytes of the pattern:
// a class of the runes and ranges in set, negated or not, or, when set is
// "", those bytes as they are ("[" with no ']' after it, "[]", "[!]",
// "[^]").
func (g *glob) classAt(i int) (set string, negated bool, width int) {
	if i > g.lastClose {
		return "", false, 1
	}
	j := strings.IndexByte(g.pat[i+1:], ']')
	set, width = g.pat[i+1:i+1+j], j+2
	if set != "" && (set[0] == '!' || set[0] == '^') {
		set, negated = set[1:], true
	}
	return set, negated, width
}

// inSet reports whether r is one of the runes and lo-hi ranges of set;
// valid is false when a range is reversed.
func inSet(set string, r rune) (in, valid bool) {
	for set != "" {
		lo, n := utf8.DecodeRuneInString(set)
		set = set[n:]
		hi := lo
		if len(set) >= 2 && set[0] == '-' { // a final '-' is itself
			hi, n = utf8.DecodeRuneInString(set[1:])
			set = set[1+n:]
			if hi < lo {
				return false, false
			}
		}
		in = in || lo <= r && r <= hi
	}
	return in, true
}

// match reports whether s matches the whole pattern.
func (g *glob) match(s string) bool {
	ok, _ := g.matchWithin(s, math.MaxInt)
	return ok
}

// matchWithin is match with its work bounded: past limit steps (a step is
// a byte of s or of a class compared) it gives up, unmatched; steps is the
// work it took. It backtracks to the last star, in steps that grow with
// len(pat)*len(s) at worst, and without allocation.
func (g *glob) matchWithin(s string, limit int) (ok bool, steps int) {
	if g.literal {
		return g.pat == s, 1 + min(len(s), len(g.pat))
	}
	if !strings.HasPrefix(s, g.prefix) || !strings.HasSuffix(s, g.suffix) {
		return false, 1
	}
	if !strings.Contains(s, g.inner) {
		return false, 1 + len(s)/16 // a fast scan
	}
	p := g.pat
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
			case '[':
				set, negated, width := g.classAt(px)
				steps += width
				if set == "" {
					if strings.HasPrefix(s[sx:], p[px:px+width]) {
						px += width
						sx += width
						continue
					}
				} else if sx < len(s) {
					r, n := utf8.DecodeRuneInString(s[sx:])
					if in, _ := inSet(set, r); in != negated {
						px += width
						sx += n
						continue
					}
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

func globMatch(g *glob, s string) bool { return g == nil || g.match(s) }
