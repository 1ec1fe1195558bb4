// Package mirror maps Prime's records onto their mirror rows: the main
// attributes as columns, the raw attributes JSON as it came, GUIDs
// lower-case. A row that more than one stage writes is mapped here, so every
// stage writes it alike (child-mirror and makesafe both save allocations,
// §5.5 and §6), and so is the primeJobs row (job-mirror's, for change-job-status
// and ensure-job alike).
package mirror

import (
	"strings"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/store"
)

// Allocation is the primeAllocations row of a Prime allocation (its
// isMakeSafe is derived in SQL from the type). A blank JobID means Prime
// reported no job: the caller files the row under the job it knows.
func Allocation(a prime.Allocation) store.Allocation {
	return store.Allocation{
		AllocationID:       strings.ToLower(a.ID),
		JobID:              strings.ToLower(a.JobID),
		AssignedID:         strings.ToLower(a.UserID),
		AssignedContactID:  strings.ToLower(a.AssignedContactID),
		AllocationType:     a.Type,
		AllocationNumber:   a.AllocationNumber,
		Label:              a.Label,
		AllocationStatusID: strings.ToLower(a.StatusID),
		Version:            a.Version,
		CreatedAt:          a.CreatedAt.Time,
		UpdatedAt:          a.UpdatedAt.Time,
		Attributes:         string(a.Raw),
	}
}

// Job is the primeJobs row of a Prime job (§5.1).
func Job(j prime.Job) store.Job {
	return store.Job{
		JobID:                       strings.ToLower(j.ID),
		JobNumber:                   j.JobNumber,
		StatusID:                    strings.ToLower(j.StatusID),
		ClientID:                    strings.ToLower(j.ClientID),
		AssignedID:                  strings.ToLower(j.AssignedID),
		EstimatorID:                 strings.ToLower(j.EstimatorID),
		CaseManagerID:               strings.ToLower(j.CaseManagerID),
		SupervisorID:                strings.ToLower(j.SupervisorID),
		DivisionID:                  strings.ToLower(j.DivisionID),
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
		PrimaryContactID:            strings.ToLower(j.PrimaryContactID),
		Attributes:                  string(j.Raw),
		AskedUTC:                    asked(j.Asked),
	}
}

// asked is when a job's call went out, less the hosts' clock skew: the
// mirror's row is stamped by another clock (store.Job.AskedUTC).
func asked(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Add(-prime.AnswerSkew)
}
