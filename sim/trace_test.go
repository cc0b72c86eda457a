package sim

import (
	"runtime"
	"strings"
	"testing"
)

const traceHead = "TIMESTAMP,ContextTokens,GeneratedTokens\n"

// TestTraceErrorLines: a trace's errors name the file's line, counting
// blank lines and the lines a quoted field spans, once: they named the
// record's count, and csv's own errors twice ("t.csv:3: record on line 6:
// wrong number of fields" for line 6).
func TestTraceErrorLines(t *testing.T) {
	for _, c := range []struct{ name, data, want string }{
		{"wrong field count after blank lines", traceHead + "\n\n2023-11-16 18:15:46,1,1\n\n1,2\n", "t.csv:6: wrong number of fields"},
		{"bad timestamp after blank lines", traceHead + "\n2023-11-16 18:15:46,1,1\n\n\nnoon,1,1\n", `t.csv:6: bad TIMESTAMP "noon"`},
		{"bad timestamp after a quoted field of three lines", "TIMESTAMP,ContextTokens,GeneratedTokens,note\n2023-11-16 18:15:46,1,1,\"a\nb\nc\"\nnoon,1,1,x\n", `t.csv:5: bad TIMESTAMP "noon"`},
		{"bad token count in a field that starts a line", "TIMESTAMP,note,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,\"a\nb\",x,1\n", `t.csv:3: bad token counts "x", "1"`},
		{"timestamps back after blank lines", traceHead + "2023-11-16 18:15:50,1,1\n\n\n2023-11-16 18:15:46,1,1\n", "t.csv:5: timestamps go backwards"},
		{"a quote out of place", traceHead + "\n2023-11-16 18:15:46,1,\"1\"x\n", `t.csv:3: extraneous or missing " in quoted-field (column`},
		{"a header after blank lines without the columns", "\n\na,b\n1,2\n", "t.csv:3: header must name TIMESTAMP"},
		{"a header with a quote out of place", "\nTIMESTAMP,Context\"Tokens\n", `t.csv:2: reading header: bare " in non-quoted-field (column`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseTrace("t.csv", strings.NewReader(c.data), 100)
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Fatalf("error %v, want one starting %q", err, c.want)
			}
			if strings.Count(err.Error(), "line") > 0 {
				t.Errorf("error %v names a line twice", err)
			}
		})
	}
}

// TestTraceRowBounded: a row over maxTraceRecordBytes is refused at the
// line it starts on before csv builds its fields, whether one line (of
// commas: csv built a field for each, 32 MiB of them took 3 GB) or many
// short lines joined by quoted fields; a row just within the bound loads.
func TestTraceRowBounded(t *testing.T) {
	commas := traceHead + "2023-11-16 18:15:46,1,1\n" + strings.Repeat(",", 4<<20) + "\n"
	quoted := "TIMESTAMP,ContextTokens,GeneratedTokens,note\n\n2023-11-16 18:15:46,1,1,x\n2023-11-16 18:15:47,1,1," + strings.Repeat("\"\n\",", 40<<10) + "x\n"
	for _, c := range []struct{ name, data, want string }{
		{"a line of commas", commas, "t.csv:3: a row longer than 65536 bytes"},
		{"quoted fields over many lines", quoted, "t.csv:4: a row longer than 65536 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := parseTrace("t.csv", strings.NewReader(c.data), 100)
			runtime.ReadMemStats(&after)
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("error %v, want one starting %q", err, c.want)
			}
			// a record of the bound's fields: a few MB
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
				t.Errorf("refusing it allocated %d MB", alloc>>20)
			}
		})
	}
	within := "TIMESTAMP,ContextTokens,GeneratedTokens,note\n2023-11-16 18:15:46,1,1," + strings.Repeat("x", maxTraceRecordBytes-30) + "\n2023-11-16 18:15:47,1,1,x\n"
	if tr, err := parseTrace("t.csv", strings.NewReader(within), 100); err != nil || len(tr.offsets) != 2 {
		t.Errorf("a row within the bound: %v", err)
	}
}
