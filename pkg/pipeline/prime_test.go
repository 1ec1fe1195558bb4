package pipeline_test

import (
	"context"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/pipeline"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/matryer/is"
)

func TestEventsClass(t *testing.T) {
	tests := []struct {
		action string
		want   prime.Priority
	}{
		{"create-allocation", prime.PriorityMakesafe}, // §5.5: what make-safe detection waits for
		{"change-job-status", prime.PriorityEvent},
		{"create-appointment", prime.PriorityEvent},
		{"change-custom-form-status", prime.PriorityEvent},
	}
	for _, tt := range tests {
		t.Run(tt.action, func(t *testing.T) {
			is := is.New(t)
			is.Equal(pipeline.Priority(tt.action), tt.want)                                                                              // the class
			is.Equal(prime.PriorityOf(pipeline.ForEvent(context.Background(), "resolver", events.Resolved{Action: tt.action})), tt.want) // carried in the context
		})
	}
}
