package config_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/matryer/is"
)

type plan struct {
	Every time.Duration `env:"PLAN_EVERY" envDefault:"30m"`
}

type create struct {
	Every time.Duration `env:"CREATE_EVERY" envDefault:"30m"`
}

type both struct {
	Plan   plan
	Create create
	Key    string `env:"KEY,required"`
}

// A value that cannot be read is named by its variable, not by the Go
// field it fills, which two settings share here.
func TestParseNamesTheUnreadableVariable(t *testing.T) {
	is := is.New(t)
	env := map[string]string{"PLAN_EVERY": "abc", "CREATE_EVERY": "5m", "KEY": "k"}
	var c both
	err := config.Parse(func(k string) string { return env[k] }, &c)
	is.True(err != nil)
	is.True(strings.Contains(err.Error(), `PLAN_EVERY="abc"`)) // the culprit
	is.True(!strings.Contains(err.Error(), "CREATE_EVERY"))    // and only it

	env["PLAN_EVERY"] = "10m"
	is.NoErr(config.Parse(func(k string) string { return env[k] }, &c))
	is.Equal(c.Plan.Every, 10*time.Minute)
	is.Equal(c.Create.Every, 5*time.Minute)
}

type withSecrets struct {
	User     string `env:"APP_USER"`
	Password string `env:"APP_PASSWORD" secret:"true"`
	Lock     struct {
		Key string `env:"KEY" secret:"true"`
	} `envPrefix:"LOCK_"`
}

// A secret may be given as a file (its _FILE twin), the way compose and
// Kubernetes mount secrets; anything else may not.
func TestSecretsFromFiles(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pw, key := file("pw", "s3cret\n"), file("key", "k3y")
	for _, tc := range []struct {
		name     string
		env      map[string]string
		password string
		key      string
		err      string
	}{
		{"from the environment", map[string]string{"APP_PASSWORD": "plain"}, "plain", "", ""},
		{"from files, a trailing newline dropped", map[string]string{"APP_PASSWORD_FILE": pw, "LOCK_KEY_FILE": key}, "s3cret", "k3y", ""},
		{"both ways", map[string]string{"APP_PASSWORD": "plain", "APP_PASSWORD_FILE": pw}, "", "", "APP_PASSWORD (set; a secret, not shown): APP_PASSWORD_FILE is set too"},
		{"a file that is not there", map[string]string{"APP_PASSWORD_FILE": filepath.Join(dir, "missing")}, "", "", `APP_PASSWORD_FILE="` + filepath.Join(dir, "missing") + `": cannot be read: no such file`},
		{"not a secret", map[string]string{"APP_USER_FILE": pw}, "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			var c withSecrets
			err := config.Parse(func(k string) string { return tc.env[k] }, &c)
			if tc.err != "" {
				is.True(err != nil)                            // refused
				is.True(strings.Contains(err.Error(), tc.err)) // naming the variable
				return
			}
			is.NoErr(err)
			is.Equal(c.Password, tc.password) // read
			is.Equal(c.Lock.Key, tc.key)      // under its envPrefix too
			is.Equal(c.User, "")              // only secrets come from files
		})
	}
	is := is.New(t)
	is.Equal(config.SecretVariables(&withSecrets{}), []string{"APP_PASSWORD", "LOCK_KEY"}) // the secret variables, prefixes included
}

func TestMustDefaults(t *testing.T) {
	is := is.New(t)
	is.Equal(config.MustDefaults[plan](), plan{Every: 30 * time.Minute}) // the envDefault
	defer func() {
		is.True(recover() != nil) // a default that cannot be: a mistake in the tags
	}()
	config.MustDefaults[struct {
		Every time.Duration `env:"BAD_EVERY" envDefault:"soon"`
	}]()
}

type checked struct {
	Workers int           `env:"WORKERS" envDefault:"4"`
	Wait    time.Duration `env:"WAIT" envDefault:"1m"`
	Every   time.Duration `env:"EVERY" envDefault:"5m"`
	Key     string        `env:"API_KEY" secret:"true"`
	URL     string        `env:"HOOK_URL"`
	Zone    string        `env:"ZONE"`
}

func (c checked) Validate() error {
	return errors.Join(config.Positive("WORKERS", c.Workers), config.Positive("WAIT", c.Wait),
		config.Positive("EVERY", c.Every), config.NotNegative("EVERY", c.Every))
}

// rules is a second configuration, checked with the first.
type rules struct {
	Zone string `env:"ZONE"`
	Key  string `env:"RULES_KEY" secret:"true"`
}

var errNoZone = config.Refuse("ZONE", "is required")

func TestLoadValidates(t *testing.T) {
	is := is.New(t)
	var cfg checked
	is.NoErr(config.Load(func(string) string { return "" }, config.Read(&cfg, checked.Validate)))
	is.Equal(cfg.Workers, 4) // the default
	err := config.Load(func(string) string { return "0" }, config.Read(&cfg, checked.Validate))
	is.True(err != nil && strings.Contains(err.Error(), `WORKERS="0": must be above zero`)) // a value the service cannot run with, refused with it
	err = config.Load(func(string) string { return "many" }, config.Read(&cfg, checked.Validate))
	is.True(err != nil && strings.Contains(err.Error(), `WORKERS="many": not a whole number`)) // as is one that does not parse
}

// Every setting refused is reported at once, each once, naming its
// variable and the value it had; never a secret's value, nor a URL's path
// or query.
func TestLoadRefusesEverySettingAtOnce(t *testing.T) {
	is := is.New(t)
	env := map[string]string{
		"WORKERS": "x", "WAIT": "0", "EVERY": "soon", "API_KEY": "s3cret-key", "RULES_KEY": "other-secret",
		"HOOK_URL": "https://user:pw@hooks.example/webhook/7f3a?code=k3y",
	}
	var c checked
	var r rules
	err := config.Load(func(k string) string { return env[k] },
		config.Read(&c, checked.Validate),
		config.Read(&r, nil),
		config.Check(func() error {
			return errors.Join(errNoZone, config.Refuse("API_KEY", "is not a key"), config.Refuse("HOOK_URL", "is not wanted"),
				fmt.Errorf("rules: %w", config.Refuse("RULES_KEY", "is wrong")), config.Refuse("WAIT", "must be above zero"))
		}))
	var ce *config.Error
	is.True(errors.As(err, &ce)) // the configuration's error
	want := []string{
		`WORKERS="x": not a whole number`,
		`WAIT="0": must be above zero`,
		`EVERY="soon": not a duration (30s, 5m, 1h30m)`,
		`API_KEY (set; a secret, not shown): is not a key`,
		`HOOK_URL="https://hooks.example/…": is not wanted`,
		`ZONE (not set): is required`,
		`RULES_KEY (set; a secret, not shown): is wrong`,
	}
	var got []string
	for _, r := range ce.Refused {
		got = append(got, r.Error())
	}
	is.Equal(got, want)                                                             // each once, in the order declared, with its value
	is.True(strings.HasPrefix(err.Error(), "7 settings refused:\n  WORKERS=\"x\"")) // a line each
	is.True(errors.Is(err, errNoZone))                                              // a sentinel refusal is still found
	is.Equal(c.Workers, 4)                                                          // an unreadable value leaves its default
	is.Equal(c.Key, "s3cret-key")                                                   // and the rest as given
	for _, secret := range []string{"s3cret", "other-secret", "pw", "k3y", "7f3a", "user"} {
		is.True(!strings.Contains(err.Error(), secret)) // no secret shown
	}
}

// A value of the right form the checks refuse is shown with it; one unset
// with its default.
func TestLoadShowsTheDefault(t *testing.T) {
	is := is.New(t)
	type lease struct {
		Lease   time.Duration `env:"LEASE" envDefault:"10s"`
		Timeout time.Duration `env:"TIMEOUT" envDefault:"15s"`
	}
	var c lease
	err := config.Load(func(k string) string { return map[string]string{"TIMEOUT": "30s"}[k] }, config.Read(&c, func(c lease) error {
		if c.Lease <= c.Timeout {
			return config.Refuse("LEASE", "must be longer than TIMEOUT (%s)", c.Timeout)
		}
		return nil
	}))
	is.Equal(err.Error(), `LEASE="10s" (its default): must be longer than TIMEOUT (30s)`)
}

func TestParseInterval(t *testing.T) {
	for _, tc := range []struct {
		in  string
		d   time.Duration
		off bool
		ok  bool
	}{
		{"15m", 15 * time.Minute, false, true},
		{" OFF ", 0, true, true},
		{"0", 0, true, true},
		{"0s", 0, true, true},
		{"-5m", 0, false, false},
		{"hourly", 0, false, false},
	} {
		d, off, err := config.ParseInterval(tc.in)
		if d != tc.d || off != tc.off || (err == nil) != tc.ok {
			t.Errorf("ParseInterval(%q) = %s, %v, %v", tc.in, d, off, err)
		}
	}
}

// An address is refused for its form alone, before anything listens.
func TestAddress(t *testing.T) {
	for addr, ok := range map[string]bool{
		":8080": true, "127.0.0.1:0": true, "[::1]:8080": true, "localhost:http": true,
		"8080": false, "nohost": false, "::1:8080": false, "127.0.0.1:70000": false, "127.0.0.1:-1": false,
	} {
		err := config.Address("HTTP_ADDR", addr)
		if (err == nil) != ok {
			t.Errorf("Address(%q) = %v", addr, err)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "HTTP_ADDR: ") {
			t.Errorf("Address(%q) does not name its variable: %v", addr, err)
		}
	}
}

// A value is shown on one line, cut when long.
func TestLoadShowsALongValueCut(t *testing.T) {
	is := is.New(t)
	var c checked
	err := config.Load(func(k string) string { return map[string]string{"WORKERS": strings.Repeat("9", 200)}[k] }, config.Read(&c, nil))
	is.Equal(err.Error(), `WORKERS="`+strings.Repeat("9", 80)+`…": out of range for a whole number`)
}
