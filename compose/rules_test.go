package compose_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// ruleFile is a Prometheus rule file, the part the checks read.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// ruleTests is a promtool test file, the part the checks read.
type ruleTests struct {
	RuleFiles          []string `yaml:"rule_files"`
	EvaluationInterval string   `yaml:"evaluation_interval"`
	Tests              []struct {
		Name        string `yaml:"name"`
		Interval    string `yaml:"interval"`
		InputSeries []struct {
			Series string `yaml:"series"`
			Values string `yaml:"values"`
		} `yaml:"input_series"`
		AlertRuleTests []struct {
			EvalTime  string `yaml:"eval_time"`
			Alertname string `yaml:"alertname"`
			ExpAlerts []struct {
				ExpLabels      map[string]string `yaml:"exp_labels"`
				ExpAnnotations map[string]string `yaml:"exp_annotations"`
			} `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

// severities are the alerts' severity labels: page (act now: an on-call
// is woken) and ticket (within the working day).
var severities = []string{"page", "ticket"}

// ruleFiles are compose/prometheus/rules/*.yml, each the rules of one area.
func ruleFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("prometheus", "rules", "*.yml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("prometheus/rules/*.yml: %v", err)
	}
	return files
}

var templateLabelRE = regexp.MustCompile(`\{\{\s*\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)

// TestAlertRules: the rule files are the ones prometheus.yml loads and
// compose mounts; every alert has a severity, a summary and a runbook,
// selects series the stack has (as the dashboards' queries must), names in
// its annotations only labels its result carries, and has promtool unit
// tests that fire it and that keep it quiet; then promtool checks the files
// and runs the tests.
func TestAlertRules(t *testing.T) {
	metrics, targetLabels := knownMetrics(t)
	c := readPrometheus(t)
	is.New(t).Equal(c.RuleFiles, []string{"/etc/prometheus/rules/*.yml"}) // prometheus.yml loads them
	mounted := false
	for _, v := range service(t, loadProject(t), "prometheus").Volumes {
		if v.Target == "/etc/prometheus/rules" && filepath.Base(v.Source) == "rules" && v.ReadOnly {
			mounted = true
		}
	}
	is.New(t).True(mounted) // compose/prometheus/rules is that directory

	alerts := make(map[string]string) // alert → its file
	for _, file := range ruleFiles(t) {
		var rf ruleFile
		readYAML(t, file, &rf)
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				t.Run(r.Alert, func(t *testing.T) {
					is := is.New(t)
					is.True(r.Alert != "")                                     // only alerts: a recording rule would need its own checks
					is.True(alerts[r.Alert] == "")                             // one rule a name
					is.True(slices.Contains(severities, r.Labels["severity"])) // page or ticket
					is.True(r.Annotations["summary"] != "")                    // says what is wrong
					is.True(r.Annotations["runbook"] != "")                    // and what to do
					alerts[r.Alert] = filepath.Base(file)
					var legend strings.Builder
					for _, a := range r.Annotations {
						for _, m := range templateLabelRE.FindAllStringSubmatch(a, -1) {
							legend.WriteString("{{" + m[1] + "}}")
						}
					}
					checkExpr(t, r.Alert, r.Expr, legend.String(), metrics, targetLabels)
				})
			}
		}
	}

	// Every alert is tested by the promtool file of the same name under
	// tests/: at least one case where it fires and one where it must not.
	fires, quiet := make(map[string]bool), make(map[string]bool)
	for _, file := range ruleFiles(t) {
		var rt ruleTests
		readYAML(t, filepath.Join("prometheus", "rules", "tests", filepath.Base(file)), &rt)
		is.New(t).Equal(rt.RuleFiles, []string{"../" + filepath.Base(file)}) // the tests of that file
		for _, tc := range rt.Tests {
			for _, at := range tc.AlertRuleTests {
				is.New(t).Equal(alerts[at.Alertname], filepath.Base(file)) // an alert of that file
				if len(at.ExpAlerts) > 0 {
					fires[at.Alertname] = true
				} else {
					quiet[at.Alertname] = true
				}
			}
		}
	}
	for alert := range alerts {
		if !fires[alert] || !quiet[alert] {
			t.Errorf("%s: promtool tests fire it: %v; keep it quiet: %v (both are needed)", alert, fires[alert], quiet[alert])
		}
	}

	promtool := tool(t, "PROMTOOL", "promtool")
	args := append([]string{"check", "rules"}, ruleFiles(t)...)
	if out, err := exec.Command(promtool, args...).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	tests, _ := filepath.Glob(filepath.Join("prometheus", "rules", "tests", "*.yml"))
	out, err := exec.Command(promtool, append([]string{"test", "rules"}, tests...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	t.Logf("promtool test rules %s:\n%s", strings.Join(tests, " "), out)
}

// tool is the path of a program the tests run: the variable the Makefile
// sets (make test unpacks Debian's prometheus package into .tools), or the
// program on PATH. Neither skips the rest of the test, saying so; a
// variable naming a missing file fails it.
func tool(t *testing.T, variable, name string) string {
	t.Helper()
	if p := os.Getenv(variable); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s=%s: %v", variable, p, err)
		}
		return p
	}
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("SKIPPED the rest: %s is not set and %s is not on PATH (make test installs it)", variable, name)
	}
	return p
}

// alertRowRE is a row of docs/monitoring.md's alert table: its first cell
// names one alert or several ("`A`, `B`"), then its severity.
var alertRowRE = regexp.MustCompile("^\\| (`[A-Za-z]+`(?:, `[A-Za-z]+`)*) \\| (page|ticket) \\|")

// TestEveryAlertIsInTheMonitoringDoc: docs/monitoring.md's alert table lists
// every alert of the rule files, with its severity, and no other.
func TestEveryAlertIsInTheMonitoringDoc(t *testing.T) {
	rules := make(map[string]string) // alert → severity
	for _, file := range ruleFiles(t) {
		var rf ruleFile
		readYAML(t, file, &rf)
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				rules[r.Alert] = r.Labels["severity"]
			}
		}
	}
	doc, err := os.ReadFile(filepath.Join(repoRoot(t), monitoringDoc))
	if err != nil {
		t.Fatal(err)
	}
	listed := make(map[string]string)
	for _, line := range strings.Split(string(doc), "\n") {
		m := alertRowRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		for _, name := range strings.Split(m[1], ", ") {
			listed[strings.Trim(name, "`")] = m[2]
		}
	}
	for alert, severity := range rules {
		if listed[alert] != severity {
			t.Errorf("%s (%s) is not in %s's alert table with that severity (listed: %q)", alert, severity, monitoringDoc, listed[alert])
		}
	}
	for alert := range listed {
		if _, ok := rules[alert]; !ok {
			t.Errorf("%s lists %s, which no rule file holds", monitoringDoc, alert)
		}
	}
}
