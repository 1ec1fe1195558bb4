package mssql

import (
	"fmt"
	"strings"

	mssql "github.com/microsoft/go-mssqldb"
)

// SQL Server sends a UNIQUEIDENTIFIER as 16 bytes with its first three groups
// little-endian; mssql.UniqueIdentifier knows that order. The store speaks
// the canonical lower-case text form (0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10).

func parseGUID(s string) (mssql.UniqueIdentifier, error) {
	var u mssql.UniqueIdentifier
	if !isGUID(s) {
		return u, fmt.Errorf("mssql: %q is not a GUID", s)
	}
	if err := u.Scan(s); err != nil {
		return u, fmt.Errorf("mssql: %q is not a GUID: %w", s, err)
	}
	return u, nil
}

// isGUID reports whether s has the canonical 8-4-4-4-12 hex form.
func isGUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// scanGUID reads a UNIQUEIDENTIFIER column as lower-case canonical text;
// NULL is "".
type scanGUID struct{ s *string }

func (sg scanGUID) Scan(v any) error {
	var n mssql.NullUniqueIdentifier
	if err := n.Scan(v); err != nil {
		return err
	}
	if !n.Valid {
		*sg.s = ""
		return nil
	}
	*sg.s = strings.ToLower(n.UUID.String())
	return nil
}
