// Command calib turns the output of test/device/calibrate.sh (one "key
// value" line per figure) into the rows of docs/calibration.md: each
// measured figure next to what the simulator assumes.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
)

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "calib:", err)
		os.Exit(1)
	}
}

// parse reads "key value" lines; it names the line of a bad one.
func parse(r io.Reader) (map[string]float64, error) {
	m := map[string]float64{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 {
			return nil, fmt.Errorf("line %d: want \"key value\", got %q", n, sc.Text())
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", n, err)
		}
		m[f[0]] = v
	}
	return m, sc.Err()
}

// knee is the smallest active-thread fraction reaching 95% of the
// bandwidth at 100%.
func knee(m map[string]float64) (float64, bool) {
	full, ok := m["bw_fraction_100"]
	if !ok {
		return 0, false
	}
	var pcts []int
	for k := range m {
		if p, err := strconv.Atoi(strings.TrimPrefix(k, "bw_fraction_")); err == nil && strings.HasPrefix(k, "bw_fraction_") {
			pcts = append(pcts, p)
		}
	}
	sort.Ints(pcts)
	for _, p := range pcts {
		if m[fmt.Sprintf("bw_fraction_%d", p)] >= 0.95*full {
			return float64(p) / 100, true
		}
	}
	return 1, true
}

func run(r io.Reader, w io.Writer) error {
	m, err := parse(r)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "| Figure | Measured | Simulator assumes |")
	fmt.Fprintln(w, "|---|---|---|")
	if k, ok := knee(m); ok {
		fmt.Fprintf(w, "| bandwidth knee: active-thread fraction reaching 95%% of full bandwidth | %.2f | 0.50 (bwKneeSMs) |\n", k)
	}
	if a, p, t := m["mps_pair_alone"], m["mps_pair_each"], m["ts_pair_each"]; a > 0 && p > 0 && t > 0 {
		fmt.Fprintf(w, "| MPS: two bandwidth-bound clients, total over one alone | %.2f | 0.62 |\n", 2*p/a)
		fmt.Fprintf(w, "| MPS: two bandwidth-bound clients against time-slicing | %.2f | 0.70 |\n", p/t)
	}
	if d := m["timeslice_default_each"]; d > 0 {
		for _, l := range []string{"short", "medium", "long"} {
			if v, ok := m["timeslice_"+l+"_each"]; ok {
				fmt.Fprintf(w, "| time slice %s: each of two saturating tenants over default | %.3f | leads 2/10/30 ms |\n", l, v/d)
			}
		}
	}
	if v, ok := m["mps_restart_seconds"]; ok {
		fmt.Fprintf(w, "| MPS client restart (context creation to first kernel, no model load) | %.2f s | 5 s start time (lead) |\n", v)
	}
	return nil
}
