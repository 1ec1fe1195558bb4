package mssql

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/matryer/is"
	mssql "github.com/microsoft/go-mssqldb"
)

// SQL Server puts 0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10 on the wire with its
// first three groups byte-reversed.
var wireGUID = []byte{0x52, 0x3c, 0x6a, 0x0b, 0x0f, 0x3e, 0x57, 0x4a, 0x9a, 0x39, 0x2f, 0x1d, 0x7c, 0x1e, 0x4b, 0x10}

func TestScanGUID(t *testing.T) {
	is := is.New(t)
	var s string
	is.NoErr(scanGUID{&s}.Scan(wireGUID))
	is.Equal(s, "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10") // canonical, lower case, groups in order
	is.NoErr(scanGUID{&s}.Scan(nil))
	is.Equal(s, "")                                    // NULL is empty
	is.True(scanGUID{&s}.Scan([]byte{1, 2, 3}) != nil) // not 16 bytes
}

func TestGUIDParam(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want any
		ok   bool
	}{
		{"0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10", wireGUID, true},
		{"0B6A3C52-3E0F-4A57-9A39-2F1D7C1E4B10", wireGUID, true},
		{"", nil, true},
		{"259047", nil, false},
		{"{0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10}", nil, false},
		{"0b6a3c523e0f4a579a392f1d7c1e4b10", nil, false},
		{"0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b1g", nil, false},
		{"0b6a3c5-23e0f-4a57-9a39-2f1d7c1e4b10", nil, false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			is := is.New(t)
			p, err := guidParam(tc.in)
			is.Equal(err == nil, tc.ok) // accepted only in the canonical form, either case
			if !tc.ok {
				return
			}
			if tc.in == "" {
				is.Equal(p, nullGUID()) // "" is NULL, of a type the driver writes whole
				return
			}
			v, err := p.(mssql.UniqueIdentifier).Value()
			is.NoErr(err)
			is.Equal(v, tc.want) // the bytes SQL Server expects
		})
	}
}

func TestStatusParam(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want string
	}{
		{"short", "Processed", "Processed"},
		{"two-byte UTF-8 counts once", strings.Repeat("é", 700), strings.Repeat("é", store.MaxStatusLen)},
		{"astral characters take two units", strings.Repeat("😀", 300), strings.Repeat("😀", store.MaxStatusLen/2)},
		{"a pair is never split", strings.Repeat("a", 499) + "😀b", strings.Repeat("a", 499)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			got := statusParam(tc.in)
			is.Equal(got, tc.want)         // cut to what NVARCHAR(500) holds
			is.True(utf8.ValidString(got)) // on a character boundary
		})
	}
}
