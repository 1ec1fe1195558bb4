// Package logging builds the slog logger every process uses: tint for people
// at a terminal, JSON for production log shippers; either bounds what it
// writes of outside data (Bound, Payload).
package logging

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/lmittmann/tint"
	"github.com/mattn/go-isatty"
)

// Config selects the format and level. It is embedded in each process's
// configuration.
type Config struct {
	// Format is "text" (tint) or "json".
	Format string `env:"LOG_FORMAT" envDefault:"text"`
	// Level is debug, info, warn or error.
	Level string `env:"LOG_LEVEL" envDefault:"info"`
}

// Validate refuses a format or level New cannot make, naming its variable.
func (c Config) Validate() error {
	var errs []error
	if _, err := c.level(); err != nil {
		errs = append(errs, config.Refuse("LOG_LEVEL", "want debug, info, warn or error"))
	}
	if c.Format != "text" && c.Format != "json" && c.Format != "" {
		errs = append(errs, config.Refuse("LOG_FORMAT", "want text or json"))
	}
	return errors.Join(errs...)
}

// level is Level read.
func (c Config) level() (slog.Level, error) {
	var l slog.Level
	err := l.UnmarshalText([]byte(c.Level))
	return l, err
}

// New returns a logger that writes to w.
func New(w io.Writer, cfg Config) (*slog.Logger, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	level, _ := cfg.level() // Validate read it
	// Every string and error is bounded (Bound): what is logged of outside
	// data is never more than MaxValueBytes, nor cut at a bad byte.
	switch cfg.Format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: bound})), nil
	case "text", "":
		return slog.New(tint.NewHandler(w, &tint.Options{
			Level:       level,
			TimeFormat:  time.TimeOnly,
			NoColor:     !isTerminal(w),
			ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr { return asJSON(bound(groups, a)) },
		})), nil
	default:
		return nil, config.Refuse("LOG_FORMAT", "want text or json")
	}
}

// asJSON writes a struct that has no LogValue, String or Error method as
// JSON, through its json tags, in the text format: the text handler would
// print it as a Go value ({FromUTC:… Error: RetryAfterMS:0}), which says
// neither which fields are empty nor where a string ends. (Maps and slices
// print readably as they are; the JSON handler encodes structs as JSON
// already.)
func asJSON(a slog.Attr) slog.Attr {
	if a.Value.Kind() != slog.KindAny {
		return a
	}
	v := a.Value.Any()
	switch v.(type) {
	case error, fmt.Stringer:
		return a
	}
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return a
	}
	if t.Kind() == reflect.Struct {
		if b, err := json.Marshal(v); err == nil {
			a.Value = slog.StringValue(Bound(string(b)))
		}
	}
	return a
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isatty.IsTerminal(f.Fd())
}
