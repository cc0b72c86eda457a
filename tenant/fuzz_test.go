package tenant

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	f.Add([]byte("tenants: [{name: a, selectors: [{uid: 1}]}]\nmetering: {currency: USD, price_per_gpu_hour: 2.5, price_per_kwh: 0.12}\n"))
	f.Add([]byte("metering: {currency: usd, price_per_kwh: -1}\n"))
	f.Add([]byte("tenants: [{name: a, priority: 99999999999, selectors: [{uid: 1}]}]\n"))
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
		if p := cfg.Metering; p != nil && p.Problems() != nil {
			t.Fatalf("accepted prices %+v: %v", p, p.Problems())
		}
		// a valid configuration attributes without panicking
		b, err := NewBuilder(cfg, BuilderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_ = b.Build(sharedReadings(gpu.SharingTimeSlice, 1), gpu.SamplerStats{})
	})
}

// Two namespace or label values never share a tenant (unless both are
// Unassigned's), and a valid name that begins as no spelt-out one is
// taken as it is.
func FuzzPodTenantName(f *testing.F) {
	for _, s := range [][2]string{{Unassigned, "unassigned_"}, {"a/b", "a_2fb"}, {"a_2fb/", "a/b/"}, {"team-a", "é"}, {"\x00x", "_00x"}, {"_00a_2fb", "a/b"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		na, nb := PodTenantName(a), PodTenantName(b)
		if na != Unassigned && !validName(na) {
			t.Fatalf("%q -> %q, no valid name", a, na)
		}
		if a != b && na == nb && na != Unassigned {
			t.Fatalf("%q and %q -> %q", a, b, na)
		}
		if a != Unassigned && validName(a) && !strings.HasPrefix(a, spelt) && na != a {
			t.Fatalf("%q -> %q", a, na)
		}
	})
}

// The value of --tenants.kubernetes-default reads back as it was given, and
// a label key it takes is a Kubernetes label key.
func FuzzParsePodTenancy(f *testing.F) {
	for _, s := range []string{"namespace", "off", "label:team", "label:app.kubernetes.io/part-of", "label:", "label:a b", "label:/x", "label:-a", "pod", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePodTenancy(s)
		if err != nil {
			if p != (PodTenancy{}) || !strings.Contains(err.Error(), fmt.Sprintf("%q", s)) {
				t.Fatalf("%q: %+v, %v (the error names the value)", s, p, err)
			}
			return
		}
		if p.String() != s || (p.Label != "" && (len(p.Label) > 316 || strings.ContainsAny(p.Label, " \t\n:"))) {
			t.Fatalf("%q -> %+v (%q)", s, p, p.String())
		}
		if q, err := ParsePodTenancy(p.String()); err != nil || q != p {
			t.Fatalf("%q -> %+v -> %+v, %v", s, p, q, err)
		}
	})
}
