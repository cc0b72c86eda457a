package sim

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestZZExplore(t *testing.T) {
	if os.Getenv("EXPLORE") == "" {
		t.Skip()
	}
	files, _ := filepath.Glob("../test/scenarios/*.yaml")
	for _, f := range files {
		if filepath.Ext(f) != ".yaml" || len(f) > 12 && f[len(f)-13:] == ".tenants.yaml" {
			continue
		}
		sc, err := LoadScenario(f)
		if err != nil {
			fmt.Println(f, err)
			continue
		}
		s, _ := New(sc, Options{})
		st := time.Now()
		fmt.Printf("== %s (%v)\n", sc.Name, sc.Duration)
		for k := 0; k < 2; k++ {
			s.AdvanceTo(s.Now().Add(sc.Duration / 2))
			w := s.Window()
			for _, tw := range w.Tenants {
				n := len(tw.Latencies)
				if n == 0 {
					fmt.Printf("  %-12s none oom=%d drop=%d\n", tw.Tenant, tw.OOMs, tw.Dropped)
					continue
				}
				fmt.Printf("  %-12s n=%6d p50=%9v p99=%9v good=%.3f(%v) sm=%.3f bw=%.3f drop=%d oom=%d\n", tw.Tenant, n, tw.Latencies[n/2].Round(time.Microsecond), tw.Latencies[n*99/100].Round(time.Microsecond), float64(tw.Good)/float64(n), tw.SLOTarget, tw.SMShare, tw.BWShare, tw.Dropped, tw.OOMs)
			}
			for _, g := range w.GPUs {
				fmt.Printf("  gpu%d sm=%.3f dram=%.3f P=%.0f clk=%.0f\n", g.Index, g.SMActive, g.DRAMActive, g.PowerW, g.SMClockMHz)
			}
		}
		fmt.Println("  wall", time.Since(st))
	}
}
