// Command healthcheck is the container health check of the primeflow images.
// It asks the service in its own container for /healthz with the admin Basic
// auth credentials from the service's own environment (OPS_ADDR, or HTTP_ADDR
// when it is not set; ADMIN_USER; ADMIN_PASSWORD, or the file
// ADMIN_PASSWORD_FILE names, as pkg/config reads it) and exits 0 only on 200
// OK.
//
// The images are distroless (no shell, no curl), and reading the credentials
// from the environment keeps them out of the command line that
// `docker inspect` shows.
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// defaultAddr is service.Config's HTTP_ADDR default (pkg/service).
const defaultAddr = "127.0.0.1:8080"

// timeout stays under the compose healthcheck's timeout (5s), so a slow
// answer is reported as ours rather than killed.
const timeout = 4 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Getenv, http.DefaultClient); err != nil {
		fmt.Fprintln(os.Stderr, "healthcheck:", err)
		os.Exit(1)
	}
}

// run checks /healthz once; nil means healthy.
func run(ctx context.Context, getenv func(string) string, client *http.Client) error {
	addr, name := getenv("OPS_ADDR"), "OPS_ADDR"
	if addr == "" {
		addr, name = getenv("HTTP_ADDR"), "HTTP_ADDR"
	}
	url, err := healthzURL(addr, name)
	if err != nil {
		return err
	}
	password := getenv("ADMIN_PASSWORD")
	if file := getenv("ADMIN_PASSWORD_FILE"); file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("ADMIN_PASSWORD_FILE: %w", err)
		}
		password = strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("request %s: %w", url, err)
	}
	req.SetBasicAuth(getenv("ADMIN_USER"), password)
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("get %s: %w", url, err)
	}
	defer resp.Body.Close()
	// /healthz names the failing checks in its body; it holds no secret.
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("get %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// healthzURL is the /healthz URL of a service listening on addr (the
// variable name: ":8080", "0.0.0.0:8080", "[::]:8080"): loopback, on its port.
func healthzURL(addr, name string) (string, error) {
	if addr == "" {
		addr = defaultAddr
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return "", fmt.Errorf("%s %q: want host:port or :port", name, addr)
	}
	return "http://" + net.JoinHostPort("127.0.0.1", port) + "/healthz", nil
}
