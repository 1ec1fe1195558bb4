package sqlite

import (
	"context"
	"fmt"
	"strings"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
)

// identifySweep probes every mirror table in one statement.
var identifySweep = func() string {
	parts := make([]string, len(store.IdentifyTables))
	for i, t := range store.IdentifyTables {
		parts[i] = fmt.Sprintf("SELECT '%s' FROM %s WHERE %s = ?1", t.Table, t.Table, t.Key)
	}
	return strings.Join(parts, " UNION ALL ")
}()

// IdentifyGuid finds the mirror tables a GUID is in (spPrimeIdentifyGuid):
// the expected table first, one index seek, and the sweep only on a miss.
func (s *Store) IdentifyGuid(ctx context.Context, id, expected string) ([]string, error) {
	id = strings.ToLower(id)
	if expected != "" {
		key, ok := identifyKey(expected)
		if !ok {
			return nil, fmt.Errorf("identify guid: %q is not a mirror table", expected)
		}
		var one int
		err := s.r().QueryRowContext(ctx, `SELECT COUNT(*) FROM `+expected+` WHERE `+key+` = ?`, id).Scan(&one)
		if err != nil {
			return nil, fmt.Errorf("sqlite: identify guid: %w", err)
		}
		if one > 0 {
			return []string{expected}, nil
		}
	}
	return queryAll(ctx, s.r(), "identify guid", identifySweep, sqlrows.Text, id)
}

func identifyKey(table string) (string, bool) {
	for _, t := range store.IdentifyTables {
		if t.Table == table {
			return t.Key, true
		}
	}
	return "", false
}
