package compose_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/matryer/is"
	"gopkg.in/yaml.v3"
)

// exporterMetrics are the series prometheus-nats-exporter's JetStream
// collector exports with -jsz=all, and their labels
// (nats-io/prometheus-nats-exporter, collector/jsz.go).
func exporterMetrics() map[string]metricFamily {
	server := []string{"server_id", "server_name", "cluster", "domain", "meta_leader", "is_meta_leader"}
	stream := append(slices.Clone(server), "account", "account_id", "stream_name", "stream_leader", "is_stream_leader")
	consumer := append(slices.Clone(stream), "consumer_name", "consumer_leader", "is_consumer_leader", "consumer_desc", "consumer_created")
	out := make(map[string]metricFamily)
	add := func(labels []string, names ...string) {
		for _, n := range names {
			ls := make(map[string]bool)
			for _, l := range labels {
				ls[l] = true
			}
			out[n] = metricFamily{labels: ls, where: "prometheus-nats-exporter"}
		}
	}
	add(server, "jetstream_server_jetstream_disabled", "jetstream_server_total_streams", "jetstream_server_total_consumers",
		"jetstream_server_total_messages", "jetstream_server_total_message_bytes", "jetstream_server_max_memory", "jetstream_server_max_storage")
	add(stream, "jetstream_stream_total_messages", "jetstream_stream_total_bytes", "jetstream_stream_first_seq",
		"jetstream_stream_last_seq", "jetstream_stream_consumer_count")
	add(consumer, "jetstream_consumer_delivered_consumer_seq", "jetstream_consumer_delivered_stream_seq",
		"jetstream_consumer_num_ack_pending", "jetstream_consumer_num_redelivered", "jetstream_consumer_num_waiting",
		"jetstream_consumer_num_pending", "jetstream_consumer_ack_floor_stream_seq", "jetstream_consumer_ack_floor_consumer_seq")
	add(nil, "up") // Prometheus's own, per target
	return out
}

// promConfig is the part of prometheus.yml the stack uses; decoding with
// KnownFields rejects a misspelt key.
type promConfig struct {
	Global struct {
		ScrapeInterval     string `yaml:"scrape_interval"`
		EvaluationInterval string `yaml:"evaluation_interval"`
	} `yaml:"global"`
	RuleFiles     []string     `yaml:"rule_files"`
	ScrapeConfigs []promScrape `yaml:"scrape_configs"`
}

type promScrape struct {
	JobName   string `yaml:"job_name"`
	BasicAuth *struct {
		UsernameFile string `yaml:"username_file"`
		PasswordFile string `yaml:"password_file"`
	} `yaml:"basic_auth"`
	StaticConfigs []struct {
		Targets []string          `yaml:"targets"`
		Labels  map[string]string `yaml:"labels"`
	} `yaml:"static_configs"`
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func readPrometheus(t *testing.T) promConfig {
	var c promConfig
	readYAML(t, filepath.Join("prometheus", "prometheus.yml"), &c)
	return c
}

func TestPrometheusScrapes(t *testing.T) {
	is := is.New(t)
	p := loadProject(t)
	c := readPrometheus(t)
	jobs := make(map[string][]string) // job → targets
	targetLabel := make(map[string]map[string]string)
	for _, sc := range c.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			jobs[sc.JobName] = append(jobs[sc.JobName], st.Targets...)
			for _, tg := range st.Targets {
				targetLabel[tg] = st.Labels
			}
		}
		if sc.JobName != "primeflow" {
			is.True(sc.BasicAuth == nil) // only the services need the admin credentials
			continue
		}
		// Every service's /metrics answers only with the admin Basic auth,
		// which Prometheus reads from the compose secrets.
		is.True(sc.BasicAuth != nil)                                       // the services' job sends Basic auth
		is.Equal(sc.BasicAuth.UsernameFile, "/run/secrets/admin_user")     // the user from a secret file
		is.Equal(sc.BasicAuth.PasswordFile, "/run/secrets/admin_password") // and the password too
	}

	var exporters []string
	for i := 1; i <= 3; i++ {
		exporters = append(exporters, fmt.Sprintf("nats-exporter-%d:7777", i))
	}
	is.Equal(jobs["nats"], exporters) // the three exporters, on their default port
	var services []string
	for _, s := range appServices {
		// /metrics is on OPS_ADDR where a service sets it (ingest: its
		// HTTP_ADDR serves the webhook alone), on HTTP_ADDR otherwise.
		addr := env(service(t, p, s), "OPS_ADDR")
		if addr == "" {
			addr = env(service(t, p, s), "HTTP_ADDR")
		}
		target := s + addr
		services = append(services, target)
		is.Equal(targetLabel[target]["service"], s) // each series says which service it came from
	}
	is.Equal(jobs["primeflow"], services) // every service's /metrics, on the port that serves it

	prom := service(t, p, "prometheus")
	var secrets []string
	for _, s := range prom.Secrets {
		secrets = append(secrets, s.Source)
		is.True(s.Mode != nil)                 // a mode set, not Compose's default (0400 in older releases)
		is.Equal(int64(*s.Mode), int64(0o444)) // readable by Prometheus's user (nobody)
	}
	is.Equal(secrets, []string{"admin_user", "admin_password"})                            // both secrets mounted (at /run/secrets/<name>)
	is.Equal(p.Secrets["admin_user"].Environment, "ADMIN_USER")                            // from the same variable the services use
	is.Equal(p.Secrets["admin_password"].Environment, "ADMIN_PASSWORD")                    // for both
	is.True(slices.Contains(prom.Command, "--config.file=/etc/prometheus/prometheus.yml")) // reads the mounted file
	mounted := false
	for _, v := range prom.Volumes {
		if v.Target == "/etc/prometheus/prometheus.yml" && filepath.Base(v.Source) == "prometheus.yml" {
			mounted = true
		}
	}
	is.True(mounted) // compose/prometheus/prometheus.yml is that file
}

type grafanaDatasources struct {
	APIVersion  int `yaml:"apiVersion"`
	Datasources []struct {
		Name      string         `yaml:"name"`
		UID       string         `yaml:"uid"`
		Type      string         `yaml:"type"`
		Access    string         `yaml:"access"`
		URL       string         `yaml:"url"`
		IsDefault bool           `yaml:"isDefault"`
		Editable  bool           `yaml:"editable"`
		JSONData  map[string]any `yaml:"jsonData"`
	} `yaml:"datasources"`
}

type grafanaProviders struct {
	APIVersion int `yaml:"apiVersion"`
	Providers  []struct {
		Name                  string `yaml:"name"`
		Folder                string `yaml:"folder"`
		Type                  string `yaml:"type"`
		DisableDeletion       bool   `yaml:"disableDeletion"`
		AllowUIUpdates        bool   `yaml:"allowUiUpdates"`
		UpdateIntervalSeconds int    `yaml:"updateIntervalSeconds"`
		Options               struct {
			Path                      string `yaml:"path"`
			FoldersFromFilesStructure bool   `yaml:"foldersFromFilesStructure"`
		} `yaml:"options"`
	} `yaml:"providers"`
}

func TestGrafanaProvisioning(t *testing.T) {
	is := is.New(t)
	p := loadProject(t)
	g := service(t, p, "grafana")
	mounts := make(map[string]string) // compose/… directory → container path
	for _, v := range g.Volumes {
		if v.Type == "bind" {
			rel, err := filepath.Rel(repoRoot(t), v.Source)
			is.NoErr(err) // a path in the repository
			mounts[filepath.ToSlash(rel)] = v.Target
			is.True(v.ReadOnly) // provisioning is read-only
		}
	}
	is.Equal(mounts["compose/grafana/provisioning"], "/etc/grafana/provisioning") // where Grafana looks for provisioning

	var ds grafanaDatasources
	readYAML(t, filepath.Join("grafana", "provisioning", "datasources", "prometheus.yml"), &ds)
	is.Equal(len(ds.Datasources), 1)                          // one datasource
	is.Equal(ds.Datasources[0].UID, "prometheus")             // the uid the dashboards name
	is.Equal(ds.Datasources[0].Type, "prometheus")            // a Prometheus
	is.Equal(ds.Datasources[0].URL, "http://prometheus:9090") // the stack's
	is.True(slices.Contains(p.ServiceNames(), "prometheus"))  // which exists

	var dp grafanaProviders
	readYAML(t, filepath.Join("grafana", "provisioning", "dashboards", "primeflow.yml"), &dp)
	is.Equal(len(dp.Providers), 1)                                               // one provider
	is.Equal(dp.Providers[0].Type, "file")                                       // from files
	is.Equal(dp.Providers[0].Options.Path, mounts["compose/grafana/dashboards"]) // where compose mounts compose/grafana/dashboards

	home := env(g, "GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH")
	is.True(strings.HasPrefix(home, dp.Providers[0].Options.Path+"/")) // the home dashboard is a provisioned one
	_, err := os.Stat(filepath.Join("grafana", "dashboards", filepath.Base(home)))
	is.NoErr(err) // and exists
}

// dashboard is the part of a Grafana dashboard JSON the checks read.
type dashboard struct {
	UID    string  `json:"uid"`
	Title  string  `json:"title"`
	Panels []panel `json:"panels"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
		RefID        string `json:"refId"`
		Datasource   *struct {
			UID string `json:"uid"`
		} `json:"datasource"`
	} `json:"targets"`
}

// dashboardFiles are the provisioned dashboards, compose/grafana/dashboards/*.json.
func dashboardFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("grafana", "dashboards", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("grafana/dashboards/*.json: %v", err)
	}
	for i, f := range files {
		files[i] = filepath.Base(f)
	}
	return files
}

// dashboardExprs is every query of every dashboard, one a line.
func dashboardExprs(t *testing.T) string {
	t.Helper()
	var exprs strings.Builder
	for _, file := range dashboardFiles(t) {
		for _, p := range readDashboard(t, file).Panels {
			for _, tg := range p.Targets {
				exprs.WriteString(tg.Expr + "\n")
			}
		}
	}
	return exprs.String()
}

func readDashboard(t *testing.T, file string) dashboard {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("grafana", "dashboards", file))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return d
}

var (
	selectorRE = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}`)
	matcherRE  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*"[^"]*"`)
	groupingRE = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	legendRE   = regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)
	identRE    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*\s*\(?`)
	streamRE   = regexp.MustCompile(`stream_name\s*=\s*"([^"]*)"`)
)

// promQLKeywords are the PromQL words that are neither metrics nor
// functions.
var promQLKeywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset", "and", "or", "unless"}

// exprMetrics lists the metric names a PromQL expression selects.
func exprMetrics(expr string) []string {
	s := regexp.MustCompile(`"[^"]*"`).ReplaceAllString(expr, `""`)
	s = regexp.MustCompile(`\{[^}]*\}`).ReplaceAllString(s, " ")
	s = regexp.MustCompile(`\[[^\]]*\]`).ReplaceAllString(s, " ")
	s = groupingRE.ReplaceAllString(s, " ")
	var out []string
	for _, m := range identRE.FindAllString(s, -1) {
		if strings.HasSuffix(m, "(") { // a function or an aggregation
			continue
		}
		if m = strings.TrimSpace(m); !slices.Contains(promQLKeywords, m) {
			out = append(out, m)
		}
	}
	return out
}

// knownMetrics is every series the stack's Prometheus can hold: the Go
// code's metrics, the exporter's, and `up`; and the labels every
// Prometheus adds to every series of a target, job and instance. The
// labels compose's prometheus.yml adds (service, node) are not among them:
// a dashboard or an alert that relied on them would show blank legends
// under any other scrape configuration (make run's, say).
func knownMetrics(t *testing.T) (metrics map[string]metricFamily, targetLabels map[string]bool) {
	t.Helper()
	root := repoRoot(t)
	metrics = codeMetrics(t, goDirs(t, filepath.Join(root, "pkg"), filepath.Join(root, "services")))
	for n, m := range exporterMetrics() {
		metrics[n] = m
	}
	return metrics, map[string]bool{"job": true, "instance": true}
}

func TestCodeMetricsAreFound(t *testing.T) {
	is := is.New(t)
	metrics, _ := knownMetrics(t)
	// The reading of the Go code must find what the dashboards rely on,
	// with their labels, or the dashboard checks below prove nothing.
	is.True(metrics["primeflow_webhooks_total"].labels["action"])            // a CounterVec's labels
	is.True(metrics["primeflow_webhook_insert_seconds_bucket"].labels["le"]) // a histogram's buckets
	is.True(metrics["primeflow_webhooklog_rows"].labels["state"])            // a NewDesc's labels
	is.True(metrics["primeflow_consumer_messages_total"].labels["consumer"]) // labels from WrapRegistererWith
	is.True(metrics["prime_client_requests_total"].labels["client"])         // constant labels handed to NewDesc
}

func TestDashboards(t *testing.T) {
	metrics, targetLabels := knownMetrics(t)
	for _, file := range dashboardFiles(t) {
		t.Run(file, func(t *testing.T) {
			is := is.New(t)
			d := readDashboard(t, file)
			is.True(strings.HasPrefix(d.Title, "primeflow — ")) // in the primeflow family
			is.True(d.UID != "")                                // a stable uid for links
			ids := make(map[int]bool)
			for _, p := range d.Panels {
				is.True(!ids[p.ID]) // panel ids are unique
				ids[p.ID] = true
				if p.Type == "row" {
					continue
				}
				is.True(p.Datasource != nil)             // every panel names its datasource
				is.Equal(p.Datasource.UID, "prometheus") // the provisioned one
				is.True(len(p.Targets) > 0)              // and queries it
				for _, tg := range p.Targets {
					checkExpr(t, p.Title, tg.Expr, tg.LegendFormat, metrics, targetLabels)
				}
			}
		})
	}
}

// checkExpr checks that an expression selects only series the stack has,
// matches and groups only on labels those series carry, and that its legend
// names labels that survive the grouping.
func checkExpr(t *testing.T, panel, expr, legend string, metrics map[string]metricFamily, targetLabels map[string]bool) {
	t.Helper()
	names := exprMetrics(expr)
	if len(names) == 0 {
		t.Errorf("%q: %q selects no metric", panel, expr)
	}
	labels := make(map[string]bool)
	for l := range targetLabels {
		labels[l] = true
	}
	for _, n := range names {
		m, ok := metrics[n]
		if !ok {
			t.Errorf("%q: %s is not a metric the code or the NATS exporter exports", panel, n)
			continue
		}
		for l := range m.labels {
			labels[l] = true
		}
	}
	for _, sel := range selectorRE.FindAllStringSubmatch(expr, -1) {
		m, ok := metrics[sel[1]]
		if !ok {
			continue
		}
		for _, mm := range matcherRE.FindAllStringSubmatch(sel[2], -1) {
			if !m.labels[mm[1]] && !targetLabels[mm[1]] {
				t.Errorf("%q: %s has no label %s", panel, sel[1], mm[1])
			}
		}
	}
	var grouped []string
	for _, g := range groupingRE.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(g[1], ",") {
			if l = strings.TrimSpace(l); l != "" {
				grouped = append(grouped, l)
				if !labels[l] {
					t.Errorf("%q: groups by %s, which %v do not carry", panel, l, names)
				}
			}
		}
	}
	for _, m := range legendRE.FindAllStringSubmatch(legend, -1) {
		if len(grouped) > 0 && !slices.Contains(grouped, m[1]) || !labels[m[1]] {
			t.Errorf("%q: legend {{%s}} is not a label of the result of %q", panel, m[1], expr)
		}
	}
}

func TestStreamLagCoversEveryConsumer(t *testing.T) {
	root := repoRoot(t)
	d := readDashboard(t, "stream-lag.json")
	titles := make(map[string]panel) // stream → its panel
	var all strings.Builder
	for _, p := range d.Panels {
		all.WriteString(p.Title + "\n")
		stream, _, ok := strings.Cut(p.Title, " → ")
		if ok {
			titles[stream] = p
		}
	}
	files, err := filepath.Glob(filepath.Join(root, "streams", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("streams/*.json: %v", err)
	}
	for _, f := range files {
		var def struct {
			Name string `json:"name"`
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &def); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if strings.HasPrefix(def.Name, "KV_") {
			continue // a KV bucket has no consumers to lag
		}
		t.Run(def.Name, func(t *testing.T) {
			is := is.New(t)
			p, ok := titles[def.Name]
			is.True(ok) // every stream has its panel, titled "<stream> → <consumers>"
			for _, tg := range p.Targets {
				m := streamRE.FindStringSubmatch(tg.Expr)
				is.True(m != nil)        // each query picks the stream
				is.Equal(m[1], def.Name) // this one
			}
		})
	}
	for consumer := range durables(t, filepath.Join(root, "services")) {
		t.Run(consumer, func(t *testing.T) {
			is := is.New(t)
			is.True(strings.Contains(all.String(), consumer)) // each consumer the services create is named on the dashboard
		})
	}
}

func TestWebhooksDashboardShowsTheIngestPath(t *testing.T) {
	is := is.New(t)
	d := readDashboard(t, "webhooks.json")
	var exprs strings.Builder
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			exprs.WriteString(tg.Expr + "\n")
		}
	}
	for _, want := range []string{
		"primeflow_webhooks_total", "primeflow_webhook_insert_seconds_bucket", "primeflow_webhook_publish_failures_total",
		"primeflow_webhooklog_rows", "primeflow_consumer_messages_total", "primeflow_resolver_events_total",
		"prime_client_requests_total", "prime_client_rate_limit_waits_total", "prime_client_ratelimit_remaining",
	} {
		is.True(strings.Contains(exprs.String(), want)) // the webhooks dashboard shows it
	}
	is.True(strings.Contains(exprs.String(), "histogram_quantile(0.5, sum by (le) (rate(primeflow_webhook_insert_seconds_bucket"))  // p50
	is.True(strings.Contains(exprs.String(), "histogram_quantile(0.99, sum by (le) (rate(primeflow_webhook_insert_seconds_bucket")) // p99
}

// TestFailureCountersAreOnADashboard: every counter of failures the Go code
// declares (a name with "fail" in it, or a payload shape change) is queried
// by a dashboard, and so are the SMS sends: these are what docs/monitoring.md,
// "Metrics", says are served at 0 from the start for an operator to watch.
func TestFailureCountersAreOnADashboard(t *testing.T) {
	root := repoRoot(t)
	metrics := codeMetrics(t, goDirs(t, filepath.Join(root, "pkg"), filepath.Join(root, "services")))
	exprs := dashboardExprs(t)
	want := []string{"primeflow_sms_sent_total", "primeflow_sms_send_retries_total", "primeflow_resolver_payload_shape_changed_total"}
	for name := range metrics {
		if strings.Contains(name, "fail") && strings.HasSuffix(name, "_total") {
			want = append(want, name)
		}
	}
	slices.Sort(want)
	for _, name := range want {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			_, declared := metrics[name]
			is.True(declared)                          // the code still declares it
			is.True(strings.Contains(exprs, name+"[")) // a dashboard queries it
		})
	}
}

// familyOf is the family a series belongs to: a histogram's for its
// _bucket, _sum and _count, else the series' own name.
func familyOf(series string, metrics map[string]metricFamily) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(series, suffix)
		if _, histogram := metrics[base+"_bucket"]; ok && histogram {
			return base
		}
	}
	return series
}

// monitoringDoc is where the metrics are documented (docs/monitoring.md).
var monitoringDoc = filepath.Join("docs", "monitoring.md")

// leftOffHeading starts monitoringDoc's list of metric families left off the
// dashboards on purpose: a line "- `family`: why" each, up to a blank line.
const leftOffHeading = "Left off the dashboards on purpose:"

// TestEveryFamilyIsOnADashboard: every metric family the Go code declares
// (primeflow_*, and the Prime and OptimoRoute clients') is queried by a
// dashboard, or named in docs/monitoring.md's list of the families left off them on
// purpose, with the reason: a family added later fails here until it has a
// panel or a reason.
func TestEveryFamilyIsOnADashboard(t *testing.T) {
	root := repoRoot(t)
	metrics := codeMetrics(t, goDirs(t, filepath.Join(root, "pkg"), filepath.Join(root, "services")))
	family := func(series string) string { return familyOf(series, metrics) }
	shown := make(map[string]bool)
	for _, expr := range strings.Split(dashboardExprs(t), "\n") {
		for _, n := range exprMetrics(expr) {
			shown[family(n)] = true
		}
	}
	doc, err := os.ReadFile(filepath.Join(root, monitoringDoc))
	if err != nil {
		t.Fatal(err)
	}
	_, list, found := strings.Cut(string(doc), leftOffHeading)
	if !found {
		t.Fatalf("%s has no %q", monitoringDoc, leftOffHeading)
	}
	list, _, _ = strings.Cut(strings.TrimLeft(list, "\n"), "\n\n")
	leftOff := make(map[string]bool)
	for _, line := range strings.Split(list, "\n") {
		name, reason, ok := strings.Cut(strings.TrimPrefix(line, "- `"), "`: ")
		if !strings.HasPrefix(line, "- `") || !ok || reason == "" {
			t.Fatalf("%s, %s: %q is not \"- `family`: why\"", monitoringDoc, leftOffHeading, line)
		}
		leftOff[name] = true
	}
	families := make(map[string]bool)
	for n := range metrics {
		families[family(n)] = true
	}
	for name := range leftOff {
		if !families[name] {
			t.Errorf("%s leaves %s off the dashboards, but the code declares no such family", monitoringDoc, name)
		}
	}
	for name := range families {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			is.True(shown[name] || leftOff[name])    // on a dashboard, or left off on purpose (docs/monitoring.md: "Left off the dashboards on purpose")
			is.True(!(shown[name] && leftOff[name])) // not both: docs/monitoring.md's list would be stale
		})
	}
}
