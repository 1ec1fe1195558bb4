package compose_test

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/matryer/is"
)

// The Prometheus docs/monitoring.md gives for `make run`
// (prometheus/make-run.yml) scrapes bin/primeflow where make run serves it
// (HTTP_ADDR 127.0.0.1:8080), with the login make run makes (admin, the password in
// DATA_DIR/admin-password, ./data from the repository), loads compose's
// alert rules, and promtool accepts it.
func TestMakeRunPrometheus(t *testing.T) {
	is := is.New(t)
	var c struct {
		Global        map[string]string `yaml:"global"`
		RuleFiles     []string          `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName   string `yaml:"job_name"`
			BasicAuth *struct {
				Username     string `yaml:"username"`
				PasswordFile string `yaml:"password_file"`
			} `yaml:"basic_auth"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	file := filepath.Join("prometheus", "make-run.yml")
	readYAML(t, file, &c)
	is.Equal(c.RuleFiles, []string{"rules/*.yml"}) // compose's rules, relative to the file
	found := false
	for _, sc := range c.ScrapeConfigs {
		if sc.JobName != "primeflow" {
			continue
		}
		found = true
		is.True(sc.BasicAuth != nil)                                     // /metrics is behind the admin login
		is.Equal(sc.BasicAuth.Username, "admin")                         // the login make run makes
		is.Equal(sc.BasicAuth.PasswordFile, "../../data/admin-password") // DATA_DIR/admin-password, from the file
		is.Equal(len(sc.StaticConfigs), 1)
		is.Equal(sc.StaticConfigs[0].Targets, []string{"127.0.0.1:8080"}) // make run's HTTP_ADDR
	}
	is.True(found) // a primeflow job: the rules and dashboards select job="primeflow"
	promtool := tool(t, "PROMTOOL", "promtool")
	if out, err := exec.Command(promtool, "check", "config", file).CombinedOutput(); err != nil {
		t.Fatalf("promtool check config %s: %v\n%s", file, err, out)
	}
}
