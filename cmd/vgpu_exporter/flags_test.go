package main

import (
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"

	"github.com/vgpu-exporter/vgpu_exporter/gpu"
)

func parseArgs(t testing.TB, args ...string) (*config, error) {
	t.Helper()
	app := kingpin.New("vgpu_exporter", "")
	app.Terminate(nil)
	c := addFlags(app)
	if _, err := app.Parse(args); err != nil {
		return nil, err
	}
	return c, c.validate()
}

func TestFlagDefaults(t *testing.T) {
	c, err := parseArgs(t)
	if err != nil {
		t.Fatal(err)
	}
	if c.Backend != "auto" || c.SimScenario != "h100-timeslice" || c.SampleInterval != time.Second ||
		c.TelemetryPath != "/metrics" || c.MaxRequests != 40 || c.LogLevel != "info" || c.LogFormat != "logfmt" ||
		c.ProcRoot != "/proc" || c.TenantsConfig != "" || c.DisableExporterMetrics || !c.PodTenancy.ByNamespace ||
		c.DepartedRetention != time.Hour {
		t.Fatalf("unexpected defaults: %+v", c)
	}
	if got := *c.Web.WebListenAddresses; len(got) != 1 || got[0] != ":9949" {
		t.Fatalf("default listen address %v", got)
	}
}

func TestFlagValidation(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" = valid
	}{
		{[]string{"--backend=sim"}, ""},
		{[]string{"--backend=nvml", "--backend.dcgm-exporter.url=http://localhost:9400/metrics"}, ""},
		{[]string{"--backend=gpu"}, "is not one of"},
		{[]string{"--sample.interval=0s"}, "--sample.interval must be positive"},
		{[]string{"--sample.interval=-1s"}, "--sample.interval must be positive"},
		{[]string{"--sample.interval=fast"}, "sample.interval"},
		{[]string{"--tuner.restore-timeout=0s"}, "--tuner.restore-timeout must be at least 1s, got 0s"},
		{[]string{"--tuner.restore-timeout=-1s"}, "--tuner.restore-timeout must be at least 1s, got -1s"},
		{[]string{"--tuner.restore-timeout=150s"}, ""},
		// a deadline spent before the restore begins: the exit logged
		// "original settings NOT restored" with nothing changed
		{[]string{"--tuner.restore-timeout=1ns"}, "--tuner.restore-timeout must be at least 1s, got 1ns"},
		{[]string{"--tuner.restore-timeout=999ms"}, "--tuner.restore-timeout must be at least 1s, got 999ms"},
		{[]string{"--tuner.restore-timeout=1s"}, ""},
		// at 1ns the rounds ran back to back, a core's worth, each on
		// the same sample: the sampler's floor is the tuner's
		{[]string{"--tuner.mode=recommend", "--tuner.interval=1ns"}, "--tuner.interval must be at least 100ms, got 1ns"},
		{[]string{"--tuner.mode=enforce", "--tuner.interval=99ms"}, "--tuner.interval must be at least 100ms, got 99ms"},
		{[]string{"--tuner.gpu-mode=0=recommend", "--tuner.interval=1ms"}, "--tuner.interval must be at least 100ms, got 1ms"},
		{[]string{"--tuner.mode=recommend", "--tuner.interval=100ms"}, ""},
		{[]string{"--tuner.mode=recommend", "--tuner.interval=1s", "--sample.interval=100ms"}, ""},
		// shorter than the sample interval: rounds between two samples
		// repeat the last, as a start with a long sample interval and the
		// default tuner interval always has
		{[]string{"--tuner.mode=recommend", "--sample.interval=30s"}, ""},
		// the tuner off, its interval is not used
		{[]string{"--tuner.interval=1ms"}, ""},
		{[]string{"--sample.interval=30s"}, ""},
		{[]string{"--web.max-requests=-1"}, "--web.max-requests"},
		{[]string{"--web.telemetry-path=metrics"}, "must start with /"},
		// a subtree's pattern: every path below it served metrics
		{[]string{"--web.telemetry-path=/metrics/"}, `--web.telemetry-path "/metrics/" ends in '/'`},
		{[]string{"--web.telemetry-path=/a/b"}, ""},
		{[]string{"--web.listen-address=127.0.0.1:9949", "--web.listen-address=vsock://:9949"}, ""},
		{[]string{"--web.listen-address="}, "--web.listen-address must not be empty"},
		{[]string{"--config.check=/t.yaml"}, ""},
		{[]string{"--config.check="}, "--config.check needs a file"},
		// Given empty (an unset variable), it would serve plain HTTP
		// without authentication; not given at all, it does by design.
		{[]string{"--web.config.file="}, "--web.config.file must not be empty"},
		{[]string{"--web.config.file", ""}, "--web.config.file must not be empty"},
		{[]string{"--web.config.file=/w.yml"}, ""},
		// Given empty (an unset variable), every usage would go to
		// unassigned on a real host; not given at all, it does by design.
		{[]string{"--tenants.config="}, "--tenants.config must not be empty"},
		{[]string{"--backend=sim", "--tenants.config", ""}, "--tenants.config must not be empty"},
		{[]string{"--tenants.config=/t.yaml"}, ""},
		{[]string{"--web.listen-address=127.0.0.1:9949", "--web.listen-address="}, "--web.listen-address must not be empty"},
		{[]string{"--web.telemetry-path=/-/ready"}, "clashes with a built-in endpoint"},
		{[]string{"--web.telemetry-path=/tuner"}, "clashes with a built-in endpoint"},
		{[]string{"--backend=sim", "--backend.dcgm-exporter.url=http://x:9400/metrics"}, "--backend.dcgm-exporter.url: dcgm-exporter complements NVML readings; it cannot be used with --backend=sim"},
		// refused as the URL is, not taken and ignored
		{[]string{"--backend=sim", "--backend.dcgm-exporter.timeout=1s"}, "--backend.dcgm-exporter.timeout: dcgm-exporter complements NVML readings; it cannot be used with --backend=sim"},
		{[]string{"--backend=sim", "--backend.dcgm-exporter.max-age=1m"}, "--backend.dcgm-exporter.max-age: dcgm-exporter complements NVML readings; it cannot be used with --backend=sim"},
		{[]string{"--backend.dcgm-exporter.url=ftp://x/metrics"}, "scheme must be http or https"},
		{[]string{"--backend.dcgm-exporter.url=http:///metrics"}, "no host"},
		{[]string{"--backend.dcgm-exporter.url=http://x:9400/", "--backend.dcgm-exporter.timeout=0s"}, "timeout must be positive"},
		{[]string{"--backend.dcgm-exporter.url=http://x:9400/", "--backend.dcgm-exporter.max-age=0s"}, "max-age must be positive"},
		{[]string{"--proc.root="}, "--proc.root must not be empty"},
		{[]string{"--tenants.departed-retention=-1m"}, "--tenants.departed-retention must be 0 (keep for good) or positive, got -1m0s"},
		{[]string{"--tenants.departed-retention=0s"}, ""},
		{[]string{"--tenants.departed-retention=forever"}, "tenants.departed-retention"},
		{[]string{"--kubernetes.pod-metadata=/tmp/pods.json"}, "needs --kubernetes.pod-resources-socket"},
		{[]string{"--kubernetes.pod-metadata=http://127.0.0.1:10255/pods", "--kubernetes.pod-resources-socket=/var/lib/kubelet/pod-resources/kubelet.sock"}, ""},
		{[]string{"--kubernetes.pod-metadata=https://127.0.0.1:10250/pods", "--kubernetes.pod-resources-socket=/var/lib/kubelet/pod-resources/kubelet.sock",
			"--kubernetes.pod-metadata.bearer-token-file=/var/run/secrets/kubernetes.io/serviceaccount/token",
			"--kubernetes.pod-metadata.ca-file=/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"}, ""},
		{[]string{"--kubernetes.pod-metadata=http://127.0.0.1:10255/pods", "--kubernetes.pod-resources-socket=/var/lib/kubelet/pod-resources/kubelet.sock",
			"--kubernetes.pod-metadata.bearer-token-file=/tmp/token"}, "need an https:// --kubernetes.pod-metadata URL"},
		{[]string{"--kubernetes.pod-metadata.ca-file=/tmp/ca.crt"}, "need an https:// --kubernetes.pod-metadata URL"},
		// A URL no request could be made to is refused at start, not at
		// every refresh: an IPv6 node IP without brackets, as
		// https://$(NODE_IP):10250/pods renders on an IPv6 node.
		{[]string{"--kubernetes.pod-metadata=https://fd00:10:244::5:10250/pods", "--kubernetes.pod-resources-socket=/k.sock"}, `--kubernetes.pod-metadata: pod metadata URL "https://fd00:10:244::5:10250/pods": invalid port ":10:244::5:10250" after host (an IPv6 address goes in brackets`},
		{[]string{"--kubernetes.pod-metadata=https://[fd00:10:244::5]:10250/pods", "--kubernetes.pod-resources-socket=/k.sock"}, ""},
		{[]string{"--kubernetes.pod-metadata=https:///pods", "--kubernetes.pod-resources-socket=/k.sock"}, "--kubernetes.pod-metadata: pod metadata URL \"https:///pods\": no host"},
		{[]string{"--kubernetes.pod-metadata=http://node:99999/pods", "--kubernetes.pod-resources-socket=/k.sock"}, "port 99999 is not from 1 to 65535"},
		// kubelet: the kubelet's /pods at an address of any family.
		{[]string{"--kubernetes.pod-metadata=kubelet", "--kubernetes.pod-metadata.kubelet-address=10.0.0.5", "--kubernetes.pod-resources-socket=/k.sock",
			"--kubernetes.pod-metadata.bearer-token-file=/var/run/secrets/kubernetes.io/serviceaccount/token",
			"--kubernetes.pod-metadata.ca-file=/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"}, ""},
		{[]string{"--kubernetes.pod-metadata=kubelet", "--kubernetes.pod-metadata.kubelet-address=fd00:10:244::5", "--kubernetes.pod-resources-socket=/k.sock"}, ""},
		{[]string{"--kubernetes.pod-metadata=kubelet", "--kubernetes.pod-resources-socket=/k.sock"}, "--kubernetes.pod-metadata=kubelet needs a --kubernetes.pod-metadata.kubelet-address: no kubelet address"},
		{[]string{"--kubernetes.pod-metadata=kubelet", "--kubernetes.pod-metadata.kubelet-address=fd00::5:10250:10250", "--kubernetes.pod-resources-socket=/k.sock"}, "an IPv6 address with a port goes in brackets"},
		{[]string{"--kubernetes.pod-metadata=/pods.json", "--kubernetes.pod-metadata.kubelet-address=10.0.0.5", "--kubernetes.pod-resources-socket=/k.sock"}, `--kubernetes.pod-metadata.kubelet-address is used only with --kubernetes.pod-metadata=kubelet, not "/pods.json"`},
		{[]string{"--tenants.kubernetes-default=off", "--kubernetes.pod-resources-socket=/k.sock"}, ""},
		{[]string{"--tenants.kubernetes-default=off"}, "--tenants.kubernetes-default=off needs --kubernetes.pod-resources-socket"},
		{[]string{"--tenants.kubernetes-default=namespace"}, "--tenants.kubernetes-default=namespace needs --kubernetes.pod-resources-socket"},
		{[]string{"--kubernetes.pod-info"}, "--kubernetes.pod-info needs --kubernetes.pod-resources-socket"},
		{[]string{"--kubernetes.pod-info", "--kubernetes.pod-resources-socket=/k.sock"}, ""},
		{[]string{"--kubernetes.pod-info", "--kubernetes.pod-resources-socket=/k.sock", "--kubernetes.pod-info.max-series=0"}, "max-series of 1 or more, got 0"},
		{[]string{"--kubernetes.pod-info.max-series=x"}, "--kubernetes.pod-info.max-series"},
		{[]string{"--tenants.kubernetes-default=pod"}, `--tenants.kubernetes-default: "pod" is not one of namespace, label:KEY, off`},
		{[]string{"--tenants.kubernetes-default=label:a b"}, "--tenants.kubernetes-default: \"label:a b\": \"a b\" is not a pod label key"},
		{[]string{"--tenants.kubernetes-default=label:team", "--kubernetes.pod-resources-socket=/k.sock"}, "needs --kubernetes.pod-metadata"},
		{[]string{"--tenants.kubernetes-default=label:team", "--kubernetes.pod-resources-socket=/k.sock", "--kubernetes.pod-metadata=/pods.json"}, ""},
		{[]string{"--log.level=trace"}, "is not one of"},
		{[]string{"--log.format=text"}, "is not one of"},
		{[]string{"--sim.seed=abc"}, "sim.seed"},
		{[]string{"--backend=sim", "--sim.scenario=h200-mig", "--sim.seed=7"}, ""},
		{[]string{"--sim.scenario=h200-mig"}, "--sim.scenario is used only with --backend=sim, not --backend=auto"},
		{[]string{"--backend=nvml", "--sim.seed=7"}, "--sim.seed is used only with --backend=sim, not --backend=nvml"},
		{[]string{"--metering.currency=USD", "--metering.price-per-gpu-hour=2.5", "--metering.price-per-kwh=0.12"}, ""},
		{[]string{"--metering.currency=EUR", "--metering.price-per-kwh=0"}, ""},
		{[]string{"--metering.price-per-gpu-hour=2.5"}, "--metering.currency is needed with a price"},
		{[]string{"--metering.currency=USD"}, "--metering.currency USD gives no price"},
		{[]string{"--metering.currency=dollar", "--metering.price-per-kwh=0.1"}, `--metering.currency "dollar" is not an ISO 4217 code`},
		{[]string{"--metering.currency=USD", "--metering.price-per-kwh=-0.1"}, "--metering.price-per-kwh must be a number, 0 or more, got -0.1"},
		{[]string{"--metering.currency=USD", "--metering.price-per-kwh=NaN"}, "--metering.price-per-kwh must be a number, 0 or more, got NaN"},
		{[]string{"--metering.currency=USD", "--metering.price-per-gpu-hour=Inf"}, "--metering.price-per-gpu-hour must be a number, 0 or more, got +Inf"},
		{[]string{"--metering.currency=USD", "--metering.price-per-gpu-hour=2,5"}, `--metering.price-per-gpu-hour: "2,5" is not a number`},
		// Several problems are all reported.
		{[]string{"--sample.interval=0s", "--web.max-requests=-3"}, "--web.max-requests"},
	} {
		_, err := parseArgs(t, tc.args...)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: unexpected error %v", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}

// TestFlagErrorsNameTheProblem: where a flag needs two things, its error
// names the one missing, not a value given right.
func TestFlagErrorsNameTheProblem(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		want, not string
	}{
		{[]string{"--kubernetes.pod-info"}, "--kubernetes.pod-info needs --kubernetes.pod-resources-socket", "max-series"},
		{[]string{"--kubernetes.pod-info", "--kubernetes.pod-resources-socket=/k.sock", "--kubernetes.pod-info.max-series=0"}, "max-series of 1 or more, got 0", "pod-resources-socket"},
	} {
		_, err := parseArgs(t, tc.args...)
		switch {
		case err == nil || !strings.Contains(err.Error(), tc.want):
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
		case strings.Contains(err.Error(), tc.not):
			t.Errorf("%v: error %q names %q, which is not what is wrong", tc.args, err, tc.not)
		}
	}
}

// The builder keeps the meters of a tenant that left a GPU for
// --tenants.departed-retention.
func TestDepartedRetentionWired(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{nil, time.Hour},
		{[]string{"--tenants.departed-retention=0s"}, 0},
		{[]string{"--tenants.departed-retention=15m"}, 15 * time.Minute},
	} {
		c, err := parseArgs(t, tc.args...)
		if err != nil {
			t.Fatal(err)
		}
		opts, err := builderIO(c, nil, gpu.NewManualClock(time.Unix(0, 0)), log.NewNopLogger())
		if err != nil {
			t.Fatal(err)
		}
		if opts.DepartedRetention != tc.want {
			t.Errorf("%v: the builder keeps departed tenants %s, want %s", tc.args, opts.DepartedRetention, tc.want)
		}
	}
}

// The builder reads the latency sources of the tenants running on this
// host alone unless --tenants.latency-sources=all.
func TestLatencySourcesWired(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, true},
		{[]string{"--tenants.latency-sources=running"}, true},
		{[]string{"--tenants.latency-sources=all"}, false},
	} {
		c, err := parseArgs(t, tc.args...)
		if err != nil {
			t.Fatal(err)
		}
		opts, err := builderIO(c, nil, gpu.NewManualClock(time.Unix(0, 0)), log.NewNopLogger())
		if err != nil {
			t.Fatal(err)
		}
		if opts.SourcesWhereRunning != tc.want {
			t.Errorf("%v: SourcesWhereRunning %v, want %v", tc.args, opts.SourcesWhereRunning, tc.want)
		}
	}
	if _, err := parseArgs(t, "--tenants.latency-sources=some"); err == nil || !strings.Contains(err.Error(), "tenants.latency-sources") {
		t.Errorf("--tenants.latency-sources=some: error %v, want one naming the flag", err)
	}
}

// TestFlagURLSecretsNotInErrors: the errors about a --backend.dcgm-exporter.url
// or --kubernetes.pod-metadata URL quote it with its password and query
// values masked, url.Parse's reason included.
func TestFlagURLSecretsNotInErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--backend.dcgm-exporter.url=ftp://scraper:hunter2@h/metrics?token=s3cr3t"}, `"ftp://scraper:xxxxx@h/metrics?token=xxxxx": scheme must be http or https`},
		{[]string{"--backend.dcgm-exporter.url=http://scraper:hunter2@/metrics?token=s3cr3t"}, `"http://scraper:xxxxx@/metrics?token=xxxxx": no host`},
		{[]string{"--backend.dcgm-exporter.url=http://scraper:hunt/er2@h/metrics?token=s3cr3t"}, `"http://scraper:xxxxx@h/metrics?token=xxxxx": invalid port "xxxxx" after host`},
		{[]string{"--kubernetes.pod-metadata=https://reader:hunter2@node:99999/pods?token=s3cr3t", "--kubernetes.pod-resources-socket=/k.sock"}, `"https://reader:xxxxx@node:99999/pods?token=xxxxx": port 99999`},
		{[]string{"--kubernetes.pod-metadata=http://reader:hunter2@node/pods?token=s3cr3t", "--kubernetes.pod-resources-socket=/k.sock",
			"--kubernetes.pod-metadata.bearer-token-file=/tmp/token"}, `URL, got "http://reader:xxxxx@node/pods?token=xxxxx"`},
		{[]string{"--kubernetes.pod-metadata=https://reader:hunter2@node/pods?token=s3cr3t", "--kubernetes.pod-resources-socket=/k.sock",
			"--kubernetes.pod-metadata.kubelet-address=10.0.0.5"}, `not "https://reader:xxxxx@node/pods?token=xxxxx"`},
	} {
		_, err := parseArgs(t, tc.args...)
		if err == nil {
			t.Fatalf("%v: no error", tc.args)
		}
		if msg := err.Error(); strings.Contains(msg, "hunt") || strings.Contains(msg, "er2") || strings.Contains(msg, "s3cr3t") || !strings.Contains(msg, tc.want) {
			t.Errorf("%v: error %v, want no secret and %q", tc.args, err, tc.want)
		}
	}
}
