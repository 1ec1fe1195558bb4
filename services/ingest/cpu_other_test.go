//go:build !unix

package ingest_test

import "time"

// processCPU is not measured here: the bench prints 0 for CPU per webhook.
func processCPU() time.Duration { return 0 }
