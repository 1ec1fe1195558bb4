package events

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/ethosbuilding/primeflow/streams"
	"github.com/nats-io/nats.go/jetstream"
)

// StreamConfigs reads the stream definitions in streams/ (embedded). replicas
// above zero overrides num_replicas, for a clustered deployment.
func StreamConfigs(replicas int) ([]jetstream.StreamConfig, error) {
	names, err := fs.Glob(streams.FS, "*.json")
	if err != nil {
		return nil, err
	}
	cfgs := make([]jetstream.StreamConfig, 0, len(names))
	for _, name := range names {
		b, err := streams.FS.ReadFile(name)
		if err != nil {
			return nil, err
		}
		cfg, err := streamConfig(name, b, replicas)
		if err != nil {
			return nil, err
		}
		cfgs = append(cfgs, cfg)
	}
	return cfgs, nil
}

// streamConfig reads the stream file name (NAME.json, which must define
// the stream NAME), with replicas above zero overriding num_replicas.
func streamConfig(name string, b []byte, replicas int) (jetstream.StreamConfig, error) {
	var cfg jetstream.StreamConfig
	if err := json.Unmarshal(b, &cfg); err != nil {
		return cfg, fmt.Errorf("streams/%s: %w", name, err)
	}
	if want := strings.TrimSuffix(name, ".json"); cfg.Name != want {
		return cfg, fmt.Errorf("streams/%s: defines the stream %q, not %q", name, cfg.Name, want)
	}
	if replicas > 0 {
		cfg.Replicas = replicas
	}
	return cfg, nil
}

// streamFile is the file of streams/ that defines the stream name.
func streamFile(name string) ([]byte, error) { return streams.FS.ReadFile(name + ".json") }

// IsKVConflict reports a failed expected-revision check on a KV bucket: the
// key exists, or has moved on since the revision a write expected.
// Replicated streams use a different code (10164) than R1 (10071), and
// kv.Create returns the raw error when it loses a race after a marker.
func IsKVConflict(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) &&
		(apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}
