// Package e2e holds the end-to-end test: the real vgpu_exporter binary on a
// simulator scenario, scraped by a real Prometheus server, with the scrape
// checked by promtool. It is built only with the e2e tag (make e2e), needs
// the prometheus binary (Debian package prometheus) and skips without it,
// except under CI=true where a missing prometheus is a failure. The /tuner
// page is loaded in headless Chromium (Debian package chromium), with the
// same rule when it is missing. The dashboards' panels, built from the
// mixin with the event panels' step at the test's scrape interval (1s),
// are queried against exporters on the simulator and the mixin's
// recording rules (dashboards_test.go).
package e2e
