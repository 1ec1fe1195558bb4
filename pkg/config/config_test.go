package config_test

import (
	"errors"
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
		{"both ways", map[string]string{"APP_PASSWORD": "plain", "APP_PASSWORD_FILE": pw}, "", "", "APP_PASSWORD and APP_PASSWORD_FILE are both set"},
		{"a file that is not there", map[string]string{"APP_PASSWORD_FILE": filepath.Join(dir, "missing")}, "", "", "APP_PASSWORD_FILE"},
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
	Workers int `env:"WORKERS" envDefault:"4"`
}

func (c checked) Validate() error {
	if c.Workers <= 0 {
		return errors.New("WORKERS must be above zero")
	}
	return nil
}

func TestLoadValidates(t *testing.T) {
	is := is.New(t)
	cfg, err := config.Load[checked](func(string) string { return "" })
	is.NoErr(err)
	is.Equal(cfg.Workers, 4) // the default
	_, err = config.Load[checked](func(string) string { return "0" })
	is.True(err != nil && strings.Contains(err.Error(), "WORKERS")) // a value the service cannot run with, refused
	_, err = config.Load[checked](func(string) string { return "many" })
	is.True(err != nil && strings.Contains(err.Error(), "WORKERS")) // as is one that does not parse
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
