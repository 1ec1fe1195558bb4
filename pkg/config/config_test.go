package config_test

import (
	"errors"
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
