package mssql

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/ethosbuilding/primeflow/pkg/store"
)

// procIdentifyGuid is the procedure behind IdentifyGuid (sql/mssql/004_identify.sql).
const procIdentifyGuid = "dbo.spPrimeIdentifyGuid"

// IdentifyGuid finds the mirror tables a GUID is in (spPrimeIdentifyGuid,
// §4.2): the expected table first, one index seek, and the sweep over
// store.IdentifyTables only on a miss. A value that is not a GUID is in no
// table; an expected name that is not one of the tables is refused.
func (s *Store) IdentifyGuid(ctx context.Context, id, expected string) ([]string, error) {
	if expected != "" && !slices.ContainsFunc(store.IdentifyTables, func(t struct{ Table, Key string }) bool {
		return t.Table == expected
	}) {
		return nil, fmt.Errorf("mssql: identify guid: %q is not a mirror table", expected)
	}
	if !isGUID(id) {
		return nil, nil // no UNIQUEIDENTIFIER equals it
	}
	guid, err := parseGUID(id)
	if err != nil {
		return nil, err
	}
	rs, err := s.q().QueryContext(ctx, procIdentifyGuid,
		sql.Named("Id", guid), sql.Named("ExpectedEntity", sqlString(expected)))
	if err != nil {
		return nil, fmt.Errorf("mssql: identify guid: %w", err)
	}
	defer rs.Close()
	var found []string
	for rs.Next() {
		var table string
		if err := rs.Scan(&table); err != nil {
			return nil, fmt.Errorf("mssql: identify guid: %w", err)
		}
		found = append(found, table)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("mssql: identify guid: %w", err)
	}
	return found, nil
}
