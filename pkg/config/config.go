// Package config reads configuration from the environment with
// caarlos0/env, through an injected getenv so tests need not touch the
// process environment.
package config

import (
	"fmt"

	"github.com/caarlos0/env/v11"
)

// Parse fills cfg (a pointer to a struct with `env` tags) from getenv.
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
	if err := env.ParseWithOptions(cfg, env.Options{Environment: environ}); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}
