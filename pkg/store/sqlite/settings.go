package sqlite

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
)

// SetSetting writes a primeflowSettings row.
func (s *Store) SetSetting(ctx context.Context, name, value string) error {
	if utf8.RuneCountInString(value) > store.MaxSettingLen {
		return fmt.Errorf("sqlite: set setting %s: longer than %d characters", name, store.MaxSettingLen)
	}
	_, err := s.w().ExecContext(ctx, `INSERT INTO primeflowSettings (name, value, updatedUTC) VALUES (?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value, updatedUTC = excluded.updatedUTC`,
		name, value, formatTime(time.Now()))
	if err != nil {
		return fmt.Errorf("sqlite: set setting %s: %w", name, err)
	}
	return nil
}

// GetSetting reads a primeflowSettings row.
func (s *Store) GetSetting(ctx context.Context, name string) (string, bool, error) {
	return queryOne(ctx, s.r(), "get setting "+name, `SELECT value FROM primeflowSettings WHERE name = ?`,
		func(sc sqlrows.Scanner) (string, error) {
			var v string
			err := sc.Scan(scanString{&v})
			return v, err
		}, name)
}
