// Package logging builds the slog logger every process uses: tint for people
// at a terminal, JSON for production log shippers; either bounds what it
// writes of outside data (Bound, Payload).
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

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

// New returns a logger that writes to w.
func New(w io.Writer, cfg Config) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.Level)); err != nil {
		return nil, fmt.Errorf("LOG_LEVEL %q: %w", cfg.Level, err)
	}
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
			ReplaceAttr: bound,
		})), nil
	default:
		return nil, fmt.Errorf("LOG_FORMAT %q: want text or json", cfg.Format)
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isatty.IsTerminal(f.Fd())
}
