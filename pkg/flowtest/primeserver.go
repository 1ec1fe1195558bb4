package flowtest

import (
	"net"
	"net/http"
	"sync"
	"testing"
)

// primeServer serves the Prime simulator on one loopback address that can
// be taken down — connections refused, as when Prime is unreachable — and
// brought back on the same address.
type primeServer struct {
	t    testing.TB
	h    http.Handler
	addr string

	mu  sync.Mutex
	srv *http.Server // nil while down
}

func startPrimeServer(t testing.TB, h http.Handler) *primeServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("prime simulator: %v", err)
	}
	s := &primeServer{t: t, h: h, addr: ln.Addr().String()}
	s.serve(ln)
	t.Cleanup(s.down)
	return s
}

func (s *primeServer) serve(ln net.Listener) {
	s.srv = &http.Server{Handler: s.h}
	go s.srv.Serve(ln)
}

// down closes the listener and every connection: calls are refused.
func (s *primeServer) down() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		s.srv.Close()
		s.srv = nil
	}
}

// up listens on the same address again.
func (s *primeServer) up() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		s.t.Fatalf("prime simulator back on %s: %v", s.addr, err)
	}
	s.serve(ln)
}

// StopPrime takes the Prime simulator off the network: every call to it is
// refused (no answer at all) until StartPrime.
func (e *Env) StopPrime() { e.prime.down() }

// StartPrime serves the Prime simulator again, on the same address.
func (e *Env) StartPrime() {
	e.T.Helper()
	e.prime.up()
}
