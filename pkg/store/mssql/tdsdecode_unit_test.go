package mssql

import (
	"encoding/binary"
	"slices"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// rpcBytes is an RPC request for proc with the given parameters' bytes, as
// go-mssqldb frames one (a transaction descriptor header, no option flags).
func rpcBytes(proc string, params ...[]byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 22)
	b = binary.LittleEndian.AppendUint32(b, 18)
	b = binary.LittleEndian.AppendUint16(b, 2)
	b = binary.LittleEndian.AppendUint64(b, 0)
	b = binary.LittleEndian.AppendUint32(b, 1)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(proc)))
	b = append(b, ucs2(proc)...)
	b = append(b, 0, 0)
	for _, p := range params {
		b = append(b, p...)
	}
	return b
}

// paramBytes is a parameter: its name, status 0, then TYPE_INFO and value.
func paramBytes(name string, rest ...byte) []byte {
	b := append([]byte{byte(len(name))}, ucs2(name)...)
	return append(append(b, 0), rest...)
}

var collation = []byte{0x09, 0x04, 0xD0, 0x00, 0x34}

func nvarchar(maxLen int, value []byte) []byte {
	b := binary.LittleEndian.AppendUint16([]byte{tNVarChar}, uint16(maxLen))
	b = append(b, collation...)
	if value == nil {
		return binary.LittleEndian.AppendUint16(b, 0xFFFF)
	}
	return append(binary.LittleEndian.AppendUint16(b, uint16(len(value))), value...)
}

// The reader refuses what SQL Server refuses, and says where.
func TestWireDecoderRefusesMalformedParameters(t *testing.T) {
	guid := []byte{0x52, 0x3c, 0x6a, 0x0b, 0x0f, 0x3e, 0x57, 0x4a, 0x9a, 0x39, 0x2f, 0x1d, 0x7c, 0x1e, 0x4b, 0x10}
	for _, tc := range []struct {
		name string
		rpc  []byte
		want string // in the error; "" for none
	}{
		{"well-formed NULLs and values", rpcBytes("dbo.spX",
			paramBytes("@A", append([]byte{tGUID, 16, 16}, guid...)...),
			paramBytes("@B", tGUID, 16, 0),
			paramBytes("@C", nvarchar(8000, nil)...),
			paramBytes("@D", nvarchar(8000, ucs2("hé"))...),
			paramBytes("@E", tIntN, 8, 0),
			paramBytes("@F", tIntN, 4, 4, 7, 0, 0, 0),
			paramBytes("@G", tDTO, 7, 0),
			paramBytes("@H", tBitN, 1, 1, 1),
			paramBytes("@I", tNVarChar, 0xFF, 0xFF, 0x09, 0x04, 0xD0, 0x00, 0x34, // NVARCHAR(MAX), in two chunks
				0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 2, 0, 0, 0, 'a', 0, 2, 0, 0, 0, 'b', 0, 0, 0, 0, 0),
			paramBytes("@J", tTVP, 0, 3, 'd', 0, 'b', 0, 'o', 0, 1, 'T', 0, // dbo.T (BIGINT), two rows
				1, 0, 0, 0, 0, 0, 0, 0, tIntN, 8, 0, 0,
				1, 8, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0),
		), ""},
		{"a NULL mssql.NullUniqueIdentifier as go-mssqldb v1.11.2 writes it", rpcBytes("dbo.spX",
			paramBytes("@A", append([]byte{tGUID, 16, 0}, make([]byte, 16)...)...),
			paramBytes("@B", tIntN, 8, 0)), `parameter 2 (""): at byte`},
		{"a GUIDN of length 8", rpcBytes("dbo.spX", paramBytes("@A", tGUID, 8, 0)), "GUIDN with a length of 8"},
		{"an INTN holding 3 bytes", rpcBytes("dbo.spX", paramBytes("@A", tIntN, 4, 3, 1, 2, 3)), "INTN(4) holding 3 bytes"},
		{"an NVARCHAR longer than its length", rpcBytes("dbo.spX", paramBytes("@A", nvarchar(2, ucs2("ab"))...)), "NVARCHAR(2) holding 4 bytes"},
		{"an NVARCHAR of an odd length", rpcBytes("dbo.spX", paramBytes("@A", nvarchar(4000, []byte{'a'})...)), "odd 1 bytes"},
		{"a value cut short", rpcBytes("dbo.spX", paramBytes("@A", tIntN, 8, 8, 1, 2)), "8 bytes wanted, 2 left"},
		{"a PLP whose chunks disagree with its length", rpcBytes("dbo.spX", paramBytes("@A", tNVarChar, 0xFF, 0xFF, 0x09, 0x04, 0xD0, 0x00, 0x34,
			4, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 'a', 0, 0, 0, 0, 0)), "PLP length says 4 bytes and whose chunks hold 2"},
		{"a DATETIMEOFFSET of scale 9", rpcBytes("dbo.spX", paramBytes("@A", tDTO, 9, 0)), "scale 9"},
		{"a TVP row short of a column", rpcBytes("dbo.spX", paramBytes("@J", tTVP, 0, 3, 'd', 0, 'b', 0, 'o', 0, 1, 'T', 0,
			1, 0, 0, 0, 0, 0, 0, 0, tIntN, 8, 0, 0, 1, 4, 1, 0, 0, 0, 0)), "TVP row 1, column 1: at byte"},
		{"status flags the server does not know", rpcBytes("dbo.spX", append([]byte{2, '@', 0, 'A', 0, 0x10}, tIntN, 8, 0)), "status flags 0x10"},
		{"ALL_HEADERS longer than the message", append([]byte{0xFF, 0, 0, 0}, make([]byte, 20)...), "ALL_HEADERS of 255 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			rpc, err := decodeRPC(tc.rpc)
			if tc.want == "" {
				is.NoErr(err)
				is.Equal(rpc.proc, "dbo.spX")
				var nulls []bool
				for _, p := range rpc.params {
					nulls = append(nulls, p.null)
				}
				is.Equal(nulls, []bool{false, true, true, false, true, false, true, false, false, false}) // each value read as sent
				is.Equal(rpc.params[3].text(), "hé")
				is.Equal(rpc.params[8].text(), "ab")             // PLP chunks joined
				is.Equal(rpc.params[9].ti.tvpName, "dbo.T")      // the TVP's type
				is.Equal(len(rpc.params[9].rows), 2)             // and its rows
				is.True(slices.Equal(rpc.params[0].value, guid)) // a GUID's 16 bytes
				return
			}
			is.True(err != nil) // refused
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q lacks %q", err, tc.want)
			}
		})
	}
}

// The statement check finds a variable a query uses without declaring it,
// the mistake of a named placeholder bound by position.
func TestUndeclaredVariables(t *testing.T) {
	is := is.New(t)
	is.Equal(len(undeclared("INSERT INTO dbo.t (id) VALUES (@id)", []string{"@p1"})), 1)   // @id is not @p1
	is.Equal(len(undeclared("INSERT INTO dbo.t (id) VALUES (@p1)", []string{"@p1"})), 0)   // bound
	is.Equal(len(undeclared("EXEC dbo.spX @Id = @p1, @Name = N'x';", []string{"@p1"})), 0) // EXEC's parameter names are not variables
	is.Equal(len(undeclared("DECLARE @n INT = @@ROWCOUNT; SELECT @n -- @c\n", nil)), 0)    // declared, a system function, a comment
	is.Equal(len(undeclared("SELECT N'@literal', @missing", nil)), 1)                      // a string is not a variable
}
