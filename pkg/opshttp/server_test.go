package opshttp_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/opshttp"
	"github.com/matryer/is"
)

// A flood of connections that never finish their headers is served
// HTTP_MAX_CONNS at a time: the others wait to be accepted, and each is
// closed by the header timeout once it is.
func TestListenCapsConnections(t *testing.T) {
	is := is.New(t)
	c := opshttp.DefaultServerConfig()
	c.ReadHeaderTimeout, c.MaxConns = 200*time.Millisecond, 2
	ln, err := c.Listen("127.0.0.1:0", "HTTP_ADDR")
	is.NoErr(err) // listens
	srv := c.Server(http.NotFoundHandler())
	counted := &countingListener{Listener: ln}
	go srv.Serve(counted)
	t.Cleanup(func() { srv.Close() })

	conns := make([]net.Conn, 8)
	for i := range conns {
		conns[i], err = net.Dial("tcp", ln.Addr().String())
		is.NoErr(err) // the kernel queues the connection
		io.WriteString(conns[i], "GET / HTTP/1.1\r\nHost:")
	}
	for _, conn := range conns {
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, err := io.Copy(io.Discard, conn)
		is.True(!errors.Is(err, os.ErrDeadlineExceeded)) // each is closed in its turn
		conn.Close()
	}
	counted.mu.Lock()
	defer counted.mu.Unlock()
	is.Equal(counted.most, 2) // never more than HTTP_MAX_CONNS at once
}

// countingListener counts the connections open between Accept and Close.
// The count drops before the limited connection's Close gives its slot back,
// so the next Accept cannot be counted beside it (http.Server's ConnState
// reports StateClosed only after Close, which would).
type countingListener struct {
	net.Listener
	mu         sync.Mutex
	open, most int
}

func (l *countingListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open++
	l.most = max(l.most, l.open)
	return &countedConn{Conn: conn, l: l}, nil
}

type countedConn struct {
	net.Conn
	l    *countingListener
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		defer c.l.mu.Unlock()
		c.l.open--
	})
	return c.Conn.Close()
}

func TestServerConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*opshttp.ServerConfig)
		want   string
	}{
		{"defaults", func(*opshttp.ServerConfig) {}, ""},
		{"no read timeout", func(c *opshttp.ServerConfig) { c.ReadTimeout = 0 }, "HTTP_READ_TIMEOUT: must be above zero"},
		{"no idle timeout", func(c *opshttp.ServerConfig) { c.IdleTimeout = 0 }, "HTTP_IDLE_TIMEOUT"},
		{"no cap", func(c *opshttp.ServerConfig) { c.MaxConns = 0 }, "HTTP_MAX_CONNS"},
		{"headers longer than the request", func(c *opshttp.ServerConfig) { c.ReadHeaderTimeout = time.Hour }, "HTTP_READ_HEADER_TIMEOUT"},
		{"no time to answer a late body", func(c *opshttp.ServerConfig) { c.WriteTimeout = time.Second }, "HTTP_WRITE_TIMEOUT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			c := opshttp.DefaultServerConfig()
			tc.change(&c)
			err := c.Validate()
			if tc.want == "" {
				is.NoErr(err) // the defaults work
				return
			}
			is.True(err != nil)                             // refused
			is.True(strings.Contains(err.Error(), tc.want)) // naming the variable
		})
	}
}
