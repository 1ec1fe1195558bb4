// Package config reads configuration from the environment with
// caarlos0/env, through an injected getenv so tests need not touch the
// process environment.
package config

import (
	"fmt"
	"reflect"
	"strings"
)

// Parse fills cfg (a pointer to a struct with `env` tags) from getenv: Load
// of cfg alone, with no check.
//
// A field tagged `secret:"true"` (a password, a key, a URL that may hold
// credentials) may instead be given as its variable with _FILE appended:
// the path of a file that holds the value, as a compose or Kubernetes
// secret is mounted (ADMIN_PASSWORD_FILE=/run/secrets/admin_password). One
// trailing line break is dropped. Setting both the variable and its _FILE
// twin is refused, and so is a file that cannot be read.
func Parse(getenv func(string) string, cfg any) error {
	return Load(getenv, Part{cfg: cfg})
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
