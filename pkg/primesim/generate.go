package primesim

import (
	"fmt"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/prime"
)

// Generated records look like a Victorian insurance-repair tenant's. The
// generators store what they make and return it; an edit function may
// change anything but the id. They panic only if an edit leaves the record
// unstorable (no id), which is a bug in the calling test.

// StatusInitialContactMade is the simulated Prime's Initial Contact Made
// job status: a job's arrival in it queues a triage invite (§5.1 step 6,
// TRIAGE_INITIAL_CONTACT_MADE_STATUS_ID, which bin/primeflow on the
// simulator sets to it). ChangeJobStatus, or POST /_sim/jobs/{id}/status,
// moves a job there.
const StatusInitialContactMade = "9e4b7c2d-1f3a-4e5b-8c6d-0a1b2c3d4e70"

// Reference data of generated records.
const (
	genStatusNew     = "3f1c2a8e-6b1d-4c55-9a0e-1d2b7c9e4a01"
	genDivision      = "d1a7c3e5-0b2d-4f6a-8c9e-1a3b5c7d9e20"
	genInspection    = "a4c6e8f0-2b4d-4f6a-9c1e-3d5f7a9b1c30" // appointment type Site Inspection
	genAllocStatus   = "e1f3a5c7-9b2d-4e6f-8a0c-2d4f6b8d0e40"
	genContactInsure = "Insured"
)

type suburb struct{ name, postcode string }

// pick returns one of options, chosen by the simulator's seeded source.
func pick[T any](s *Sim, options ...T) T { return options[s.intN(len(options))] }

// uuid4 makes a random (version 4) UUID from the simulator's seeded source.
func (s *Sim) uuid4() string {
	s.rngMu.Lock()
	hi, lo := s.rng.Uint64(), s.rng.Uint64()
	s.rngMu.Unlock()
	hi = hi&^0xf000 | 0x4000           // version 4
	lo = lo&^(0xc000<<48) | 0x8000<<48 // RFC 4122 variant
	return fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", hi>>32, (hi>>16)&0xffff, hi&0xffff, lo>>48, lo&0xffffffffffff)
}

func (s *Sim) intN(n int) int {
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	return s.rng.IntN(n)
}

func must(err error) {
	if err != nil {
		panic("primesim: generated record not stored: " + err.Error())
	}
}

// NewJob makes and stores a new job with a GUID, the next numeric reference
// and the next job number, created now, in status New.
func (s *Sim) NewJob(edit ...func(*prime.Job)) Job {
	s.mu.Lock()
	s.nextRef++
	s.nextJob++
	ref, number := s.nextRef, s.nextJob
	s.mu.Unlock()
	id := s.uuid4()
	now := s.stamp()
	sub := pick(s,
		suburb{"Brunswick", "3056"}, suburb{"Footscray", "3011"}, suburb{"Box Hill", "3128"}, suburb{"Frankston", "3199"},
		suburb{"Geelong West", "3218"}, suburb{"Ringwood", "3134"}, suburb{"Werribee", "3030"}, suburb{"Coburg", "3058"})
	j := Job{Ref: ref, Job: prime.Job{
		ID:            id,
		JobNumber:     fmt.Sprintf("J%06d", number),
		StatusID:      genStatusNew,
		ClientID:      pick(s, "5b0d3e7a-1c2f-4a8b-9d6e-3f1a2b4c5d10", "8e2f4a6c-3d5b-4c7e-a9f1-2b4d6e8a0c11"),
		AssignedID:    s.uuid4(),
		EstimatorID:   s.uuid4(),
		CaseManagerID: s.uuid4(),
		SupervisorID:  s.uuid4(),
		DivisionID:    genDivision,
		Region:        "VIC",
		Description: pick(s,
			"Storm damage - water ingress through ceiling in main bedroom",
			"Burst flexi hose under kitchen sink, water damage to cabinetry",
			"Tree fell on garage roof during high winds",
			"Hail damage to roof tiles and gutters",
			"Impact damage - vehicle struck front fence"),
		IncidentDate: prime.Time{Time: now.Add(-26 * time.Hour)},
		CreatedAt:    now,
		UpdatedAt:    now,
		Version:      1,
		PrimeURL:     "https://www.primeeco.tech/jobs/" + id,
		Address: prime.Address{
			AddressLine1: fmt.Sprintf("%d %s", 1+s.intN(400),
				pick(s, "Sydney Rd", "Barkly St", "Whitehorse Rd", "Nepean Hwy", "Pakington St", "Maroondah Hwy", "Watton St", "Bell St")),
			Suburb:   sub.name,
			State:    "VIC",
			Postcode: sub.postcode,
		},
		AuthorisedTotalIncludingTax: "0.00",
	}}
	for _, e := range edit {
		e(&j.Job)
	}
	must(s.PutJob(j))
	return j
}

// NewAppointment makes and stores an appointment of a job: two hours,
// tomorrow at 09:00 Melbourne time, status Scheduled.
func (s *Sim) NewAppointment(jobID string, edit ...func(*prime.Appointment)) prime.Appointment {
	now := s.stamp()
	mel := time.FixedZone("AEST", 10*60*60)
	start := time.Date(now.In(mel).Year(), now.In(mel).Month(), now.In(mel).Day()+1, 9, 0, 0, 0, mel).UTC()
	a := prime.Appointment{
		ID:                s.uuid4(),
		JobID:             jobID,
		AppointmentTypeID: genInspection,
		StartDate:         prime.Time{Time: start},
		EndDate:           prime.Time{Time: start.Add(2 * time.Hour)},
		Status:            "Scheduled",
		Version:           1,
		AssignedID:        s.uuid4(),
		Description:       "Site inspection",
		CreatedAt:         now,
		UpdatedAt:         now,
	}
	for _, e := range edit {
		e(&a)
	}
	must(s.PutAppointment(a))
	return a
}

// NewAllocation makes and stores an allocation of a job with the given
// allocationType.
func (s *Sim) NewAllocation(jobID, allocationType string, edit ...func(*prime.Allocation)) prime.Allocation {
	now := s.stamp()
	a := prime.Allocation{
		ID:               s.uuid4(),
		JobID:            jobID,
		UserID:           s.uuid4(),
		Type:             allocationType,
		AllocationNumber: fmt.Sprintf("A%06d", 1+s.intN(999999)),
		Label:            allocationType,
		StatusID:         genAllocStatus,
		Version:          1,
		CreatedAt:        now,
		UpdatedAt:        now,
	}
	for _, e := range edit {
		e(&a)
	}
	must(s.PutAllocation(a))
	return a
}

// NewMakeSafeAllocation makes and stores a Make Safe allocation of a job.
func (s *Sim) NewMakeSafeAllocation(jobID string, edit ...func(*prime.Allocation)) prime.Allocation {
	return s.NewAllocation(jobID, prime.MakeSafeAllocationType, edit...)
}

// NewSiteForm makes and stores a completed triage form on a job.
func (s *Sim) NewSiteForm(jobID string, edit ...func(*prime.SiteForm)) prime.SiteForm {
	now := s.stamp()
	f := prime.SiteForm{
		ID:         s.uuid4(),
		JobID:      jobID,
		ObjectType: prime.SiteFormObjectJob,
		ObjectID:   jobID,
		Name:       "Triage Form",
		Status:     "Completed",
		CreatedAt:  now,
		UpdatedAt:  now,
	}
	for _, e := range edit {
		e(&f)
	}
	must(s.PutSiteForm(f))
	return f
}

// NewEstimate makes and stores a draft estimate of a job with two categories
// of line items.
func (s *Sim) NewEstimate(jobID string, edit ...func(*prime.Estimate)) prime.Estimate {
	now := s.stamp()
	e := prime.Estimate{
		ID:        s.uuid4(),
		JobID:     jobID,
		Status:    "Draft",
		Total:     "2068.00",
		CreatedAt: now,
		UpdatedAt: now,
		Categories: []prime.EstimateCategory{
			{ID: s.uuid4(), Name: "Make Safe", Items: []prime.EstimateItem{
				{ID: s.uuid4(), Description: "Attend and make safe, tarp roof", Quantity: "1", UnitPrice: "480.00", Total: "480.00"},
			}},
			{ID: s.uuid4(), Name: "Plaster", Items: []prime.EstimateItem{
				{ID: s.uuid4(), Description: "Replace water-damaged ceiling sheet", Quantity: "12", UnitPrice: "85.00", Total: "1020.00"},
				{ID: s.uuid4(), Description: "Paint ceiling, two coats", Quantity: "12", UnitPrice: "47.33", Total: "568.00"},
			}},
		},
	}
	for _, ed := range edit {
		ed(&e)
	}
	must(s.PutEstimate(e))
	return e
}

// NewContact makes and stores a contact linked to a job (relationship
// "Insured"). A job without a primary contact gets this one.
func (s *Sim) NewContact(jobID string, edit ...func(*prime.Contact)) (prime.Contact, prime.ContactRelationship) {
	first := pick(s, "Olivia", "Jack", "Charlotte", "Noah", "Amelia", "William", "Isla", "Thomas")
	last := pick(s, "Nguyen", "Smith", "Papadopoulos", "Williams", "Brown", "Kaur", "Jones", "Rossi")
	c := prime.Contact{
		ID:        s.uuid4(),
		FirstName: first,
		LastName:  last,
		Name:      first + " " + last,
		Email:     fmt.Sprintf("%s.%s@example.com.au", first, last),
		Mobile:    fmt.Sprintf("04%02d %03d %03d", s.intN(100), s.intN(1000), s.intN(1000)),
	}
	for _, e := range edit {
		e(&c)
	}
	must(s.PutContact(c))
	rel := prime.ContactRelationship{ID: s.uuid4(), JobID: jobID, ContactID: c.ID, Type: genContactInsure}
	must(s.PutContactRelationship(rel))
	if j, ok := s.Job(jobID); ok && j.PrimaryContactID == "" {
		_, err := s.UpdateJob(jobID, func(j *prime.Job) { j.PrimaryContactID = c.ID })
		must(err)
	}
	return c, rel
}

// NewStatusHistory makes and stores a status change of a job, now.
func (s *Sim) NewStatusHistory(jobID, statusID string) prime.StatusHistory {
	h := prime.StatusHistory{ID: s.uuid4(), JobID: jobID, StatusID: statusID, CreatedAt: s.stamp()}
	must(s.PutStatusHistory(h))
	return h
}
