// Package config reads configuration from the environment with
// caarlos0/env, through an injected getenv so tests need not touch the
// process environment.
package config

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/caarlos0/env/v11"
)

// Parse fills cfg (a pointer to a struct with `env` tags) from getenv.
//
// A field tagged `secret:"true"` (a password, a key, a URL that may hold
// credentials) may instead be given as its variable with _FILE appended:
// the path of a file that holds the value, as a compose or Kubernetes
// secret is mounted (ADMIN_PASSWORD_FILE=/run/secrets/admin_password). One
// trailing line break is dropped. Setting both the variable and its _FILE
// twin is an error, and so is a file that cannot be read.
func Parse(getenv func(string) string, cfg any) error {
	params, err := env.GetFieldParams(cfg)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	environ := make(map[string]string, len(params))
	for _, p := range params {
		if v := getenv(p.Key); v != "" {
			environ[p.Key] = v
		}
	}
	for _, key := range SecretVariables(cfg) {
		path := getenv(key + FileSuffix)
		if path == "" {
			continue
		}
		if _, set := environ[key]; set {
			return fmt.Errorf("config: %s and %s%s are both set: give the secret one way", key, key, FileSuffix)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("config: %s%s: %w", key, FileSuffix, err)
		}
		if v := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r"); v != "" {
			environ[key] = v
		}
	}
	if err := env.ParseWithOptions(cfg, env.Options{Environment: environ}); err != nil {
		if bad := unreadable(cfg, environ); bad != "" {
			return fmt.Errorf("config: %s: %w", bad, err)
		}
		return fmt.Errorf("config: %w", err)
	}
	return nil
}

// FileSuffix makes a secret's variable name the name of the variable that
// gives the path of a file holding it.
const FileSuffix = "_FILE"

// SecretVariables are the variables of cfg's fields tagged `secret:"true"`
// (envPrefix included), each of which may be given as a file.
func SecretVariables(cfg any) []string {
	return secrets(reflect.TypeOf(cfg), "")
}

func secrets(t reflect.Type, prefix string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("env"), ",")
		switch {
		case key != "":
			if f.Tag.Get("secret") == "true" {
				out = append(out, prefix+key)
			}
		case f.Type.Kind() == reflect.Struct || f.Type.Kind() == reflect.Pointer:
			out = append(out, secrets(f.Type, prefix+f.Tag.Get("envPrefix"))...)
		}
	}
	return out
}

// Load reads a service's configuration from getenv (Parse) and checks it
// with its Validate: what a service's Main does first, so that a value it
// cannot run with stops it before it connects.
func Load[C interface{ Validate() error }](getenv func(string) string) (C, error) {
	var cfg C
	if err := Parse(getenv, &cfg); err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

// MustDefaults is a T (a struct with `env` tags) with every setting at its
// default, as Parse fills it from an empty environment: what a service's
// DefaultConfig returns. It panics when T's defaults themselves do not
// parse, a mistake in T's tags that any test of DefaultConfig shows.
func MustDefaults[T any]() T {
	var cfg T
	if err := Parse(func(string) string { return "" }, &cfg); err != nil {
		panic(fmt.Sprintf("config: the defaults of %T: %v", cfg, err))
	}
	return cfg
}

// unreadable names the variables whose values cannot be read into cfg's
// fields. caarlos0/env's parse error names only the Go field, which several
// services' settings share (Every, Workers …), so each set variable is read
// on its own into a fresh cfg to find the culprits.
func unreadable(cfg any, environ map[string]string) string {
	var bad []string
	for _, k := range slices.Sorted(maps.Keys(environ)) {
		one := reflect.New(reflect.TypeOf(cfg).Elem()).Interface()
		var pe env.ParseError
		if err := env.ParseWithOptions(one, env.Options{Environment: map[string]string{k: environ[k]}}); errors.As(err, &pe) {
			bad = append(bad, fmt.Sprintf("%s=%q", k, environ[k]))
		}
	}
	return strings.Join(bad, ", ")
}
