package mssql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/ethosbuilding/primeflow/pkg/store"
)

// The procedures behind the Settings methods (sql/mssql/032_callers.sql).
const (
	procSetSetting = "dbo.spPrimeflowSetSetting"
	procGetSetting = "dbo.spPrimeflowGetSetting"
)

// maxSettingName is primeflowSettings.name's length.
const maxSettingName = 100

// SetSetting writes a primeflowSettings row (spPrimeflowSetSetting).
func (s *Store) SetSetting(ctx context.Context, name, value string) error {
	return setSetting(ctx, s.q(), name, value)
}

func setSetting(ctx context.Context, q execer, name, value string) error {
	if utf8.RuneCountInString(name) > maxSettingName || utf8.RuneCountInString(value) > store.MaxSettingLen {
		return fmt.Errorf("mssql: set setting %.100s: the name is over %d characters or the value over %d", name, maxSettingName, store.MaxSettingLen)
	}
	if _, err := q.ExecContext(ctx, procSetSetting, sql.Named("Name", name), sql.Named("Value", value)); err != nil {
		return fmt.Errorf("mssql: set setting %s: %w", name, err)
	}
	return nil
}

// GetSetting reads a primeflowSettings row (spPrimeflowGetSetting).
func (s *Store) GetSetting(ctx context.Context, name string) (string, bool, error) {
	var v sql.NullString
	err := s.q().QueryRowContext(ctx, procGetSetting, sql.Named("Name", name)).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("mssql: get setting %s: %w", name, err)
	}
	return v.String, true, nil
}
