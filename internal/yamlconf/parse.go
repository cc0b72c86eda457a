package yamlconf

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Parse reads data, which must hold at most one YAML document, and returns
// its root node, or nil (and no problem) when the document is empty. Syntax
// errors and a second document are added to errs. After a syntax error the
// line it names is blanked and the rest read again (up to maxRecoveries
// times), so that one typo does not hide the problems of the rest of the
// file; the root returned then is that of the repaired text, and the
// syntax errors already added keep the file invalid. Past maxAliases alias
// references (*name) in the file, counted as a decoder would follow them,
// the rest are reported once and read as null: aliases let a small file
// repeat a subtree any number of times. Past maxNodes nodes repeated
// through them in all (0: no bound), few references to a big subtree,
// the alias at which they passed it is reported and nil returned: nothing
// of the file is decoded (LimitAliases).
func Parse(errs *Errors, data []byte, maxAliases, maxNodes int) *yaml.Node {
	var lines [][]byte
	for range maxRecoveries + 1 {
		doc, err := parseOne(data)
		if err == nil {
			if doc == nil {
				return nil
			}
			b := &aliasBudget{errs: errs, max: maxAliases, maxNodes: maxNodes, open: map[*yaml.Node]bool{}}
			if b.walk(doc); b.over {
				return nil // (refused whole: a decoder would repeat them)
			}
			return doc
		}
		var extra *extraDocument
		if errors.As(err, &extra) {
			errs.Addf(extra.line, "%s", extra)
			return nil
		}
		if lines == nil {
			lines = bytes.SplitAfter(data, []byte("\n"))
		}
		p := syntaxProblem(err.Error(), lines)
		errs.add(p)
		if !blank(lines, p.Line) {
			return nil
		}
		data = bytes.Join(lines, nil)
	}
	return nil
}

// maxRecoveries bounds the re-reads after syntax errors.
const maxRecoveries = 20

// extraDocument is the error of a file holding more than its first
// document: a second one, or anything after a document end ("...").
type extraDocument struct {
	line int
	why  string // after "only one YAML document is allowed"; "" for none
}

func (e *extraDocument) Error() string { return "only one YAML document is allowed" + e.why }

// parseOne parses one document: its root node (nil when empty), or the
// syntax error, or an *extraDocument. Whatever follows the first document
// is refused, a second that does not parse and lines after a document end
// ("...") too: the decoder would drop them unread. An empty document after
// it (a last "---" followed by comments only) holds nothing to drop, and
// is accepted as a last "..." followed by comments is.
func parseOne(data []byte) (*yaml.Node, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err
	}
	for {
		var extra yaml.Node
		err := dec.Decode(&extra)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			p := splitLine(err.Error())
			if strings.Contains(p.Msg, "expected <document start>") {
				// named at the end or a line before what follows it
				return nil, &extraDocument{line: contentFrom(data, p.Line), why: `: this line follows the document end ("...") above, and would be ignored`}
			}
			return nil, &extraDocument{line: p.Line, why: ", and the second does not parse: " + p.Msg}
		}
		if !emptyDocument(&extra) {
			return nil, &extraDocument{line: extra.Line}
		}
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return nil, nil
		}
		root = root.Content[0]
	}
	return root, nil
}

// emptyDocument reports whether doc holds nothing: a "---" followed by
// blank lines and comments only (or by a "..."), which a reader of the
// first document drops with nothing in it. An explicit null ("~", "null",
// "!!null") or an anchor is something written there, and not empty.
func emptyDocument(doc *yaml.Node) bool {
	if len(doc.Content) == 0 {
		return true
	}
	n := doc.Content[0]
	return len(doc.Content) == 1 && n.Kind == yaml.ScalarNode && n.Tag == "!!null" &&
		n.Value == "" && n.Style == 0 && n.Anchor == ""
}

// OneDocument refuses data holding more than one YAML document, as Parse
// does: a second document, or a line after a document end ("..."), which
// a reader of the first document drops unread. It is nil for one document
// or none (followed by empty documents or not), and for a syntax error within the first, which a reader that
// decodes data itself names. Its error is an *Errors ("line N: ...").
func OneDocument(data []byte) error {
	var extra *extraDocument
	if _, err := parseOne(data); !errors.As(err, &extra) {
		return nil
	}
	var e Errors
	e.Addf(extra.line, "%s", extra)
	return &e
}

// contentFrom is the first line (1-based) from line n on that is not
// blank, a comment or a document end ("..."); n where there is none.
func contentFrom(data []byte, n int) int {
	lines := bytes.SplitAfter(data, []byte("\n"))
	for i := max(n-1, 0); i < len(lines); i++ {
		l := bytes.TrimSpace(lines[i])
		if len(l) > 0 && l[0] != '#' && !bytes.HasPrefix(lines[i], []byte("...")) {
			return i + 1
		}
	}
	return n
}

// syntaxProblem reads a yaml syntax error and puts it on the line a
// reader must fix, where the scanner names another: it names the line
// before a tab that breaks indentation (the problem goes on the first line
// from there on whose indentation holds a tab), and a line after an
// unclosed '[' or '{'. A %YAML directive of another version than 1.1,
// which it names at no line, is put on its line and said how to fix.
func syntaxProblem(msg string, lines [][]byte) Problem {
	p := splitLine(msg)
	if strings.Contains(p.Msg, "found incompatible YAML document") {
		for i, l := range lines {
			if bytes.HasPrefix(l, []byte("%YAML")) {
				p.Line = i + 1
				p.Msg += fmt.Sprintf(" (%s): only YAML 1.1 directives (%%YAML 1.1) are read; the %%YAML line can be deleted", bytes.TrimSpace(l))
				break
			}
		}
	}
	if strings.Contains(p.Msg, "expected ',' or ") {
		// An unclosed flow collection is noticed a line or more after
		// it opens: put the problem on the nearest line at or before the
		// one after the named one that opens more than it closes.
		for i := min(p.Line, len(lines)-1); i >= 0; i-- {
			l := lines[i]
			if bytes.Count(l, []byte("["))+bytes.Count(l, []byte("{")) > bytes.Count(l, []byte("]"))+bytes.Count(l, []byte("}")) {
				p.Line = i + 1
				break
			}
		}
	}
	if strings.Contains(p.Msg, "did not find expected '-' indicator") || strings.Contains(p.Msg, "did not find expected key") {
		// named at the block the parser was in (where it starts), not at
		// the line that breaks it: the first line from there on indented
		// less than the line before it, to a depth no line above it has
		if n := misIndented(lines, p.Line); n > 0 {
			p.Line, p.Msg = n, p.Msg+" (this line's indentation matches no block above it)"
		}
	}
	if strings.Contains(p.Msg, "tab character") {
		for i := max(p.Line-1, 0); i < len(lines); i++ {
			if bytes.IndexByte(lines[i][:indent(lines[i])], '\t') >= 0 {
				p.Line = i + 1
				break
			}
		}
	}
	return p
}

// misIndented is the first line (1-based) from the line before from on
// whose indentation is less than its predecessor's and none that the
// lines from there on had (a key's, or an item's or its mapping's after
// "- "); 0 where there is none. Blank lines and comments do not count.
func misIndented(lines [][]byte, from int) int {
	seen := map[int]bool{}
	prev := -1
	for i := max(from-2, 0); i < len(lines); i++ {
		l := bytes.TrimRight(lines[i], " \t\r\n")
		rest := bytes.TrimLeft(l, " ")
		if len(rest) == 0 || rest[0] == '#' {
			continue
		}
		d := len(l) - len(rest)
		if prev >= 0 && d < prev && !seen[d] {
			return i + 1
		}
		seen[d] = true
		for bytes.HasPrefix(rest, []byte("- ")) { // an item: its mapping is indented after the dash
			n := len(rest)
			rest = bytes.TrimLeft(rest[1:], " ")
			d += n - len(rest)
			seen[d] = true
		}
		prev = d
	}
	return 0
}

// blank empties line n (1-based) of lines, or, when it is already empty,
// the nearest non-empty line before it, together with the lines below it
// indented deeper (its block, which would otherwise be read as a child of
// whatever precedes it). Newlines are kept, so that later lines keep their
// numbers. It reports whether a line was blanked.
func blank(lines [][]byte, n int) bool {
	i := min(n, len(lines)) - 1
	for i >= 0 && len(bytes.TrimSpace(lines[i])) == 0 {
		i--
	}
	if i < 0 {
		return false
	}
	depth := indent(lines[i])
	blankLine(lines, i)
	for j := i + 1; j < len(lines); j++ {
		if len(bytes.TrimSpace(lines[j])) == 0 {
			continue
		}
		if indent(lines[j]) <= depth {
			break
		}
		blankLine(lines, j)
	}
	return true
}

// indent is the width of a line's leading blanks (a tab counts as one).
func indent(line []byte) int { return len(line) - len(bytes.TrimLeft(line, " \t")) }

// blankLine empties lines[i], keeping its newline.
func blankLine(lines [][]byte, i int) {
	if bytes.HasSuffix(lines[i], []byte("\n")) {
		lines[i] = []byte("\n")
	} else {
		lines[i] = nil
	}
}

// LimitAliases adds a problem to errs where the document at root makes a
// decoder follow more than maxAliases alias references (*name), or repeat
// through them more than maxNodes nodes in all, at the line of the alias
// past the limit; it reads nothing past the first problem. A parser that
// refuses the file on it keeps a small file (or one near its size limit,
// whose big subtree a few aliases repeat) from costing much to decode.
func LimitAliases(errs *Errors, root *yaml.Node, maxAliases, maxNodes int) {
	b := &aliasBudget{errs: errs, max: maxAliases, maxNodes: maxNodes, stop: true, open: map[*yaml.Node]bool{}}
	b.walk(root)
}

type aliasBudget struct {
	errs *Errors
	max  int                 // alias references allowed
	seen int                 // alias references followed
	open map[*yaml.Node]bool // nodes being walked: an alias to one is a cycle
	// maxNodes, when not 0, bounds the nodes walked through aliases, and
	// outer is the outermost alias being walked; stop ends the walk at the
	// first problem (LimitAliases), where Parse reads the aliases past
	// the budget as null; over is set once the nodes passed maxNodes.
	maxNodes, nodes     int
	outer               *yaml.Node
	stop, stopped, over bool
}

func (b *aliasBudget) walk(n *yaml.Node) {
	if n == nil || b.open[n] || b.stopped {
		return
	}
	if b.outer != nil && b.maxNodes > 0 {
		if b.nodes++; b.nodes > b.maxNodes {
			b.errs.Addf(b.outer.Line, "alias references (*%s) repeat more than %d nodes; the file repeats itself too much", b.outer.Value, b.maxNodes)
			b.stopped, b.over = true, true
			return
		}
	}
	if n.Kind == yaml.AliasNode {
		if b.seen++; b.seen > b.max {
			if b.seen == b.max+1 {
				b.errs.Addf(n.Line, "more than %d alias references (*%s); the file repeats itself too much", b.max, n.Value)
			}
			if b.stop {
				b.stopped = true
				return
			}
			*n = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Line: n.Line, Column: n.Column}
			return
		}
	}
	b.open[n] = true
	if n.Kind == yaml.AliasNode {
		outer := b.outer == nil
		if outer {
			b.outer = n
		}
		b.walk(n.Alias)
		if outer {
			b.outer = nil
		}
	}
	for _, c := range n.Content {
		b.walk(c)
	}
	delete(b.open, n)
}

// Decode parses data (see Parse) and decodes its document with v's
// UnmarshalYAML, adding the problems to e. It reports whether data held a
// document.
func (e *Errors) Decode(data []byte, maxAliases int, v yaml.Unmarshaler) bool {
	root := Parse(e, data, maxAliases, 0)
	if root == nil {
		return false
	}
	e.Add(v.UnmarshalYAML(root))
	return true
}

// Line returns the line of the node at path below root: mapping keys
// (string) and list indexes (int). Where the path leaves the tree it gives
// the line of the deepest node found.
func Line(root *yaml.Node, path ...any) int {
	line, _ := find(root, path)
	return line
}

// Has reports whether the file holds the node at path below root (Line's
// path): a key given, even with an empty or zero value.
func Has(root *yaml.Node, path ...any) bool {
	_, found := find(root, path)
	return found
}

// find walks path below root: the line of the deepest node found, and
// whether the whole path was.
func find(root *yaml.Node, path []any) (line int, found bool) {
	n := root
	if n == nil {
		return 1, false
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line = n.Line
	for _, step := range path {
		var next *yaml.Node
		switch s := step.(type) {
		case string:
			if n.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(n.Content); i += 2 {
					if n.Content[i].Value == s {
						next = n.Content[i+1]
						line = n.Content[i].Line
						break
					}
				}
			}
		case int:
			if n.Kind == yaml.SequenceNode && s >= 0 && s < len(n.Content) {
				next = n.Content[s]
				line = next.Line
			}
		}
		if next == nil {
			return line, false
		}
		n = next
	}
	return line, true
}
