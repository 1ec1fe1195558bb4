package childmirror_test

import (
	"context"
	"errors"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	childmirror "github.com/ethosbuilding/primeflow/services/child-mirror"
	"github.com/matryer/is"
)

// §5.3 step 4: the queue row and the nudge are both needed, so
// child-mirror on a real Prime refuses to start without
// AI_SUMMARY_NUDGE_URL; "off" runs without the nudge on purpose.
func TestMainNeedsANudgeURLOrOff(t *testing.T) {
	is := is.New(t)
	e := flowtest.New(t, flowtest.Options{})
	vars := e.MainVars(t.TempDir(), nil)
	err := childmirror.Main(context.Background(), func(k string) string { return vars[k] }, &flowtest.Buffer{})
	is.True(errors.Is(err, childmirror.ErrNoNudgeURL)) // refused, naming AI_SUMMARY_NUDGE_URL

	vars["AI_SUMMARY_NUDGE_URL"] = childmirror.NudgeOff
	logs, stop := e.RunMain(childmirror.Main, vars)
	flowtest.Eventually(t, "child-mirror consuming", func() bool { return e.Pulling(events.StreamResolved, childmirror.Durable) })
	stop()
	is.True(len(logs.String()) > 0) // it ran, with the nudge off
}
