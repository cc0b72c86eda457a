package latency

import (
	"maps"
	"slices"
	"strings"
)

// seriesMatch checks a series' labels against a source's matchers as a
// decoder meets them, a pair at a time: label equality, a label the
// series lacks read as "" and, of a label written twice, the first
// (labelsMatch). A nil *seriesMatch matches every series.
type seriesMatch struct {
	names, values []string
	// tokens are the values as the text format writes them, quoted and
	// escaped: the only way it may (the parser refuses an escape but
	// \\, \" and \n, and a newline ends the line), so a value read as
	// written is compared byte by byte, unescaped never.
	tokens [][]byte
	// maxName is the longest name, quoted: a longer one is no matcher's.
	maxName int
	// seen and equal: each matcher's label met in the current series,
	// and its value equal to the matcher's.
	seen, equal []bool
}

// newSeriesMatch is the check of matchers; nil with none.
func newSeriesMatch(matchers map[string]string) *seriesMatch {
	if len(matchers) == 0 {
		return nil
	}
	m := &seriesMatch{}
	esc := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	for _, k := range slices.Sorted(maps.Keys(matchers)) {
		m.names = append(m.names, k)
		m.values = append(m.values, matchers[k])
		m.tokens = append(m.tokens, []byte(`"`+esc.Replace(matchers[k])+`"`))
		m.maxName = max(m.maxName, len(k)+2)
	}
	m.seen = make([]bool, len(m.names))
	m.equal = make([]bool, len(m.names))
	return m
}

// begin starts a series.
func (m *seriesMatch) begin() {
	if m != nil {
		clear(m.seen)
		clear(m.equal)
	}
}

// label is the matcher whose label name is, where the series has not met
// it yet (and marks it met); else -1.
func (m *seriesMatch) label(name []byte) int {
	if m == nil {
		return -1
	}
	for i, n := range m.names {
		if string(name) == n {
			if m.seen[i] {
				return -1
			}
			m.seen[i] = true
			return i
		}
	}
	return -1
}

// matched says whether the series read since begin matches.
func (m *seriesMatch) matched() bool {
	if m == nil {
		return true
	}
	for i := range m.names {
		if m.seen[i] && !m.equal[i] || !m.seen[i] && m.values[i] != "" {
			return false
		}
	}
	return true
}
