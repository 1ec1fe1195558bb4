package mssql

import (
	"database/sql"
	"fmt"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/golang-sql/civil"
)

// Every parameter value that may go as NULL is made here, one constructor a
// SQL type, because go-mssqldb (v1.11.2, the newest served) does not write
// every typed NULL whole. A NULL mssql.NullUniqueIdentifier gets Size 16 and
// an empty buffer from makeParam (mssql.go), and writeGuidType (types.go)
// then writes the value's length byte, 0, followed by 16 zero bytes all the
// same: SQL Server reads those as one more, nameless parameter and refuses
// the call (Msg 8009, `Parameter N (""): Data type 0x00 is unknown`). An
// untyped nil goes as NULLTYPE (0x1F), whose type some servers refuse. The
// NULLs below are the ones the driver writes whole: sql.NullString{} as
// NVARCHAR(4000) with the length 0xFFFF (writeShortLenType), sql.NullTime{}
// as DATETIMEOFFSET(7) and sql.NullInt64{} as INTN(8), each with the length
// 0 and no data (writeByteLenType). TestEveryCallIsWellFormedOnTheWire reads
// every store method's requests back from the driver's bytes, and
// TestNullsAreMadeInParams keeps NULLs out of the other files.

// nullGUID is a NULL UNIQUEIDENTIFIER: the driver has no well-formed GUIDN
// NULL, so it goes as an NVARCHAR NULL, which the server converts.
func nullGUID() any { return sql.NullString{} }

// guidParam turns a GUID's text, in either case, into a UNIQUEIDENTIFIER
// parameter; "" is NULL.
func guidParam(s string) (any, error) {
	if s == "" {
		return nullGUID(), nil
	}
	return parseGUID(s)
}

// looseGUID sends a GUID-valued attribute that is not a GUID as NULL: the
// row's raw attributes keep what Prime sent, and one odd value must not stop
// the whole job from being mirrored.
func looseGUID(s string) any {
	if u, ok := jobGUID(s); ok {
		return u
	}
	return nullGUID()
}

// sqlString is an NVARCHAR parameter; the empty string is NULL.
func sqlString(s string) any {
	if s == "" {
		return sql.NullString{}
	}
	return s
}

// sqlTime is how a time goes to a DATETIME2(3) parameter: UTC (the driver
// sends a DATETIMEOFFSET, and SQL Server keeps its clock reading and drops the
// offset) and cut to the millisecond (the conversion would round instead).
// The zero time is NULL.
func sqlTime(t time.Time) any {
	if t.IsZero() {
		return sql.NullTime{}
	}
	return t.UTC().Truncate(time.Millisecond)
}

// sqlInt64 is an INT or BIGINT parameter; 0 is NULL.
func sqlInt64(n int64) any {
	if n == 0 {
		return sql.NullInt64{}
	}
	return n
}

// dateParam turns a YYYY-MM-DD date into a DATE parameter; "" is NULL.
func dateParam(s string) (any, error) {
	if s == "" {
		return sql.NullTime{}, nil
	}
	t, err := time.Parse(store.DateLayout, s)
	if err != nil {
		return nil, fmt.Errorf("mssql: date %q: want YYYY-MM-DD", s)
	}
	return civil.DateOf(t), nil
}
