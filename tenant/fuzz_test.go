package tenant

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

func FuzzParseConfig(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yaml")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("tenants:\n  - name: a\n    selectors: [{kubernetes: {labels: {a: b}}}]\n"))
	f.Add([]byte("x: &a [*a]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig("f.yaml", data)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		names := map[string]bool{}
		for _, tn := range cfg.Tenants {
			if tn.Name == "" || tn.Name == Unassigned || names[tn.Name] || len(tn.Selectors) == 0 {
				t.Fatalf("accepted tenant %+v", tn)
			}
			names[tn.Name] = true
			if s := tn.SLO; s != nil && (s.Quantile <= 0 || s.Quantile >= 1 || s.Target <= 0 || s.Window <= 0) {
				t.Fatalf("accepted slo %+v", s)
			}
			if s := tn.Share; s != nil && s.Min > s.Max {
				t.Fatalf("accepted share %+v", s)
			}
		}
		// a valid configuration attributes without panicking
		b, err := NewBuilder(cfg, BuilderOptions{ProcRoot: "/nonexistent/proc"})
		if err != nil {
			t.Fatal(err)
		}
		_ = b.Build(sharedReadings(gpu.SharingTimeSlice, 1), gpu.SamplerStats{})
	})
}

func FuzzLatencyExposition(f *testing.F) {
	files, _ := filepath.Glob("testdata/latency/*.txt")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b, b)
		}
	}
	f.Fuzz(func(t *testing.T, first, second []byte) {
		srcs := []*LatencySource{
			{URL: "sim://a", Preset: PresetVLLME2E, Timeout: time.Second, MaxBytes: 1 << 20},
			{URL: "sim://a", Preset: PresetVLLME2E, Matchers: map[string]string{"model_name": "llama"}, Timeout: time.Second, MaxBytes: 1 << 20},
			{URL: "sim://a", Preset: PresetTGI, Timeout: time.Second, MaxBytes: 1 << 20},
			{URL: "sim://a", Preset: PresetTriton, Timeout: time.Second, MaxBytes: 1 << 20},
		}
		for _, src := range srcs {
			tr := newSLOTracker(&Tenant{Name: "x", LatencySource: src, SLO: &SLO{Quantile: 0.99, Target: 300 * time.Millisecond}}, Defaults{SLOWindow: time.Minute})
			for i, data := range [][]byte{first, second} {
				fams, err := parseExposition(data, expfmt.FmtText)
				if err != nil {
					continue
				}
				h, err := extract(src, fams)
				if err != nil {
					continue
				}
				for j := range h.bounds {
					if math.IsNaN(h.cum[j]) || (j > 0 && (h.bounds[j] <= h.bounds[j-1] || h.cum[j] < h.cum[j-1])) || h.cum[j] > h.count {
						t.Fatalf("bad histogram %+v", h)
					}
				}
				tr.observe(time.Unix(int64(15*i), 0), h)
			}
			st := tr.Status()
			if st.RequestsTotal < 0 || st.GoodRequestsTotal < 0 || st.GoodRequestsTotal > st.RequestsTotal+1e-6*math.Max(1, st.RequestsTotal) {
				t.Fatalf("counters %+v", st)
			}
			if a := st.Attainment; a != nil && (math.IsNaN(*a) || *a < 0 || *a > 1) {
				t.Fatalf("attainment %v", *a)
			}
			for q, v := range st.Quantiles {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("quantile %v = %v", q, v)
				}
			}
		}
	})
}

func FuzzParseProcCgroup(f *testing.F) {
	f.Add([]byte("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f2c3d4e_5a6b_4c7d_8e9f_a0b1c2d3e4f5.slice/cri-containerd-" + cid + ".scope\n"))
	f.Add([]byte("12:memory:/kubepods/burstable/pod" + puid + "/" + cid + "\n1:name=systemd:/\n"))
	f.Add([]byte("3:cpu:/docker/" + cid + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseProcCgroup(data)
		if err != nil {
			return
		}
		info := ParseCgroupPath(p)
		if info.Path != p || (info.PodUID != "" && !strings.Contains(strings.ToLower(strings.ReplaceAll(p, "_", "-")), info.PodUID)) {
			t.Fatalf("%q -> %+v", p, info)
		}
		if info.ContainerID != "" && !strings.Contains(strings.ToLower(p), info.ContainerID) {
			t.Fatalf("%q -> %+v", p, info)
		}
	})
}

func FuzzParsePodList(f *testing.F) {
	f.Add([]byte(`{"items":[{"metadata":{"name":"a","namespace":"n","uid":"U","labels":{"x":"y"}},"status":{"containerStatuses":[{"name":"c","containerID":"containerd://ab"}]}}]}`))
	f.Add([]byte(`{"items":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		metas, cids, err := parsePodList("f.json", data)
		if err != nil {
			return
		}
		for _, m := range metas {
			if m.UID == "" || m.Name == "" || m.UID != strings.ToLower(m.UID) {
				t.Fatalf("meta %+v", m)
			}
		}
		for id := range cids {
			if id == "" || strings.Contains(id, "://") {
				t.Fatalf("container id %q", id)
			}
		}
	})
}
