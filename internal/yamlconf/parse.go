package yamlconf

import (
	"bytes"
	"errors"
	"io"

	"go.yaml.in/yaml/v3"
)

// Parse reads data, which must hold at most one YAML document, and returns
// its root node, or nil (and no problem) when the document is empty. Syntax
// errors and a second document are added to errs. Past maxAliases alias
// references (*name) in the file, counted as a decoder would follow them,
// the rest are reported once and read as null: aliases let a small file
// repeat a subtree any number of times.
func Parse(errs *Errors, data []byte, maxAliases int) *yaml.Node {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if !errors.Is(err, io.EOF) {
			errs.Add(err)
		}
		return nil
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		errs.Addf(extra.Line, "only one YAML document is allowed")
		return nil
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return nil
		}
		root = root.Content[0]
	}
	b := &aliasBudget{errs: errs, max: maxAliases, open: map[*yaml.Node]bool{}}
	b.walk(root)
	return root
}

type aliasBudget struct {
	errs *Errors
	max  int                 // alias references allowed
	seen int                 // alias references followed
	open map[*yaml.Node]bool // nodes being walked: an alias to one is a cycle
}

func (b *aliasBudget) walk(n *yaml.Node) {
	if n == nil || b.open[n] {
		return
	}
	if n.Kind == yaml.AliasNode {
		if b.seen++; b.seen > b.max {
			if b.seen == b.max+1 {
				b.errs.Addf(n.Line, "more than %d alias references (*%s); the file repeats itself too much", b.max, n.Value)
			}
			*n = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Line: n.Line, Column: n.Column}
			return
		}
	}
	b.open[n] = true
	if n.Kind == yaml.AliasNode {
		b.walk(n.Alias)
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
	root := Parse(e, data, maxAliases)
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
	n := root
	if n == nil {
		return 1
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := n.Line
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
			return line
		}
		n = next
	}
	return line
}
