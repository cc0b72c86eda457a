package dashjson

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type board struct {
	UID   string `json:"uid"`
	Title string `json:"title"`
}

func TestLoad(t *testing.T) {
	for _, tc := range []struct {
		name   string
		files  map[string]string
		titles []string
		err    string
	}{
		{name: "in name order", files: map[string]string{"b.json": `{"uid":"b","title":"B"}`, "a.json": `{"uid":"a","title":"A"}`, "c.txt": `x`}, titles: []string{"A", "B"}},
		{name: "none", files: map[string]string{"c.txt": `x`}, err: "no dashboards (*.json)"},
		{name: "no uid", files: map[string]string{"a.json": `{"title":"A"}`}, err: "a.json: no uid"},
		{name: "not JSON", files: map[string]string{"a.json": `{`}, err: "a.json: unexpected end of JSON input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for n, s := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, n), []byte(s), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Load(dir, func(b *board) string { return b.UID })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var titles []string
			for _, b := range got {
				titles = append(titles, b.Title)
			}
			if strings.Join(titles, ",") != strings.Join(tc.titles, ",") {
				t.Errorf("titles %v, want %v", titles, tc.titles)
			}
		})
	}
}
