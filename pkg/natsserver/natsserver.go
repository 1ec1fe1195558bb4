// Package natsserver runs an embedded nats-server with JetStream, for the
// all-in-one process and for tests.
package natsserver

import (
	"cmp"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Config of an embedded server.
type Config struct {
	// Listen is host:port for client connections; port -1 picks a free one.
	Listen string
	// StoreDir is where JetStream keeps its data.
	StoreDir string
	// ServerName names the server in monitoring output.
	ServerName string
	// MaxPayload is the largest message the server accepts, headers
	// included; 0 is MaxPayload.
	MaxPayload int32
}

// MaxPayload is the embedded server's max_payload: 4 MiB, as
// compose/nats/cluster.conf's "max_payload: 4MB". NATS's default of 1 MB is
// less than a webhook at ingest's body limit (INGEST_MAX_BODY_BYTES, 1 MiB)
// plus its headers, and such a row could never be published (§2: every
// stored webhook is handled).
const MaxPayload int32 = 4 << 20

// Start runs a server and waits until it accepts connections. The caller
// stops it with Shutdown and WaitForShutdown.
func Start(cfg Config) (*server.Server, error) {
	host, portStr, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("nats listen address %q: %w", cfg.Listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("nats listen port %q: %w", portStr, err)
	}
	opts := &server.Options{
		ServerName: cfg.ServerName,
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		NoSigs:     true,
		NoLog:      true,
		MaxPayload: cmp.Or(cfg.MaxPayload, MaxPayload),
	}
	if port > 0 {
		// The server, which logs nothing here, would only time out below
		// when the address is taken: say so at once, as the HTTP listeners do.
		ln, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("nats server cannot listen on %s (NATS_LISTEN): %w", cfg.Listen, err)
		}
		ln.Close()
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("nats server: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, fmt.Errorf("nats server on %s: not ready for connections after 10s", cfg.Listen)
	}
	return srv, nil
}
