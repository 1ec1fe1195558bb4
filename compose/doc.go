// Package compose holds the checks of the production-shaped stack in this
// directory: docker-compose.yml, the Dockerfile, the NATS, Prometheus and
// Grafana configuration and .env.example. No Docker engine is needed: the
// tests load the compose file with compose-go (the loader docker compose
// uses), parse the NATS configuration with nats-server's own parser, and
// cross-check environment variable names, metric names and consumer names
// against the Go code of pkg/ and services/.
package compose
