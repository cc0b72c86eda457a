package main

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"

	"github.com/vgpu-exporter/vgpu_exporter/httplimit"
	"github.com/vgpu-exporter/vgpu_exporter/internal/flagvalue"
	"github.com/vgpu-exporter/vgpu_exporter/internal/urlmask"
	"github.com/vgpu-exporter/vgpu_exporter/kube"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
	"github.com/vgpu-exporter/vgpu_exporter/webui"
)

// defaultPort is the exporter's default TCP port. It clashes neither with
// dcgm-exporter (9400) nor with nvidia_gpu_exporter (9835), and is not in
// the Prometheus default port allocation list as far as we could check.
const defaultPort = 9949

// Backend names accepted by --backend.
const (
	backendAuto = "auto"
	backendSim  = "sim"
	backendNVML = "nvml"
)

// Values of --tenants.latency-sources.
const (
	latencySourcesRunning = "running"
	latencySourcesAll     = "all"
)

// defaultScenario is the built-in scenario --backend=sim runs by default.
const defaultScenario = "h100-timeslice"

// minSampleInterval is the shortest --sample.interval: each sample walks
// every GPU, process and tenant, and shorter intervals only burn CPU. It
// is the shortest --tuner.interval too (tunerConfig.validate).
const minSampleInterval = 100 * time.Millisecond

// minRestoreTimeout is the shortest --tuner.restore-timeout: the restore
// at exit sets back and closes within it (a journal synced, actuators
// closed), and one cut short says the settings were not restored.
const minRestoreTimeout = time.Second

// config is everything the command line sets.
type config struct {
	Backend            string
	SimScenario        string
	SimSeed            int64
	SimSettingsFile    string
	TenantsConfig      string
	TenantsAllowEmpty  bool
	ConfigCheck        string
	SampleInterval     time.Duration
	DCGMExporterURL    string
	DCGMTimeout        time.Duration
	DCGMMaxAge         time.Duration
	PodResourcesSocket string
	PodMetadata        string
	PodMetadataToken   string
	PodMetadataCA      string
	KubeletAddress     string
	PodTenancy         tenant.PodTenancy
	PodInfo            bool
	PodInfoMaxSeries   int64
	ProcRoot           string
	DepartedRetention  time.Duration
	LatencySources     string

	Actuators actuatorConfig
	Metering  meteringConfig

	Web                    *web.FlagConfig
	TelemetryPath          string
	DisableExporterMetrics bool
	MaxRequests            int64
	ReadHeaderTimeout      time.Duration
	IdleTimeout            time.Duration
	MaxConnections         int64

	LogLevel  string
	LogFormat string

	Tuner tunerConfig

	// Whether --sim.scenario and --sim.seed were given.
	simScenarioSet, simSeedSet bool
	podTenancySet              bool
	configCheckSet             bool
	tenantsConfigSet           bool
	webConfigSet               bool

	// Whether --backend.dcgm-exporter.timeout and .max-age were given.
	dcgmTimeoutSet, dcgmMaxAgeSet bool
}

// addFlags declares the exporter's flags on app and returns the config they
// fill in when app parses a command line.
func addFlags(app *kingpin.Application) *config {
	c := &config{}
	flagvalue.Enum(app, "backend", "Where GPU readings come from: auto (NVML when the driver loads, otherwise exit), nvml, or sim (the built-in simulator).",
		backendAuto, &c.Backend, backendAuto, backendSim, backendNVML)
	app.Flag("sim.scenario", "Scenario the simulator runs (--backend=sim only): a file path or the name of a built-in scenario.").
		Default(defaultScenario).IsSetByUser(&c.simScenarioSet).StringVar(&c.SimScenario)
	flagvalue.Int64(app, "sim.seed", "Random seed of the simulator (--backend=sim only); the same seed gives the same run. 0 keeps the scenario's own seed.", "0", &c.SimSeed).
		IsSetByUser(&c.simSeedSet)
	app.Flag("sim.settings-file", "File in which the simulated GPUs keep the settings changed through them, so that they outlive the process as a real GPU's do (--backend=sim only; crash tests of the tuner's restore). Default: none.").
		PlaceHolder("FILE").StringVar(&c.SimSettingsFile)
	app.Flag("tenants.config", "Tenants file (YAML). Default: none, so all usage is reported as unassigned; with --backend=sim, the scenario's <name>.tenants.yaml companion. Given empty, refused.").
		PlaceHolder("FILE").IsSetByUser(&c.tenantsConfigSet).StringVar(&c.TenantsConfig)
	app.Flag("tenants.allow-empty", "Accept a tenants file that defines no tenants, at start and on reload. Without it such a file is refused: on reload the previous configuration stays in use.").
		BoolVar(&c.TenantsAllowEmpty)
	flagvalue.Duration(app, "tenants.departed-retention", fmt.Sprintf("How long the meters (energy, GPU time, memory time, cost) and context-switch count of a tenant without usage on a GPU are kept: then forgotten, and a tenant back after that starts them at 0 (a counter reset). The time a GPU is not read does not count; for a tenant of pods, the time counts up to the kubelet's last good pod mapping (pod-resources, and pod metadata where labels decide the tenant). At most %d such tenants a GPU are kept, the longest gone forgotten first. 0 keeps them for good (every tenant ever seen: with a tenant a batch job, series without end).", tenant.MaxDepartedPerGPU),
		"1h", &c.DepartedRetention)
	flagvalue.Enum(app, "tenants.latency-sources", "Which tenants' latency sources this exporter reads and serves: running (those of the tenants with usage on this host's GPUs within their SLO window, so that one tenants file given to every host has each source read on its tenant's host alone) or all (every source of the file, on every host).",
		latencySourcesRunning, &c.LatencySources, latencySourcesRunning, latencySourcesAll)
	app.Flag("config.check", "Validate this tenants file (and the --metering.* flags), print every error, or the prices in use, and exit (0 when valid, 1 otherwise).").
		PlaceHolder("FILE").IsSetByUser(&c.configCheckSet).StringVar(&c.ConfigCheck)
	flagvalue.Duration(app, "sample.interval", "How often the GPUs are sampled.", "1s", &c.SampleInterval)
	app.Flag("backend.dcgm-exporter.url", "URL of a running dcgm-exporter's /metrics whose DCGM profiling fields complement NVML readings (nvml backend only).").
		PlaceHolder("URL").StringVar(&c.DCGMExporterURL)
	flagvalue.Duration(app, "backend.dcgm-exporter.timeout", "Timeout of one dcgm-exporter scrape; keep it below --sample.interval, which a slow answer within it delays (nvml backend only).", "500ms", &c.DCGMTimeout).
		IsSetByUser(&c.dcgmTimeoutSet)
	flagvalue.Duration(app, "backend.dcgm-exporter.max-age", "Oldest a dcgm-exporter series whose line carries a timestamp may be; older ones are left out of the readings (nvml backend only).", "1m", &c.DCGMMaxAge).
		IsSetByUser(&c.dcgmMaxAgeSet)
	app.Flag("kubernetes.pod-resources-socket", "Kubelet pod-resources socket used to map GPUs to pods, e.g. /var/lib/kubelet/pod-resources/kubelet.sock. Default: no pod mapping.").
		PlaceHolder("PATH").StringVar(&c.PodResourcesSocket)
	app.Flag("kubernetes.pod-metadata", "Pod metadata (labels, UIDs, container IDs) for labels selectors: a file or an http(s) URL serving a PodList in JSON (the kubelet's /pods, or the API server's pods of the node); or "+kube.KubeletPods+": the kubelet's https://ADDRESS/pods at --kubernetes.pod-metadata.kubelet-address. Default: none.").
		PlaceHolder("FILE|URL|" + kube.KubeletPods).StringVar(&c.PodMetadata)
	app.Flag("kubernetes.pod-metadata.kubelet-address", "With --kubernetes.pod-metadata="+kube.KubeletPods+", the kubelet's address: an IP address (IPv4, or IPv6 bare or in brackets) or a host name, with an optional port (an IPv6 address's in brackets: [fd00::5]:10250). Default port: 10250. In a pod, the node's status.hostIP.").
		PlaceHolder("HOST[:PORT]").StringVar(&c.KubeletAddress)
	app.Flag("kubernetes.pod-metadata.bearer-token-file", "File holding the bearer token sent to an https --kubernetes.pod-metadata URL (the kubelet's /pods needs one: a service account token, /var/run/secrets/kubernetes.io/serviceaccount/token in a pod); read again on every request, so a rotated token is used at once. Default: none.").
		PlaceHolder("FILE").StringVar(&c.PodMetadataToken)
	app.Flag("kubernetes.pod-metadata.ca-file", "PEM file of the CA certificates that verify an https --kubernetes.pod-metadata server (the kubelet's serving certificate). Default: the system roots.").
		PlaceHolder("FILE").StringVar(&c.PodMetadataCA)
	app.Flag("tenants.kubernetes-default", "With --kubernetes.pod-resources-socket, the tenant of a pod that no tenant of the tenants file matches (with no file, of every pod): namespace (its namespace), label:KEY (the value of its label KEY; needs --kubernetes.pod-metadata) or off (unassigned). Default: "+tenant.PodTenancyNamespace+".").
		Default(tenant.PodTenancyNamespace).PlaceHolder("namespace|label:KEY|off").IsSetByUser(&c.podTenancySet).SetValue(podTenancyValue{&c.PodTenancy})
	app.Flag("kubernetes.pod-info", "Serve vgpu_tenant_pod_info: each container the kubelet's pod-resources API assigns a GPU (or MIG instance), with its pod's tenant, namespace, pod and container, to join tenant series on (needs --kubernetes.pod-resources-socket; a series per pod, so new series with every rollout). Default: off.").
		BoolVar(&c.PodInfo)
	flagvalue.Int64(app, "kubernetes.pod-info.max-series", "With --kubernetes.pod-info, at most this many vgpu_tenant_pod_info series; allocations beyond are left out, counted in vgpu_tenant_pod_info_dropped_total and logged.", strconv.Itoa(tenant.DefaultPodInfoMaxSeries), &c.PodInfoMaxSeries)
	app.Flag("proc.root", "procfs mount point, used to map GPU processes to cgroups and to read their names.").
		Default("/proc").StringVar(&c.ProcRoot)
	addActuatorFlags(app, &c.Actuators)
	addMeteringFlags(app, &c.Metering)

	c.Web = kingpinflag.AddFlags(app, fmt.Sprintf(":%d", defaultPort))
	// exporter-toolkit declares it; whether it was given is asked of
	// kingpin, as of the exporter's own flags.
	app.GetFlag("web.config.file").IsSetByUser(&c.webConfigSet)
	app.Flag("web.telemetry-path", "Path at which to expose metrics: a clean URL path, not ending in '/'.").
		Default("/metrics").StringVar(&c.TelemetryPath)
	app.Flag("web.disable-exporter-metrics", "Exclude metrics about the exporter itself (promhttp_*, process_*, go_*, build info); the web configuration's vgpu_web_config_* (reloads, certificate expiry) are still served.").
		BoolVar(&c.DisableExporterMetrics)
	flagvalue.Int64(app, "web.max-requests", "Maximum number of scrapes rendering at once (a response is written outside its slot: a client that does not read holds none); requests beyond it get 503, counted in promhttp_metric_handler_requests_total{code=\"503\"}. Use 0 to disable. /tuner page requests have limits of their own, 2 for the HTML and 2 for the JSON (this where lower).", "40", &c.MaxRequests)
	flagvalue.Int64(app, "web.max-connections", "Maximum number of open HTTP connections; beyond it the longest-idle connection is closed. Lowered to half the open-files limit when that is smaller. Use 0 to disable.", "256", &c.MaxConnections)
	flagvalue.Duration(app, "web.read-header-timeout", "Time a client has to send a request's headers; no request body is waited for past it either.", "10s", &c.ReadHeaderTimeout)
	flagvalue.Duration(app, "web.idle-timeout", "Time an idle keep-alive connection stays open.", "2m", &c.IdleTimeout)

	flagvalue.Enum(app, "log.level", "Only log messages with the given severity or above. One of: ["+strings.Join(logLevels, ", ")+"]",
		"info", &c.LogLevel, logLevels...)
	flagvalue.Enum(app, "log.format", "Output format of log messages. One of: ["+strings.Join(logFormats, ", ")+"]",
		"logfmt", &c.LogFormat, logFormats...)
	addTunerFlags(app, &c.Tuner)
	return c
}

// validate checks the combinations kingpin cannot check by itself. It
// returns every problem found, joined.
func (c *config) validate() error {
	var errs []error
	switch {
	case c.SampleInterval <= 0:
		errs = append(errs, fmt.Errorf("--sample.interval must be positive, got %s", c.SampleInterval))
	case c.SampleInterval < minSampleInterval:
		errs = append(errs, fmt.Errorf("--sample.interval must be at least %s, got %s", minSampleInterval, c.SampleInterval))
	}
	// An empty address would listen on every interface, on a port the
	// kernel picks: what an unset variable in a unit file gives.
	if slices.Contains(*c.Web.WebListenAddresses, "") {
		errs = append(errs, errors.New("--web.listen-address must not be empty (give HOST:PORT, :PORT or vsock://:PORT)"))
	}
	// Given empty (an unset variable), it would start the exporter
	// instead of checking a file.
	if c.configCheckSet && c.ConfigCheck == "" {
		errs = append(errs, errors.New("--config.check needs a file: the tenants file to validate"))
	}
	// Given empty (an unset variable), it would be taken for not given:
	// every usage unassigned on a real host, the scenario's companion
	// with --backend=sim.
	if c.tenantsConfigSet && c.TenantsConfig == "" {
		errs = append(errs, errors.New("--tenants.config must not be empty (give the tenants file, or leave the flag out to report all usage as unassigned)"))
	}
	// Given empty (an unset variable), exporter-toolkit would take it
	// for no configuration: plain HTTP without authentication.
	if c.webConfigSet && *c.Web.WebConfigFile == "" {
		errs = append(errs, errors.New("--web.config.file must not be empty (give the web configuration file, or leave the flag out for plain HTTP without authentication)"))
	}
	if c.MaxRequests < 0 {
		errs = append(errs, fmt.Errorf("--web.max-requests must be 0 (no limit) or more, got %d", c.MaxRequests))
	}
	if c.MaxConnections < 0 {
		errs = append(errs, fmt.Errorf("--web.max-connections must be 0 (no limit) or more, got %d", c.MaxConnections))
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"--web.read-header-timeout", c.ReadHeaderTimeout}, {"--web.idle-timeout", c.IdleTimeout}} {
		if f.d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", f.name, f.d))
		}
	}
	if !strings.HasPrefix(c.TelemetryPath, "/") {
		errs = append(errs, fmt.Errorf("--web.telemetry-path must start with /, got %q", c.TelemetryPath))
	}
	if i := strings.IndexFunc(c.TelemetryPath, notInPath); i >= 0 {
		r, _ := utf8.DecodeRuneInString(c.TelemetryPath[i:])
		errs = append(errs, fmt.Errorf("--web.telemetry-path %q holds %q: it must be a URL path without spaces, control characters, '?', '#', '{' or '}'", c.TelemetryPath, r))
	}
	if p := c.TelemetryPath; strings.HasPrefix(p, "/") && path.Clean(p) != strings.TrimSuffix(p, "/") && p != "/" {
		// the server redirects such a path to its clean form, where
		// nothing is served
		errs = append(errs, fmt.Errorf("--web.telemetry-path %q is not a clean path (no empty, '.' or '..' segments): requests for it are redirected to %q", p, path.Clean(p)))
	}
	if p := c.TelemetryPath; strings.HasSuffix(p, "/") && strings.TrimRight(p, "/") != "" {
		// a subtree's pattern: metrics at every path below it
		errs = append(errs, fmt.Errorf("--web.telemetry-path %q ends in '/': metrics would be served at every path below it; give %q", p, strings.TrimRight(p, "/")))
	}
	if reserved(path.Clean(c.TelemetryPath)) { // (a reserved path is clean)
		errs = append(errs, fmt.Errorf("--web.telemetry-path %q clashes with a built-in endpoint", c.TelemetryPath))
	}
	if c.Backend != backendSim {
		// Given with a real backend, they would be ignored: say so rather
		// than serve real data the user may take for the scenario's.
		for _, f := range []struct {
			name string
			set  bool
		}{{"--sim.scenario", c.simScenarioSet}, {"--sim.seed", c.simSeedSet}, {"--sim.settings-file", c.SimSettingsFile != ""}} {
			if f.set {
				errs = append(errs, fmt.Errorf("%s is used only with --backend=sim, not --backend=%s", f.name, c.Backend))
			}
		}
	}
	if c.Backend == backendSim {
		for _, f := range []struct {
			name string
			set  bool
		}{{"url", c.DCGMExporterURL != ""}, {"timeout", c.dcgmTimeoutSet}, {"max-age", c.dcgmMaxAgeSet}} {
			if f.set {
				errs = append(errs, fmt.Errorf("--backend.dcgm-exporter.%s: dcgm-exporter complements NVML readings; it cannot be used with --backend=sim", f.name))
			}
		}
	}
	if c.DCGMExporterURL != "" {
		// named as everywhere else: a password or query token masked
		shown := urlmask.DisplayURL(c.DCGMExporterURL)
		u, err := url.Parse(c.DCGMExporterURL)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("--backend.dcgm-exporter.url %q: %s", shown, urlmask.URLParseReason(c.DCGMExporterURL, err)))
		case u.Scheme != "http" && u.Scheme != "https":
			errs = append(errs, fmt.Errorf("--backend.dcgm-exporter.url %q: scheme must be http or https", shown))
		case u.Host == "":
			errs = append(errs, fmt.Errorf("--backend.dcgm-exporter.url %q: no host", shown))
		}
		if c.DCGMTimeout <= 0 {
			errs = append(errs, fmt.Errorf("--backend.dcgm-exporter.timeout must be positive, got %s", c.DCGMTimeout))
		}
		if c.DCGMMaxAge <= 0 {
			errs = append(errs, fmt.Errorf("--backend.dcgm-exporter.max-age must be positive, got %s", c.DCGMMaxAge))
		}
	}
	if c.podTenancySet && c.PodResourcesSocket == "" {
		errs = append(errs, fmt.Errorf("--tenants.kubernetes-default=%s needs --kubernetes.pod-resources-socket (it names the tenant of a pod the kubelet assigns a GPU; without the socket no usage is a pod's)", c.PodTenancy))
	}
	if c.PodMetadata != "" && c.PodResourcesSocket == "" {
		errs = append(errs, errors.New("--kubernetes.pod-metadata needs --kubernetes.pod-resources-socket (pods are found through the kubelet's GPU assignments)"))
	}
	switch {
	case c.PodMetadata == kube.KubeletPods:
		if _, err := kube.KubeletPodsURL(c.KubeletAddress); err != nil {
			errs = append(errs, fmt.Errorf("--kubernetes.pod-metadata=%s needs a --kubernetes.pod-metadata.kubelet-address: %w", kube.KubeletPods, err))
		}
	case c.KubeletAddress != "":
		errs = append(errs, fmt.Errorf("--kubernetes.pod-metadata.kubelet-address is used only with --kubernetes.pod-metadata=%s, not %q", kube.KubeletPods, kube.SourceName(c.PodMetadata)))
	case strings.HasPrefix(c.PodMetadata, "http://") || strings.HasPrefix(c.PodMetadata, "https://"):
		if err := kube.CheckPodMetadataURL(c.PodMetadata); err != nil {
			errs = append(errs, fmt.Errorf("--kubernetes.pod-metadata: %w", err))
		}
	}
	if (c.PodMetadataToken != "" || c.PodMetadataCA != "") && !strings.HasPrefix(c.PodMetadata, "https://") && c.PodMetadata != kube.KubeletPods {
		errs = append(errs, fmt.Errorf("--kubernetes.pod-metadata.bearer-token-file and --kubernetes.pod-metadata.ca-file need an https:// --kubernetes.pod-metadata URL, got %q", kube.SourceName(c.PodMetadata)))
	}
	if c.PodTenancy.Label != "" && c.PodResourcesSocket != "" && c.PodMetadata == "" {
		errs = append(errs, fmt.Errorf("--tenants.kubernetes-default=%s needs --kubernetes.pod-metadata (pod labels are not in the pod-resources API)", c.PodTenancy))
	}
	if c.PodInfo && c.PodResourcesSocket == "" {
		errs = append(errs, errors.New("--kubernetes.pod-info needs --kubernetes.pod-resources-socket (the containers and their GPUs come from the kubelet's pod-resources API)"))
	}
	if c.PodInfo && c.PodInfoMaxSeries < 1 {
		errs = append(errs, fmt.Errorf("--kubernetes.pod-info needs a --kubernetes.pod-info.max-series of 1 or more, got %d", c.PodInfoMaxSeries))
	}
	if c.DepartedRetention < 0 {
		errs = append(errs, fmt.Errorf("--tenants.departed-retention must be 0 (keep for good) or positive, got %s", c.DepartedRetention))
	}
	if c.ProcRoot == "" {
		errs = append(errs, errors.New("--proc.root must not be empty"))
	}
	if err := c.Tuner.validate(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.Actuators.validate()...)
	_, perrs := c.Metering.prices()
	errs = append(errs, perrs...)
	return errors.Join(errs...)
}

// notInPath reports whether r cannot stand in a --web.telemetry-path: the
// path is a ServeMux pattern, in which a space or tab ends a method,
// braces make a wildcard, and a '?' or '#' (or a control character) is
// never in a request's path.
func notInPath(r rune) bool {
	return unicode.IsSpace(r) || unicode.IsControl(r) || strings.ContainsRune("?#{}", r)
}

// reserved reports whether p is one of the paths the exporter serves itself.
func reserved(p string) bool {
	switch p {
	case "/", "/-/healthy", "/-/ready", "/-/reload", webui.TunerPagePath:
		return true
	}
	return false
}

// httpLimits returns the HTTP server's limits the flags set.
func (c *config) httpLimits() httplimit.Limits {
	return httplimit.Limits{ReadHeaderTimeout: c.ReadHeaderTimeout, IdleTimeout: c.IdleTimeout, MaxConnections: int(c.MaxConnections)}
}

// systemdSocket reports whether --web.systemd-socket is set: the server
// then listens on the sockets systemd passes, not the listen addresses.
func (c *config) systemdSocket() bool {
	return c.Web.WebSystemdSocket != nil && *c.Web.WebSystemdSocket
}

// podTenancyValue is the value of --tenants.kubernetes-default.
type podTenancyValue struct{ p *tenant.PodTenancy }

func (v podTenancyValue) Set(s string) error {
	t, err := tenant.ParsePodTenancy(s)
	if err != nil {
		return fmt.Errorf("--tenants.kubernetes-default: %w", err)
	}
	*v.p = t
	return nil
}

func (v podTenancyValue) String() string { return v.p.String() }
