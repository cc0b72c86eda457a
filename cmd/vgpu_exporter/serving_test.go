package main

import (
	"slices"
	"testing"
)

// The serving line names the URLs a user can open: https where the web
// configuration sets up TLS, and none with systemd socket activation,
// which listens where systemd says, not on --web.listen-address.
func TestServingPlaces(t *testing.T) {
	for _, tc := range []struct {
		name         string
		addrs        []string
		systemd, tls bool
		address      string
		bases        []string
	}{
		{"plain", []string{":9949"}, false, false, ":9949", []string{"http://localhost:9949"}},
		{"TLS", []string{"127.0.0.1:9949"}, false, true, "127.0.0.1:9949", []string{"https://127.0.0.1:9949"}},
		{"two, TLS", []string{":1", "[::1]:2"}, false, true, ":1,[::1]:2", []string{"https://localhost:1", "https://[::1]:2"}},
		{"vsock keeps its scheme", []string{"vsock://:3"}, false, true, "vsock://:3", []string{"vsock://:3"}},
		{"systemd socket", []string{":9949"}, true, false, "systemd socket activation (--web.systemd-socket)", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			address, bases := servingPlaces(tc.addrs, tc.systemd, tc.tls)
			if address != tc.address || !slices.Equal(bases, tc.bases) {
				t.Errorf("servingPlaces(%q, %v, %v) = %q, %q; want %q, %q", tc.addrs, tc.systemd, tc.tls, address, bases, tc.address, tc.bases)
			}
		})
	}
}
