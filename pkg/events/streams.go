package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
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

// EnsureStreams creates every stream defined in streams/ (or, when names are
// given, those of them), and updates one only when its configuration differs
// from the file's: each process applies the streams its Role touches at
// start-up, and an update that changes nothing still takes the
// stream's locks while other processes create their consumers on it
// (nats-server 2.15.2 reads the store's configuration without the lock
// there, a data race that make race found).
func EnsureStreams(ctx context.Context, js jetstream.JetStream, replicas int, names ...string) error {
	cfgs, err := StreamConfigs(replicas)
	if err != nil {
		return err
	}
	for _, cfg := range cfgs {
		if len(names) > 0 && !slices.Contains(names, cfg.Name) {
			continue
		}
		// A create of a stream that exists with the same configuration
		// succeeds; with another, it fails with ErrStreamNameAlreadyInUse.
		_, err := js.CreateStream(ctx, cfg)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			_, err = js.UpdateStream(ctx, cfg)
		}
		if err != nil {
			return fmt.Errorf("stream %s: %w", cfg.Name, err)
		}
	}
	return nil
}

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
