package mssql

// A TCP listener that speaks just enough TDS for go-mssqldb to log in and
// send its requests, so that the adapter's parameters go through the
// driver's real encoder (makeParam, writeTypeInfo, the write*Type
// functions) and can be read back from the bytes. It answers a pre-login
// with encryption not supported, a login with LOGINACK, a transaction
// request with the ENVCHANGE the driver waits for, and every query with an
// empty result: RETURNSTATUS 0 and DONEPROC for an RPC, DONE for a batch.
// It keeps every request whole, one message a request, for wire_test.go.

import (
	"bytes"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"unicode/utf16"
)

// TDS packet types (MS-TDS 2.2.3.1.1).
const (
	tdsSQLBatch   = 0x01
	tdsRPC        = 0x03
	tdsReply      = 0x04
	tdsAttention  = 0x06
	tdsTransMgr   = 0x0E
	tdsLogin7     = 0x10
	tdsPrelogin   = 0x12
	tdsStatusEOM  = 0x01
	tdsHeaderSize = 8
)

// tdsMessage is one request a client sent: its packet type and its
// payload, the packets' headers taken off.
type tdsMessage struct {
	kind byte
	data []byte
}

// tdsServer listens on a loopback port; every message after the login is
// kept for take.
type tdsServer struct {
	ln     net.Listener
	mu     sync.Mutex
	got    []tdsMessage
	failed []error // what the server could not read or answer
	conns  sync.WaitGroup
	tranID uint64
}

// startTDSServer listens until the test ends.
func startTDSServer(t *testing.T) *tdsServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	s := &tdsServer{ln: ln}
	var open []net.Conn
	var openMu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			openMu.Lock()
			open = append(open, c)
			openMu.Unlock()
			s.conns.Go(func() { s.serve(c) })
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		openMu.Lock()
		for _, c := range open {
			c.Close()
		}
		openMu.Unlock()
		s.conns.Wait()
		for _, err := range s.failed {
			t.Errorf("TDS server: %v", err)
		}
	})
	return s
}

// db opens a pool on the server through the adapter's own connector.
func (s *tdsServer) db(t *testing.T) *sql.DB {
	t.Helper()
	c, err := connector("sqlserver://primeflow:secret@" + s.ln.Addr().String() + "?database=wire&encrypt=disable&dial+timeout=5&connection+timeout=0")
	if err != nil {
		t.Fatalf("connector: %v", err)
	}
	db := sql.OpenDB(c)
	t.Cleanup(func() { db.Close() })
	return db
}

// take returns the requests kept since the last take.
func (s *tdsServer) take() []tdsMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.got
	s.got = nil
	return out
}

func (s *tdsServer) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failed = append(s.failed, err)
}

// serve answers one connection until the client closes it.
func (s *tdsServer) serve(c net.Conn) {
	defer c.Close()
	for {
		m, err := readTDSMessage(c)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.fail(err)
			}
			return
		}
		var reply []byte
		switch m.kind {
		case tdsPrelogin:
			reply = preloginReply()
		case tdsLogin7:
			reply = loginReply()
		case tdsTransMgr:
			s.keep(m)
			reply, err = s.transReply(m.data)
		case tdsRPC:
			s.keep(m)
			reply = append(tokenReturnStatus(0), tokenDone(0xFE, 0)...)
		case tdsSQLBatch:
			s.keep(m)
			reply = tokenDone(0xFD, 0)
		case tdsAttention:
			reply = tokenDone(0xFD, 0x20) // DONE_ATTN
		default:
			err = fmt.Errorf("a message of packet type 0x%02x, which this server does not answer", m.kind)
		}
		if err != nil {
			s.fail(err)
			return
		}
		if err := writeTDSMessage(c, tdsReply, reply); err != nil {
			return
		}
	}
}

func (s *tdsServer) keep(m tdsMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, m)
}

// transReply answers TM_BEGIN_XACT with the transaction descriptor the
// driver sends its statements under, and a commit or rollback with its end.
func (s *tdsServer) transReply(data []byte) ([]byte, error) {
	r := &wireReader{b: data}
	if err := r.allHeaders(); err != nil {
		return nil, err
	}
	kind := r.u16()
	if r.err != nil {
		return nil, r.err
	}
	var env []byte
	switch kind {
	case 5: // TM_BEGIN_XACT
		s.mu.Lock()
		s.tranID++
		id := s.tranID
		s.mu.Unlock()
		env = []byte{8, 8} // BeginTransaction, a new value of 8 bytes
		env = binary.LittleEndian.AppendUint64(env, id)
		env = append(env, 0) // no old value
	case 7, 8: // TM_COMMIT_XACT, TM_ROLLBACK_XACT
		env = []byte{byte(kind + 2), 0, 8, 0, 0, 0, 0, 0, 0, 0, 0} // Commit/RollbackTransaction: no new value, the old one
	default:
		return nil, fmt.Errorf("transaction manager request %d, which this server does not answer", kind)
	}
	tok := []byte{0xE3}
	tok = binary.LittleEndian.AppendUint16(tok, uint16(len(env)))
	return append(append(tok, env...), tokenDone(0xFD, 0)...), nil
}

// readTDSMessage reads packets up to the one marked end of message.
func readTDSMessage(r io.Reader) (tdsMessage, error) {
	var m tdsMessage
	hdr := make([]byte, tdsHeaderSize)
	for first := true; ; first = false {
		if _, err := io.ReadFull(r, hdr); err != nil {
			if !first && errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return m, err
		}
		n := int(binary.BigEndian.Uint16(hdr[2:4]))
		if n < tdsHeaderSize {
			return m, fmt.Errorf("a packet of length %d, shorter than its header", n)
		}
		if !first && hdr[0] != m.kind {
			return m, fmt.Errorf("a message of packet type 0x%02x continued by one of type 0x%02x", m.kind, hdr[0])
		}
		m.kind = hdr[0]
		body := make([]byte, n-tdsHeaderSize)
		if _, err := io.ReadFull(r, body); err != nil {
			return m, fmt.Errorf("read a packet's %d bytes: %w", len(body), err)
		}
		m.data = append(m.data, body...)
		if hdr[1]&tdsStatusEOM != 0 {
			return m, nil
		}
	}
}

// writeTDSMessage sends data as one packet (the replies here are small).
func writeTDSMessage(w io.Writer, kind byte, data []byte) error {
	hdr := []byte{kind, tdsStatusEOM, 0, 0, 0, 0, 1, 0}
	binary.BigEndian.PutUint16(hdr[2:4], uint16(tdsHeaderSize+len(data)))
	_, err := w.Write(append(hdr, data...))
	return err
}

// preloginReply says VERSION and ENCRYPT_NOT_SUP, so the login and every
// request after it are in the clear.
func preloginReply() []byte {
	const options = 2*5 + 1
	b := []byte{0x00, 0, options, 0, 6, 0x01, 0, options + 6, 0, 1, 0xFF}
	b = append(b, 16, 0, 0x07, 0xD0, 0, 0) // version 16.0.2000
	return append(b, 2)                    // ENCRYPT_NOT_SUP
}

// loginReply acknowledges a login as TDS 7.4.
func loginReply() []byte {
	prog := ucs2("primeflow wire test")
	ack := []byte{1, 0x74, 0x00, 0x00, 0x04, byte(len(prog) / 2)}
	ack = append(ack, prog...)
	ack = append(ack, 16, 0, 0x07, 0xD0)
	tok := []byte{0xAD}
	tok = binary.LittleEndian.AppendUint16(tok, uint16(len(ack)))
	return append(append(tok, ack...), tokenDone(0xFD, 0)...)
}

func tokenReturnStatus(v int32) []byte {
	return binary.LittleEndian.AppendUint32([]byte{0x79}, uint32(v))
}

// tokenDone is a DONE (0xFD) or DONEPROC (0xFE) with no rows counted.
func tokenDone(kind byte, status uint16) []byte {
	b := binary.LittleEndian.AppendUint16([]byte{kind}, status)
	b = binary.LittleEndian.AppendUint16(b, 0)
	return binary.LittleEndian.AppendUint64(b, 0)
}

func ucs2(s string) []byte {
	var b bytes.Buffer
	for _, u := range utf16.Encode([]rune(s)) {
		b.WriteByte(byte(u))
		b.WriteByte(byte(u >> 8))
	}
	return b.Bytes()
}
