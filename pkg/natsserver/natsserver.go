// Package natsserver runs an embedded nats-server with JetStream, for the
// all-in-one process and for tests.
package natsserver

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/config"
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
	// MonitorListen is host:port for the HTTP monitoring endpoints
	// (/varz, /jsz …, what prometheus-nats-exporter reads); port -1 picks a
	// free one (Server.MonitorAddr says which); empty serves none.
	MonitorListen string
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
	opts, err := cfg.options()
	if err != nil {
		return nil, err
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

// Free checks that the server could listen where cfg says, without
// starting it or writing anything (Start checks again): bin/primeflow asks
// before it makes its data folder, so that a port in use stops it naming
// NATS_LISTEN or NATS_MONITOR_LISTEN with nothing written.
func (cfg Config) Free() error {
	_, err := cfg.options()
	return err
}

// Validate refuses addresses of the wrong form, without listening on them,
// each naming its variable (config.Refusal).
func (cfg Config) Validate() error {
	_, _, err := cfg.addresses()
	return err
}

// address is a host and port, read from a "host:port" setting.
type address struct {
	host string
	port int
}

// addresses are the client and monitoring addresses, once their form is
// checked; the monitoring one is zero when cfg.MonitorListen is empty.
func (cfg Config) addresses() (client, monitor address, err error) {
	var errs []error
	if client.host, client.port, err = hostPort(cfg.Listen); err != nil {
		errs = append(errs, config.Refuse("NATS_LISTEN", "want host:port, the port -1 for a free one: %v", err))
	}
	if cfg.MonitorListen != "" {
		monitor.host, monitor.port, err = hostPort(cfg.MonitorListen)
		if err == nil && (monitor.port == 0 || monitor.port < -1) {
			// 0 is "no monitoring" to nats-server: a port asked for and not
			// served would be found missing only when something reads it.
			err = fmt.Errorf("port %d", monitor.port)
		}
		if err != nil {
			errs = append(errs, config.Refuse("NATS_MONITOR_LISTEN", "want host:port, the port -1 for a free one: %v", err))
		}
	}
	return client, monitor, errors.Join(errs...)
}

// options are the server's options, once its addresses are checked and
// found free.
func (cfg Config) options() (*server.Options, error) {
	client, monitor, err := cfg.addresses()
	if err != nil {
		return nil, err
	}
	opts := &server.Options{
		ServerName: cfg.ServerName,
		Host:       client.host,
		Port:       client.port,
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		NoSigs:     true,
		NoLog:      true,
		MaxPayload: cmp.Or(cfg.MaxPayload, MaxPayload),
	}
	if err := free(cfg.Listen, client.port, "NATS_LISTEN"); err != nil {
		return nil, err
	}
	if cfg.MonitorListen != "" {
		if err := free(cfg.MonitorListen, monitor.port, "NATS_MONITOR_LISTEN"); err != nil {
			return nil, err
		}
		opts.HTTPHost, opts.HTTPPort = monitor.host, monitor.port
	}
	return opts, nil
}

func hostPort(addr string) (string, int, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return "", 0, fmt.Errorf("port %q: %w", portStr, err)
	}
	return host, port, nil
}

// free fails when addr, a fixed port, is taken: the server, which logs
// nothing here, would only time out (or serve no monitoring) when the
// address is taken; say so at once, as the HTTP listeners do.
func free(addr string, port int, variable string) error {
	if port <= 0 {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("nats server cannot listen on %s (%s): %w", addr, variable, err)
	}
	return ln.Close()
}
