package tenant

import (
	"os"
	"strings"
	"testing"
)

// TestDocsFileFormatExample: the example of docs/tenants.md's "File
// format", which readers copy, is a valid tenants file.
func TestDocsFileFormatExample(t *testing.T) {
	doc, err := os.ReadFile("../docs/tenants.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "## File format\n")
	if !ok {
		t.Fatal(`docs/tenants.md has no "## File format"`)
	}
	_, rest, ok = strings.Cut(rest, "```yaml\n")
	example, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal(`docs/tenants.md's "File format" has no yaml block`)
	}
	if _, err := ParseConfig("docs/tenants.md example", []byte(example)); err != nil {
		t.Errorf("the example of docs/tenants.md's File format is not a valid tenants file: %v", err)
	}
}
