//go:build e2e

package e2e

import (
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestLoadSoak holds 1,000 concurrent scrapers on the exporter (default
// --web.max-requests) for 60 s and reports its idle and peak RSS (VmRSS,
// VmHWM) and the scrape times the clients saw. It measures, it asserts no
// figure but the generous memory cap of the load suite, and it runs only
// when VGPU_E2E_SOAK is set, to a duration ("1" means 60s):
//
//	VGPU_E2E_SOAK=60s go test -tags=e2e -run TestLoadSoak -v ./test/e2e/
func TestLoadSoak(t *testing.T) {
	soak := os.Getenv("VGPU_E2E_SOAK")
	if soak == "" {
		t.Skip("set VGPU_E2E_SOAK (e.g. 60s) to run the soak")
	}
	dur, err := time.ParseDuration(soak)
	if err != nil {
		dur = 60 * time.Second
	}
	const concurrent = 1000
	bin := buildExporter(t)
	addr := freeAddr(t)
	p := start(t, "exporter-soak", bin, "--backend=sim", "--sim.scenario=eight-gpu-hot", "--web.listen-address="+addr)
	base := "http://" + addr
	waitReady(t, p, base)
	time.Sleep(3 * time.Second) // a few samples in
	pid := p.cmd.Process.Pid
	idle := procStatusBytes(t, pid, "VmRSS")

	client := &http.Client{Timeout: waitFor, Transport: &http.Transport{MaxIdleConnsPerHost: concurrent}}
	var mu sync.Mutex
	codes := map[int]int{}
	var took []time.Duration
	end := time.Now().Add(dur)
	var wg sync.WaitGroup
	for range concurrent {
		wg.Go(func() {
			for time.Now().Before(end) {
				t0 := time.Now()
				code := 0
				if resp, err := client.Get(base + "/metrics"); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					code = resp.StatusCode
				}
				d := time.Since(t0)
				mu.Lock()
				codes[code]++
				if code == 200 {
					took = append(took, d)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	peak := procStatusBytes(t, pid, "VmHWM")
	slices.Sort(took)
	q := func(f float64) time.Duration {
		if len(took) == 0 {
			return 0
		}
		return took[int(f*float64(len(took)-1))]
	}
	t.Logf("soak: %d concurrent scrapers for %s: responses by status %v; 200s took p50 %s p99 %s; RSS idle %.1f MiB, peak (VmHWM) %.1f MiB",
		concurrent, dur, codes, q(0.5), q(0.99), float64(idle)/(1<<20), float64(peak)/(1<<20))
	if peak > loadMemoryCap {
		t.Errorf("peak RSS %d MiB over the cap of %d MiB", peak>>20, loadMemoryCap>>20)
	}
	if code, _, _ := get(base + "/metrics"); code != 200 {
		t.Errorf("scrape after the soak: %d", code)
	}
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
}
