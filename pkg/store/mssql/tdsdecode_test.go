package mssql

// Reading a request back from the bytes go-mssqldb wrote, as strictly as
// SQL Server reads it (MS-TDS 2.2.6.6 RPC Request, 2.2.5.4 data type
// definitions, 2.2.5.5.5 table-valued parameters): every length prefix must
// agree with the bytes that follow it, every TYPE_INFO must be one the
// server accepts, and the parameters must end exactly where the message
// does. The server reads parameters until the message ends, so bytes a
// malformed value leaves behind become one more parameter, nameless, of
// whatever type their first byte says ("Parameter 4 (""): Data type 0x00 is
// unknown", Msg 8009); the reader here does the same.

import (
	"encoding/binary"
	"fmt"
	"strings"
	"unicode/utf16"
)

// wireParam is one parameter of an RPC request, or one column of a TVP.
type wireParam struct {
	name   string // with its @; "" for a positional one
	status byte
	ti     wireType
	null   bool
	value  []byte        // the data, PLP chunks joined; nil when null
	rows   [][]wireParam // a TVP's rows
}

// wireType is a TYPE_INFO.
type wireType struct {
	id        byte
	maxLen    int  // the TYPE_INFO's length: bytes, or 0xFFFF for a PLP (MAX) type
	plp       bool // a MAX type, its value sent in chunks
	prec      byte
	scale     byte
	collation []byte
	tvpName   string     // schema.name of a TVP's table type
	cols      []wireType // a TVP's columns
}

// wireRPC is one RPC request.
type wireRPC struct {
	proc   string // the procedure's name as sent, or sp_executesql for ProcID 10
	params []wireParam
}

// The data types of MS-TDS 2.2.5.4.
const (
	tNull      = 0x1F
	tInt1      = 0x30
	tBit       = 0x32
	tInt2      = 0x34
	tInt4      = 0x38
	tDateTim4  = 0x3A
	tFlt4      = 0x3B
	tMoney     = 0x3C
	tDateTime  = 0x3D
	tFlt8      = 0x3E
	tMoney4    = 0x7A
	tInt8      = 0x7F
	tGUID      = 0x24
	tIntN      = 0x26
	tDate      = 0x28
	tTime      = 0x29
	tDateTime2 = 0x2A
	tDTO       = 0x2B
	tBitN      = 0x68
	tDecimalN  = 0x6A
	tNumericN  = 0x6C
	tFltN      = 0x6D
	tMoneyN    = 0x6E
	tDateTimeN = 0x6F
	tVarBinary = 0xA5
	tVarChar   = 0xA7
	tBinary    = 0xAD
	tChar      = 0xAF
	tNVarChar  = 0xE7
	tNChar     = 0xEF
	tXML       = 0xF1
	tTVP       = 0xF3
)

var fixedLen = map[byte]int{tInt1: 1, tBit: 1, tInt2: 2, tInt4: 4, tDateTim4: 4, tFlt4: 4, tMoney: 8,
	tDateTime: 8, tFlt8: 8, tMoney4: 4, tInt8: 8}

var typeNames = map[byte]string{tNull: "NULLTYPE", tInt1: "INT1", tBit: "BIT", tInt2: "INT2", tInt4: "INT4",
	tDateTim4: "DATETIM4", tFlt4: "FLT4", tMoney: "MONEY", tDateTime: "DATETIME", tFlt8: "FLT8", tMoney4: "MONEY4",
	tInt8: "INT8", tGUID: "GUIDN", tIntN: "INTN", tDate: "DATEN", tTime: "TIMEN", tDateTime2: "DATETIME2N",
	tDTO: "DATETIMEOFFSETN", tBitN: "BITN", tDecimalN: "DECIMALN", tNumericN: "NUMERICN", tFltN: "FLTN",
	tMoneyN: "MONEYN", tDateTimeN: "DATETIMN", tVarBinary: "BIGVARBINARY", tVarChar: "BIGVARCHAR",
	tBinary: "BIGBINARY", tChar: "BIGCHAR", tNVarChar: "NVARCHAR", tNChar: "NCHAR", tXML: "XML", tTVP: "TVP"}

// kind is the type's name alone.
func (ti wireType) kind() string {
	if n, ok := typeNames[ti.id]; ok {
		return n
	}
	return fmt.Sprintf("0x%02X", ti.id)
}

func (ti wireType) String() string {
	n := ti.kind()
	switch {
	case ti.id == tTVP:
		return n + " " + ti.tvpName
	case ti.plp:
		return n + "(MAX)"
	case ti.maxLen > 0:
		return fmt.Sprintf("%s(%d)", n, ti.maxLen)
	}
	return n
}

// wireReader reads a message; the first failure sticks.
type wireReader struct {
	b   []byte
	off int
	err error
}

func (r *wireReader) failf(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("at byte %d: %s", r.off, fmt.Sprintf(format, args...))
	}
}

func (r *wireReader) next(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || r.off+n > len(r.b) {
		r.failf("%d bytes wanted, %d left", n, len(r.b)-r.off)
		return nil
	}
	out := r.b[r.off : r.off+n]
	r.off += n
	return out
}

func (r *wireReader) u8() byte {
	if b := r.next(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *wireReader) u16() int {
	if b := r.next(2); b != nil {
		return int(binary.LittleEndian.Uint16(b))
	}
	return 0
}

func (r *wireReader) u32() uint32 {
	if b := r.next(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *wireReader) u64() uint64 {
	if b := r.next(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// text reads n UCS-2 characters.
func (r *wireReader) text(n int) string {
	b := r.next(2 * n)
	u := make([]uint16, len(b)/2)
	for i := range u {
		u[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return string(utf16.Decode(u))
}

func (r *wireReader) bVarChar() string  { return r.text(int(r.u8())) }
func (r *wireReader) usVarChar() string { return r.text(r.u16()) }
func (r *wireReader) left() int         { return len(r.b) - r.off }

// allHeaders reads ALL_HEADERS: its total length must be the sum of its
// headers' lengths.
func (r *wireReader) allHeaders() error {
	start := r.off
	total := int(r.u32())
	if r.err == nil && (total < 4 || start+total > len(r.b)) {
		r.failf("ALL_HEADERS of %d bytes in a message of %d", total, len(r.b))
	}
	for r.err == nil && r.off < start+total {
		n := int(r.u32())
		if r.err == nil && (n < 6 || r.off-4+n > start+total) {
			r.failf("a header of %d bytes overruns ALL_HEADERS", n)
		}
		r.next(n - 4)
	}
	if r.err == nil && r.off != start+total {
		r.failf("ALL_HEADERS says %d bytes, its headers take %d", total, r.off-start)
	}
	return r.err
}

// decodeRPC reads an RPC request. It fails on the first length prefix that
// disagrees with what follows, on a TYPE_INFO SQL Server refuses, and on
// bytes left over.
func decodeRPC(data []byte) (wireRPC, error) {
	r := &wireReader{b: data}
	var rpc wireRPC
	if err := r.allHeaders(); err != nil {
		return rpc, err
	}
	if n := r.u16(); n == 0xFFFF {
		switch id := r.u16(); id {
		case 10:
			rpc.proc = "sp_executesql"
		default:
			r.failf("ProcID %d, not one the driver sends", id)
		}
	} else {
		rpc.proc = r.text(n)
	}
	if flags := r.u16(); flags != 0 {
		r.failf("option flags 0x%04x", flags)
	}
	if r.err != nil {
		return rpc, fmt.Errorf("%s: %w", rpc.proc, r.err)
	}
	for r.left() > 0 {
		if b := r.b[r.off]; b == 0xFF || b == 0x80 {
			return rpc, fmt.Errorf("%s: at byte %d: a second RPC in the request (batch flag 0x%02X)", rpc.proc, r.off, b)
		}
		var p wireParam
		p.name = r.bVarChar()
		p.status = r.u8()
		if r.err == nil && p.status&^0x03 != 0 {
			r.failf("status flags 0x%02x", p.status)
		}
		p.ti = readTypeInfo(r)
		readValue(r, &p)
		if r.err != nil {
			return rpc, fmt.Errorf("%s: parameter %d (%q): %w", rpc.proc, len(rpc.params)+1, p.name, r.err)
		}
		rpc.params = append(rpc.params, p)
	}
	return rpc, nil
}

// timeLen is the length of a TIME's part of a value at scale s.
func timeLen(s byte) int {
	switch {
	case s <= 2:
		return 3
	case s <= 4:
		return 4
	}
	return 5
}

// readTypeInfo reads a TYPE_INFO and refuses one the server refuses.
func readTypeInfo(r *wireReader) wireType {
	ti := wireType{id: r.u8()}
	if r.err != nil {
		return ti
	}
	oneOf := func(n int, ok ...int) {
		for _, o := range ok {
			if n == o {
				return
			}
		}
		r.failf("%s with a length of %d (it takes %v)", ti.kind(), n, ok)
	}
	if n, ok := fixedLen[ti.id]; ok {
		ti.maxLen = n
		return ti
	}
	switch ti.id {
	case tNull:
	case tGUID:
		ti.maxLen = int(r.u8())
		oneOf(ti.maxLen, 16)
	case tIntN:
		ti.maxLen = int(r.u8())
		oneOf(ti.maxLen, 1, 2, 4, 8)
	case tBitN:
		ti.maxLen = int(r.u8())
		oneOf(ti.maxLen, 1)
	case tFltN, tMoneyN, tDateTimeN:
		ti.maxLen = int(r.u8())
		oneOf(ti.maxLen, 4, 8)
	case tDecimalN, tNumericN:
		ti.maxLen = int(r.u8())
		oneOf(ti.maxLen, 5, 9, 13, 17)
		ti.prec, ti.scale = r.u8(), r.u8()
		if r.err == nil && (ti.prec < 1 || ti.prec > 38 || ti.scale > ti.prec) {
			r.failf("%s with precision %d and scale %d", ti.kind(), ti.prec, ti.scale)
		}
	case tDate:
		ti.maxLen = 3
	case tTime, tDateTime2, tDTO:
		ti.scale = r.u8()
		if r.err == nil && ti.scale > 7 {
			r.failf("%s with scale %d", ti.kind(), ti.scale)
		}
		ti.maxLen = timeLen(ti.scale) + map[byte]int{tTime: 0, tDateTime2: 3, tDTO: 5}[ti.id]
	case tVarBinary, tVarChar, tBinary, tChar, tNVarChar, tNChar:
		ti.maxLen = r.u16()
		if ti.id == tVarChar || ti.id == tChar || ti.id == tNVarChar || ti.id == tNChar {
			ti.collation = r.next(5)
		}
		switch {
		case r.err != nil:
		case ti.maxLen == 0xFFFF && (ti.id == tVarBinary || ti.id == tVarChar || ti.id == tNVarChar):
			ti.plp = true
		case ti.maxLen == 0 || ti.maxLen > 8000:
			r.failf("%s with a length of %d (1 to 8000, or 0xFFFF for MAX)", ti.kind(), ti.maxLen)
		case (ti.id == tNVarChar || ti.id == tNChar) && ti.maxLen%2 != 0:
			r.failf("%s with an odd length of %d bytes", ti.kind(), ti.maxLen)
		}
	case tXML:
		ti.plp = true
		if r.u8() == 1 {
			r.bVarChar()
			r.bVarChar()
			r.usVarChar()
		}
	case tTVP:
		if db := r.bVarChar(); db != "" && r.err == nil {
			r.failf("a TVP type in database %q (it must be empty)", db)
		}
		schema, name := r.bVarChar(), r.bVarChar()
		if r.err == nil && name == "" {
			r.failf("a TVP without a type name")
		}
		ti.tvpName = name
		if schema != "" {
			ti.tvpName = schema + "." + name
		}
	default:
		r.failf("data type 0x%02X is unknown", ti.id)
	}
	return ti
}

// readValue reads p's value as its TYPE_INFO says.
func readValue(r *wireReader, p *wireParam) {
	ti := p.ti
	if r.err != nil {
		return
	}
	switch {
	case ti.id == tNull:
		p.null = true
	case fixedLen[ti.id] > 0:
		p.value = r.next(ti.maxLen)
	case ti.id == tTVP:
		readTVP(r, p)
	case ti.plp:
		total := r.u64()
		if total == 0xFFFFFFFFFFFFFFFF {
			p.null = true
			return
		}
		v := []byte{}
		for r.err == nil {
			n := int(r.u32())
			if n == 0 {
				break
			}
			v = append(v, r.next(n)...)
		}
		if r.err == nil && total != 0xFFFFFFFFFFFFFFFE && uint64(len(v)) != total {
			r.failf("%s whose PLP length says %d bytes and whose chunks hold %d", ti, total, len(v))
		}
		if r.err == nil && ti.id == tNVarChar && len(v)%2 != 0 {
			r.failf("%s of an odd %d bytes", ti, len(v))
		}
		p.value = v
	case ti.id == tVarBinary || ti.id == tVarChar || ti.id == tBinary || ti.id == tChar || ti.id == tNVarChar || ti.id == tNChar:
		n := r.u16()
		if n == 0xFFFF {
			p.null = true
			return
		}
		if r.err == nil && n > ti.maxLen {
			r.failf("%s holding %d bytes", ti, n)
		}
		if r.err == nil && (ti.id == tNVarChar || ti.id == tNChar) && n%2 != 0 {
			r.failf("%s of an odd %d bytes", ti, n)
		}
		p.value = r.next(n)
	default: // a BYTELEN value: 0 is NULL, otherwise the type's length
		n := int(r.u8())
		if n == 0 {
			p.null = true
			return
		}
		if r.err != nil {
			return
		}
		ok := n == ti.maxLen
		if ti.id == tDecimalN || ti.id == tNumericN {
			ok = n <= ti.maxLen && (n == 5 || n == 9 || n == 13 || n == 17)
		}
		if !ok {
			r.failf("%s holding %d bytes", ti, n)
			return
		}
		p.value = r.next(n)
	}
}

// readTVP reads a table-valued parameter's columns and rows
// (TVP_COLMETADATA, the optional ordering tokens, TVP_END_TOKEN, then
// TVP_ROW_TOKEN rows up to a TVP_END_TOKEN).
func readTVP(r *wireReader, p *wireParam) {
	n := r.u16()
	if n == 0xFFFF {
		p.null = true
	}
	defaults := map[int]bool{}
	for i := 0; i < n && n != 0xFFFF && r.err == nil; i++ {
		r.u32() // UserType
		flags := r.u16()
		col := readTypeInfo(r)
		if col.id == tTVP && r.err == nil {
			r.failf("a TVP column of TVP type")
		}
		if name := r.bVarChar(); name != "" && r.err == nil {
			r.failf("TVP column %d named %q (it must be empty)", i+1, name)
		}
		defaults[i] = flags&0x0200 != 0 // fDefault: no data in the rows
		p.ti.cols = append(p.ti.cols, col)
	}
	for r.err == nil {
		switch tok := r.u8(); tok {
		case 0x10: // TVP_ORDER_UNIQUE
			r.next(3 * r.u16())
			continue
		case 0x11: // TVP_COLUMN_ORDERING
			r.next(2 * r.u16())
			continue
		case 0x00:
		default:
			r.failf("token 0x%02X after a TVP's columns", tok)
		}
		break
	}
	for r.err == nil {
		tok := r.u8()
		if tok == 0x00 {
			return
		}
		if tok != 0x01 {
			r.failf("token 0x%02X where a TVP row or its end belongs", tok)
			return
		}
		var row []wireParam
		for i, col := range p.ti.cols {
			c := wireParam{ti: col}
			if !defaults[i] {
				readValue(r, &c)
			}
			if r.err != nil {
				r.err = fmt.Errorf("TVP row %d, column %d: %w", len(p.rows)+1, i+1, r.err)
				return
			}
			row = append(row, c)
		}
		p.rows = append(p.rows, row)
	}
}

// decodeBatch reads a SQL batch's text.
func decodeBatch(data []byte) (string, error) {
	r := &wireReader{b: data}
	if err := r.allHeaders(); err != nil {
		return "", err
	}
	if r.left()%2 != 0 {
		return "", fmt.Errorf("a batch of an odd %d bytes of text", r.left())
	}
	return r.text(r.left() / 2), r.err
}

// text is a character value's text.
func (p wireParam) text() string {
	if p.ti.id == tNVarChar || p.ti.id == tNChar {
		return (&wireReader{b: p.value}).text(len(p.value) / 2)
	}
	return string(p.value)
}

func (p wireParam) String() string {
	if p.null {
		return fmt.Sprintf("%s %s NULL", p.name, p.ti)
	}
	v := fmt.Sprintf("%x", p.value)
	if p.ti.id == tNVarChar || p.ti.id == tNChar {
		v = fmt.Sprintf("%q", p.text())
	}
	if len(v) > 80 {
		v = v[:77] + "…"
	}
	return strings.TrimSpace(fmt.Sprintf("%s %s %s", p.name, p.ti, v))
}
