package simrun

import (
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/vgpu-exporter/vgpu_exporter/sim/report"
	"github.com/vgpu-exporter/vgpu_exporter/tuner"
)

// FileDecisions is the policy decision log WriteFiles writes.
const FileDecisions = "decisions.csv"

// WriteFiles writes the run's report files (report.WriteFiles, in format)
// and its decisions into dir and returns their paths.
func (r *Result) WriteFiles(dir, format string) ([]string, error) {
	paths, err := report.WriteFiles(dir, r.Recorder, format)
	if err != nil {
		return nil, err
	}
	p := filepath.Join(dir, FileDecisions)
	if err := writeDecisions(p, r.Recorder.Meta().Start, r.Decisions); err != nil {
		return nil, err
	}
	return append(paths, p), nil
}

// writeDecisions writes the policy's decisions as CSV.
func writeDecisions(path string, start time.Time, decs []tuner.Decision) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"t_seconds", "gpu", "tenant", "knob", "from", "to", "applied", "reason"})
	for _, d := range decs {
		_ = w.Write([]string{strconv.FormatFloat(d.Time.Sub(start).Seconds(), 'g', -1, 64), d.GPU, d.Tenant,
			string(d.Knob), d.From, d.To, strconv.FormatBool(d.Applied), d.Reason})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}
