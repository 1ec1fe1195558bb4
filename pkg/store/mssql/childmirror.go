package mssql

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	mssql "github.com/microsoft/go-mssqldb"
)

// This file holds what the child-mirror areas (appointments.go,
// allocations.go, siteforms.go, estimates.go, contacts.go, aisummary.go)
// share: rows sent to the replace procedures as JSON, and reading rows back.

// The procedures behind the child-mirror areas (sql/mssql/020_child_mirror.sql).
const (
	procSaveAppointment                = "dbo.spPrimeflowSaveAppointment"
	procGetAppointment                 = "dbo.spPrimeflowGetAppointment"
	procSaveAllocation                 = "dbo.spPrimeflowSaveAllocation"
	procGetAllocation                  = "dbo.spPrimeflowGetAllocation"
	procListJobAllocations             = "dbo.spPrimeflowListJobAllocations"
	procHasMakeSafeAllocation          = "dbo.spPrimeflowHasMakeSafeAllocation"
	procReplaceJobSiteForms            = "dbo.spPrimeflowReplaceJobSiteForms"
	procGetSiteForm                    = "dbo.spPrimeflowGetSiteForm"
	procListJobSiteForms               = "dbo.spPrimeflowListJobSiteForms"
	procReplaceJobEstimates            = "dbo.spPrimeflowReplaceJobEstimates"
	procListJobEstimates               = "dbo.spPrimeflowListJobEstimates"
	procSaveContact                    = "dbo.spPrimeflowSaveContact"
	procGetContact                     = "dbo.spPrimeflowGetContact"
	procReplaceJobContactRelationships = "dbo.spPrimeflowReplaceJobContactRelationships"
	procListJobContactRelationships    = "dbo.spPrimeflowListJobContactRelationships"
	procQueueJobSummaryNow             = "dbo.spPrimeflowQueueJobSummaryNow"
	procGetJobSummaryQueue             = "dbo.spPrimeflowGetJobSummaryQueue"
)

// jsonTimeLayout is how a time travels in the procedures' JSON: ISO 8601
// without a zone, which OPENJSON reads into DATETIME2 the same way under
// every language setting. Times are UTC, cut to the millisecond.
const jsonTimeLayout = "2006-01-02T15:04:05.000"

// jsonTime is a time for the procedures' JSON; the zero time is null.
func jsonTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Truncate(time.Millisecond).Format(jsonTimeLayout)
	return &s
}

// jsonText is a string for the procedures' JSON; "" is null.
func jsonText(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// jsonGUID is a GUID for the procedures' JSON, lower-case; "" is null, and
// anything but a GUID is an error before the call.
func jsonGUID(what, s string) (*string, error) {
	if s == "" {
		return nil, nil
	}
	if !isGUID(s) {
		return nil, fmt.Errorf("mssql: %s %q is not a GUID", what, s)
	}
	s = strings.ToLower(s)
	return &s, nil
}

// jsonRows maps each of in to the JSON row a replace procedure reads with
// row, which returns the row's id too, and encodes them as the procedure's
// JSON array parameter (jsonParam): a record given twice is sent as its last
// copy, in the place of its first.
func jsonRows[In, Out any](in []In, row func(In) (id string, out Out, err error)) (string, error) {
	out := make([]Out, 0, len(in))
	at := map[string]int{}
	for _, r := range in {
		id, o, err := row(r)
		if err != nil {
			return "", err
		}
		if i, dup := at[id]; dup {
			out[i] = o
			continue
		}
		at[id] = len(out)
		out = append(out, o)
	}
	return jsonParam(out)
}

// jsonParam encodes rows as the JSON array a replace procedure reads.
func jsonParam(rows any) (string, error) {
	b, err := json.Marshal(rows)
	if err != nil {
		return "", fmt.Errorf("mssql: encode rows: %w", err)
	}
	return string(b), nil
}

// getOne calls a procedure that returns at most one row and scans it;
// found is false when it returns none.
func (s *Store) getOne(ctx context.Context, what, proc string, dest []any, args ...any) (bool, error) {
	err := s.q().QueryRowContext(ctx, proc, args...).Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("mssql: %s: %w", what, err)
	}
	return true, nil
}

// scanInt64 reads a nullable integer column; NULL is 0.
type scanInt64 struct{ n *int64 }

func (si scanInt64) Scan(v any) error {
	var n sql.NullInt64
	if err := n.Scan(v); err != nil {
		return err
	}
	*si.n = n.Int64
	return nil
}

// scanInt reads a nullable INT column; NULL is 0.
type scanInt struct{ n *int }

func (si scanInt) Scan(v any) error {
	var n sql.NullInt64
	if err := n.Scan(v); err != nil {
		return err
	}
	*si.n = int(n.Int64)
	return nil
}

// scanDecimal reads a DECIMAL column as text ("2068.0000"); NULL is "".
type scanDecimal struct{ s *string }

func (sd scanDecimal) Scan(v any) error {
	switch v := v.(type) {
	case nil:
		*sd.s = ""
	case []byte:
		*sd.s = string(v)
	case string:
		*sd.s = v
	case float64:
		*sd.s = fmt.Sprint(v)
	default:
		return fmt.Errorf("mssql: decimal column holds %T", v)
	}
	return nil
}

// guidArgs makes named UNIQUEIDENTIFIER arguments from name, value pairs;
// an empty value is NULL.
func guidArgs(pairs ...string) ([]any, error) {
	out := make([]any, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		v, err := guidParam(pairs[i+1])
		if err != nil {
			return nil, err
		}
		out = append(out, sql.Named(pairs[i], v))
	}
	return out, nil
}

// keyGUID is a GUID to look rows up by; ok is false for anything but a GUID,
// which no row's key can equal, so the lookup needs no call.
func keyGUID(s string) (id mssql.UniqueIdentifier, ok bool) {
	id, err := parseGUID(s)
	return id, err == nil
}
