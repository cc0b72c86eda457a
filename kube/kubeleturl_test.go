package kube_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/vgpu-exporter/vgpu_exporter/kube"
)

func TestKubeletPodsURL(t *testing.T) {
	for _, tc := range []struct{ addr, want, err string }{
		{"10.0.0.5", "https://10.0.0.5:10250/pods", ""},
		{"fd00:10:244::5", "https://[fd00:10:244::5]:10250/pods", ""},
		{"[fd00:10:244::5]", "https://[fd00:10:244::5]:10250/pods", ""},
		{"[fd00::5]:10443", "https://[fd00::5]:10443/pods", ""},
		{"10.0.0.5:10443", "https://10.0.0.5:10443/pods", ""},
		{"node-1.example", "https://node-1.example:10250/pods", ""},
		{"node-1:10250", "https://node-1:10250/pods", ""},
		{"", "", "no kubelet address"},
		{"[10.0.0.5]", "", "only an IPv6 address goes in brackets"},
		{"[node-1]", "", "only an IPv6 address goes in brackets"},
		{"fd00::5:10250:10250", "", "an IPv6 address with a port goes in brackets"},
		{"10.0.0.5:99999", "", "port 99999 is not from 1 to 65535"},
		{"10.0.0.5:", "", "empty port"},
		{":10250", "", "no host"},
		{"node/x", "", "not a host name or IP address"},
		{"user@node", "", "not a host name or IP address"},
		{"node?x", "", "not a host name or IP address"},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			got, err := kube.KubeletPodsURL(tc.addr)
			switch {
			case tc.err == "" && (err != nil || got != tc.want):
				t.Errorf("= %q, %v; want %q", got, err, tc.want)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("= %q, %v; want an error containing %q", got, err, tc.err)
			}
		})
	}
}

// A pod metadata URL no request could be made to is refused at start;
// KubeletPods reads the kubelet at KubeletAddress.
func TestPodMetadataSourceChecked(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "kubelet.sock")
	for _, tc := range []struct {
		name      string
		meta, adr string
		want      string // the source in use, or the error
		fails     bool
	}{
		{"IPv6 without brackets", "https://fd00:10:244::5:10250/pods", "", `"https://fd00:10:244::5:10250/pods": invalid port`, true},
		{"no host", "https://:10250/pods", "", "no host", true},
		{"port out of range", "http://node:70000/pods", "", "port 70000", true},
		{"IPv6 in brackets", "https://[fd00:10:244::5]:10250/pods", "", "https://[fd00:10:244::5]:10250/pods", false},
		{"kubelet on IPv4", kube.KubeletPods, "10.0.0.5", "https://10.0.0.5:10250/pods", false},
		{"kubelet on IPv6", kube.KubeletPods, "fd00:10:244::5", "https://[fd00:10:244::5]:10250/pods", false},
		{"kubelet without address", kube.KubeletPods, "", "no kubelet address", true},
		{"address for a file", "/run/pods.json", "10.0.0.5", "used only for pod metadata from the kubelet", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := kube.NewMapper(kube.Options{PodResourcesSocket: socket, PodMetadata: tc.meta, KubeletAddress: tc.adr})
			if tc.fails {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("err = %v, want one containing %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := m.Status().Metadata.Source; got != tc.want {
				t.Errorf("source %q, want %q", got, tc.want)
			}
		})
	}
}
