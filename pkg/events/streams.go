package events

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"

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
		var cfg jetstream.StreamConfig
		if err := json.Unmarshal(b, &cfg); err != nil {
			return nil, fmt.Errorf("streams/%s: %w", name, err)
		}
		if replicas > 0 {
			cfg.Replicas = replicas
		}
		cfgs = append(cfgs, cfg)
	}
	return cfgs, nil
}

// EnsureStreams creates or updates every stream defined in streams/.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, replicas int) error {
	cfgs, err := StreamConfigs(replicas)
	if err != nil {
		return err
	}
	for _, cfg := range cfgs {
		if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("stream %s: %w", cfg.Name, err)
		}
	}
	return nil
}
