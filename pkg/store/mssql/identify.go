package mssql

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
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
	return queryAll(ctx, s.q(), "identify guid", procIdentifyGuid, sqlrows.Text,
		sql.Named("Id", guid), sql.Named("ExpectedEntity", sqlString(expected)))
}
