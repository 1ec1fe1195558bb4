// Package ensurejob is the caller's side of job-mirror's "ensure job
// mirrored" request (EnsureJobMirroredAsync, §4.3): a handler about to write
// a child row asks job-mirror to make sure the child's job is in primeJobs,
// and job-mirror runs the new-job pipeline when the job is new. It also holds
// the mapping of a Prime job onto its primeJobs row, for a stage that saves a
// job it fetched itself. It keeps callers free of job-mirror's service code.
package ensurejob

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/nats-io/nats.go"
)

// DefaultTimeout bounds a request whose context has no deadline.
const DefaultTimeout = 30 * time.Second

// Ensure asks job-mirror (events.SubjectEnsureJob) to make sure a job is
// mirrored and returns its reply. Errors:
//   - a *prime.RateLimitedError when Prime's rate limit stopped job-mirror:
//     the caller's event waits and no attempt is counted (pipeline.Stage
//     treats it so);
//   - one matching prime.ErrNotFound when Prime has no such job;
//   - any other error when job-mirror failed, or did not answer (no
//     responders, timeout): the caller's event fails an attempt.
func Ensure(ctx context.Context, nc *nats.Conn, req events.EnsureJobRequest) (events.EnsureJobReply, error) {
	if req.JobID == "" && req.NumericRef <= 0 {
		return events.EnsureJobReply{}, errors.New("ensure job: no job id and no numeric reference")
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	reply, err := events.Request[events.EnsureJobReply](ctx, nc, events.SubjectEnsureJob, req)
	if err != nil {
		return events.EnsureJobReply{}, fmt.Errorf("ensure job %s: %w", describe(req), err)
	}
	return reply, ReplyError(reply)
}

// ReplyError is the error a reply reports, as Ensure returns it; nil when
// the job is mirrored.
func ReplyError(r events.EnsureJobReply) error {
	switch {
	case r.RetryAfterMS > 0:
		return &prime.RateLimitedError{RetryAfter: time.Duration(r.RetryAfterMS) * time.Millisecond, Endpoint: "job-mirror ensure"}
	case r.NotFound:
		return fmt.Errorf("ensure job: %w", prime.ErrNotFound)
	case r.Error != "":
		return fmt.Errorf("ensure job: job-mirror: %s", r.Error)
	}
	return nil
}

func describe(req events.EnsureJobRequest) string {
	if req.JobID != "" {
		return req.JobID
	}
	return fmt.Sprintf("ref %d", req.NumericRef)
}

// Row is the primeJobs row of a Prime job (§5.1: the main attributes as
// columns, the raw attributes JSON as they came).
func Row(j prime.Job) store.Job {
	return store.Job{
		JobID:                       j.ID,
		JobNumber:                   j.JobNumber,
		StatusID:                    j.StatusID,
		ClientID:                    j.ClientID,
		AssignedID:                  j.AssignedID,
		EstimatorID:                 j.EstimatorID,
		CaseManagerID:               j.CaseManagerID,
		SupervisorID:                j.SupervisorID,
		DivisionID:                  j.DivisionID,
		Region:                      j.Region,
		Description:                 j.Description,
		IncidentDate:                j.IncidentDate.Time,
		CreatedAt:                   j.CreatedAt.Time,
		UpdatedAt:                   j.UpdatedAt.Time,
		Version:                     j.Version,
		PrimeURL:                    j.PrimeURL,
		AuthorisedTotalIncludingTax: string(j.AuthorisedTotalIncludingTax),
		AddressLine1:                j.Address.AddressLine1,
		AddressLine2:                j.Address.AddressLine2,
		Suburb:                      j.Address.Suburb,
		State:                       j.Address.State,
		Postcode:                    j.Address.Postcode,
		PrimaryContactID:            j.PrimaryContactID,
		Attributes:                  string(j.Raw),
	}
}
