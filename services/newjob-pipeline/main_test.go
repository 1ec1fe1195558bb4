package newjobpipeline_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	newjobpipeline "github.com/ethosbuilding/primeflow/services/newjob-pipeline"
	"github.com/matryer/is"
)

// TestMainSweepsItsOwnOutbox: the pipeline running as a process of its own,
// with no other service about, publishes a make-safe hand-off whose publish
// after the commit failed from its own outbox sweeper.
func TestMainSweepsItsOwnOutbox(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dataDir := t.TempDir()
	e := flowtest.New(t, flowtest.Options{StoreDir: dataDir}) // the database Main opens
	logs, stop := e.RunMain(newjobpipeline.Main, e.MainVars(dataDir, map[string]string{"NEWJOB_PIPELINE_OUTBOX_SWEEP": "50ms"}))
	flowtest.Eventually(t, "the pipeline consuming", func() bool { return e.Pulling(events.StreamJob, newjobpipeline.Durable) })

	s, err := e.JS.Stream(ctx, events.StreamMakesafeDetect)
	is.NoErr(err)
	cfg := s.CachedInfo().Config
	is.NoErr(e.JS.DeleteStream(ctx, events.StreamMakesafeDetect)) // nothing takes makesafe.detect
	claim(t, e, jobA, 3, events.FirstSeenMsgID(jobA))
	flowtest.Eventually(t, "the publish after the commit failed", func() bool {
		return strings.Contains(logs.String(), "make-safe and sync-queue hand-off not published yet")
	})
	is.True(completed(e, jobA)())                                           // the pipeline completed
	is.Equal(handOffsWaiting(t, e), []string{events.SubjectMakesafeDetect}) // and its hand-off waits in the outbox

	_, err = e.JS.CreateStream(ctx, cfg) // NATS takes it again
	is.NoErr(err)
	flowtest.Eventually(t, "the hand-off published by the pipeline's sweeper", func() bool {
		stream, err := e.JS.Stream(ctx, events.StreamMakesafeDetect)
		return err == nil && stream.CachedInfo().State.Msgs > 0
	})
	is.Equal(len(detections(t, e)[jobA]), 1) // the job's make-safe hand-off, once
	flowtest.Eventually(t, "and recorded", func() bool { return len(handOffsWaiting(t, e)) == 0 })
	stop() // Main stops cleanly when its context ends
}
