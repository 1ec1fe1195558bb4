package mssql

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/matryer/is"
)

// The three follow-ups that hand work to systems outside primeflow (Client
// WIP, the AI summary generator, the triage invite queue) are each one call
// of one procedure with the spec's call shape and nothing more, so each
// procedure can be pointed at the live implementation (sql/README.md,
// "Integration points"): QueueClientWIPStatusChange(jobId, source
// ethPrimeWebhookLog:{id}), QueueJobSummaryNow(jobId),
// QueueTriageInvite(jobId, InitialContactMadeStatusId).
func TestIntegrationPointsHaveTheSpecsCallShape(t *testing.T) {
	const job = "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10"
	const status = "8e7d6c5b-4a39-4281-9f0e-d1c2b3a4f5e6"
	for _, tc := range []struct {
		name string
		call func(context.Context, *Store) error
		proc string
		args []string
	}{
		{"QueueClientWIPStatusChange", func(ctx context.Context, s *Store) error {
			_, err := s.QueueClientWIPStatusChange(ctx, job, store.ClientWIPSource(42))
			return err
		}, procQueueClientWIPStatusChange, []string{"JobId", "Source"}},
		{"QueueJobSummaryNow", func(ctx context.Context, s *Store) error {
			return s.QueueJobSummaryNow(ctx, job)
		}, procQueueJobSummaryNow, []string{"JobId"}},
		{"QueueTriageInvite", func(ctx context.Context, s *Store) error {
			_, err := s.QueueTriageInvite(ctx, job, status)
			return err
		}, procQueueTriageInvite, []string{"InitialContactMadeStatusId", "JobId"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			s, rec := recording(t)
			is.True(errors.Is(tc.call(context.Background(), s), errRecorded)) // it reached the database
			cs := calls(t, rec.take())
			is.Equal(len(cs), 1)                 // one call
			is.Equal("dbo."+cs[0].proc, tc.proc) // of its procedure
			var names []string
			for n := range cs[0].args {
				names = append(names, n)
			}
			slices.Sort(names)
			is.Equal(names, tc.args) // with the spec's parameters alone
			if tc.name == "QueueClientWIPStatusChange" {
				is.Equal(cs[0].args["Source"], "ethPrimeWebhookLog:42") // the source §5.1 step 5 gives
			}
		})
	}
}
