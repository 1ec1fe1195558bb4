package primesim

import (
	"encoding/json"
	"fmt"
	"maps"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/prime"
)

// Job is a simulated job: Prime's record and the numeric reference that
// Prime's webhooks send as jobId (§4.1).
type Job struct {
	prime.Job
	Ref int64
}

// Put adds or replaces a record as Prime would serve it. A job needs a
// numeric reference the first time it is put.
func (s *Sim) Put(k Kind, r Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.putLocked(k, r)
}

func (s *Sim) putLocked(k Kind, r Record) error {
	if err := s.store.put(k, r); err != nil {
		return err
	}
	s.nextRef = max(s.nextRef, r.NumericReference)
	s.saveLocked()
	return nil
}

// Get returns a record; a job may be asked for by its numeric reference.
func (s *Sim) Get(k Kind, id string) (Record, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.getLocked(k, id)
}

func (s *Sim) getLocked(k Kind, id string) (Record, bool) {
	var e *entry
	var ok bool
	if k == KindJobs {
		e, ok = s.store.job(id)
	} else {
		e, ok = s.store.get(k, id)
	}
	if !ok {
		return Record{}, false
	}
	return s.store.record(k, e), true
}

// Delete removes a record and reports whether it was there.
func (s *Sim) Delete(k Kind, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.store.delete(k, id) {
		return false
	}
	s.saveLocked()
	return true
}

// Patch sets some attributes of a record, keeping the others.
func (s *Sim) Patch(k Kind, id string, attrs json.RawMessage) (Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.getLocked(k, id)
	if !ok {
		return Record{}, fmt.Errorf("primesim: no %s with id %s", k, id)
	}
	var base, over map[string]json.RawMessage
	if err := json.Unmarshal(r.Attributes, &base); err != nil {
		return Record{}, fmt.Errorf("primesim: %s %s: %w", k, id, err)
	}
	if err := json.Unmarshal(attrs, &over); err != nil {
		return Record{}, fmt.Errorf("primesim: %s %s: patch: %w", k, id, err)
	}
	if base == nil {
		base = make(map[string]json.RawMessage)
	}
	maps.Copy(base, over)
	b, err := json.Marshal(base)
	if err != nil {
		return Record{}, fmt.Errorf("primesim: %s %s: %w", k, id, err)
	}
	r.Attributes = b
	if err := s.putLocked(k, r); err != nil {
		return Record{}, err
	}
	return r, nil
}

// PutJob adds or replaces a job.
func (s *Sim) PutJob(j Job) error { return s.putTyped(KindJobs, j.ID, j.Job, j.Raw, j.Ref) }

// PutAppointment adds or replaces an appointment.
func (s *Sim) PutAppointment(a prime.Appointment) error {
	return s.putTyped(KindAppointments, a.ID, a, a.Raw, 0)
}

// PutAllocation adds or replaces an allocation.
func (s *Sim) PutAllocation(a prime.Allocation) error {
	return s.putTyped(KindAllocations, a.ID, a, a.Raw, 0)
}

// PutSiteForm adds or replaces a site form.
func (s *Sim) PutSiteForm(f prime.SiteForm) error {
	return s.putTyped(KindSiteForms, f.ID, f, f.Raw, 0)
}

// PutEstimate adds or replaces an estimate.
func (s *Sim) PutEstimate(e prime.Estimate) error {
	return s.putTyped(KindEstimates, e.ID, e, e.Raw, 0)
}

// PutContact adds or replaces a contact.
func (s *Sim) PutContact(c prime.Contact) error { return s.putTyped(KindContacts, c.ID, c, c.Raw, 0) }

// PutContactRelationship adds or replaces a job–contact link.
func (s *Sim) PutContactRelationship(r prime.ContactRelationship) error {
	return s.putTyped(KindContactRelationships, r.ID, r, r.Raw, 0)
}

// PutStatusHistory adds or replaces a status history entry.
func (s *Sim) PutStatusHistory(h prime.StatusHistory) error {
	return s.putTyped(KindStatusHistories, h.ID, h, h.Raw, 0)
}

func (s *Sim) putTyped(k Kind, id string, typed any, raw json.RawMessage, ref int64) error {
	r, err := encodeRecord(id, typed, raw)
	if err != nil {
		return err
	}
	r.NumericReference = ref
	return s.Put(k, r)
}

// Job returns a job by its GUID or numeric reference.
func (s *Sim) Job(identifier string) (Job, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	j, err := s.jobLocked(identifier)
	return j, err == nil
}

func (s *Sim) jobLocked(identifier string) (Job, error) {
	r, ok := s.getLocked(KindJobs, identifier)
	if !ok {
		return Job{}, fmt.Errorf("primesim: no job %s", identifier)
	}
	var j Job
	if err := decodeRecord(r, &j.Job); err != nil {
		return Job{}, err
	}
	j.ID, j.Raw, j.Ref = r.ID, r.Attributes, r.NumericReference
	return j, nil
}

// Appointment returns an appointment.
func (s *Sim) Appointment(id string) (prime.Appointment, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	a, err := s.appointmentLocked(id)
	return a, err == nil
}

func (s *Sim) appointmentLocked(id string) (prime.Appointment, error) {
	r, ok := s.getLocked(KindAppointments, id)
	if !ok {
		return prime.Appointment{}, fmt.Errorf("primesim: no appointment %s", id)
	}
	var a prime.Appointment
	if err := decodeRecord(r, &a); err != nil {
		return prime.Appointment{}, err
	}
	a.ID, a.Raw = r.ID, r.Attributes
	return a, nil
}

// UpdateJob changes a job the way Prime does: edit, then version + 1 and
// updatedAt now.
func (s *Sim) UpdateJob(identifier string, edit func(*prime.Job)) (Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, err := s.jobLocked(identifier)
	if err != nil {
		return Job{}, err
	}
	edit(&j.Job)
	j.Version++
	j.UpdatedAt = s.stamp()
	r, err := encodeRecord(j.ID, j.Job, j.Raw)
	if err != nil {
		return Job{}, err
	}
	r.NumericReference = j.Ref
	if err := s.putLocked(KindJobs, r); err != nil {
		return Job{}, err
	}
	j.Raw = r.Attributes
	return j, nil
}

// ChangeJobStatus moves a job to a status the way Prime does: statusId,
// version + 1 and updatedAt now (UpdateJob), and the change in the job's
// status history, now.
func (s *Sim) ChangeJobStatus(identifier, statusID string) (Job, error) {
	j, err := s.UpdateJob(identifier, func(j *prime.Job) { j.StatusID = statusID })
	if err != nil {
		return Job{}, err
	}
	s.NewStatusHistory(j.ID, statusID)
	return j, nil
}

// UpdateAppointment changes an appointment: edit, then version + 1 and
// updatedAt now.
func (s *Sim) UpdateAppointment(id string, edit func(*prime.Appointment)) (prime.Appointment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, err := s.appointmentLocked(id)
	if err != nil {
		return prime.Appointment{}, err
	}
	edit(&a)
	a.Version++
	a.UpdatedAt = s.stamp()
	r, err := encodeRecord(a.ID, a, a.Raw)
	if err != nil {
		return prime.Appointment{}, err
	}
	if err := s.putLocked(KindAppointments, r); err != nil {
		return prime.Appointment{}, err
	}
	a.Raw = r.Attributes
	return a, nil
}

// stamp is now on the simulator's clock as Prime would write it: UTC, whole
// seconds.
func (s *Sim) stamp() prime.Time { return prime.Time{Time: s.now().UTC().Truncate(time.Second)} }
