// Package streams holds the JetStream stream definitions as the JSON that
// `nats stream add --config streams/NAME.json` accepts. The services apply the
// same files at start-up, so operators and code share one source of truth.
package streams

import "embed"

// FS holds every stream definition, one NAME.json a stream.
//
//go:embed *.json
var FS embed.FS
