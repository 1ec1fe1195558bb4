package prime

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Prime's endpoints, in one place. Paths marked assumed were not seen in
// public material.
const (
	pathToken                = "/oauth/token"
	pathJobs                 = "/jobs"
	pathAppointments         = "/appointments" // assumed, and its startDate filter (ListAppointmentsByStartDate)
	pathAllocations          = "/allocations"
	pathSiteForms            = "/site-forms"
	pathEstimates            = "/estimates"
	pathContacts             = "/contacts"
	pathContactRelationships = "/contact-relationships" // assumed
	pathStatusHistories      = "/status-histories"      // assumed
)

// Endpoint names, as counted in Stats and the metrics. The records' are
// exported: a role of pkg/events names the calls whose answers it shares
// (events.Role.SharesAnswers).
const (
	endpointToken                = "token"
	EndpointJob                  = "jobs.get"
	EndpointJobs                 = "jobs.list"
	EndpointAppointment          = "appointments.get"
	EndpointAppointments         = "appointments.list"
	EndpointAllocation           = "allocations.get"
	EndpointJobAllocations       = "allocations.list"
	EndpointSiteForms            = "site-forms.list"
	EndpointEstimates            = "estimates.list"
	EndpointContact              = "contacts.get"
	EndpointContactRelationships = "contact-relationships.list"
	EndpointStatusHistories      = "status-histories.list"
)

// GetJob fetches a job by its GUID or by the numeric reference Prime's
// webhooks carry (§4.1): /jobs/{identifier} accepts either.
func (c *Client) GetJob(ctx context.Context, identifier string) (Job, error) {
	p, err := itemPath(pathJobs, identifier)
	if err != nil {
		return Job{}, err
	}
	j, asked, err := getOneAsked[Job](ctx, c, EndpointJob, p)
	j.Asked = asked
	return j, err
}

// ListJobsUpdatedSince fetches one page, from 1, of the jobs updated at
// or after since, newest first: "Prime Sync Jobs by Date", the backstop of
// the new-job path (§7). GET /jobs?q='updatedAt'.gte('…')&order=updatedAt|DESC
// uses the list syntax seen on /jobs; ordering by updatedAt is assumed
// (createdAt|DESC was seen). Newest first, a job updated while the pages are
// read moves to the front, where a later sweep finds it, rather than
// pushing a job already listed onto the page that follows.
func (c *Client) ListJobsUpdatedSince(ctx context.Context, since time.Time, page int) (Page[Job], error) {
	q := url.Values{"q": {filter("updatedAt", "gte", since.UTC().Format(TimeLayout))}, "order": {"updatedAt|DESC"}}
	return getPage[Job](ctx, c, EndpointJobs, pathJobs, q, page)
}

// GetAppointment fetches an appointment (assumed GET /appointments/{id}).
func (c *Client) GetAppointment(ctx context.Context, id string) (Appointment, error) {
	p, err := itemPath(pathAppointments, id)
	if err != nil {
		return Appointment{}, err
	}
	return getOne[Appointment](ctx, c, EndpointAppointment, p)
}

// ListAppointmentsByStartDate fetches, all pages, the appointments whose
// startDate falls in [from, to), to the second: "Prime Sync Appointments by
// Date" of the parent OptimoRoute flow (§8.1). Assumed, like the appointment
// itself: GET /appointments?q='startDate'.gte('…'),'startDate'.lt('…') was
// not seen in public material, only the q syntax on other lists.
func (c *Client) ListAppointmentsByStartDate(ctx context.Context, from, to time.Time) ([]Appointment, error) {
	if !from.Before(to) {
		return nil, fmt.Errorf("prime: appointments from %s to %s: an empty range", from.UTC().Format(TimeLayout), to.UTC().Format(TimeLayout))
	}
	q := url.Values{"q": {filter("startDate", "gte", from.UTC().Format(TimeLayout)) + "," +
		filter("startDate", "lt", to.UTC().Format(TimeLayout))}}
	return getAll[Appointment](ctx, c, EndpointAppointments, pathAppointments, q)
}

// GetAllocation fetches an allocation.
func (c *Client) GetAllocation(ctx context.Context, id string) (Allocation, error) {
	p, err := itemPath(pathAllocations, id)
	if err != nil {
		return Allocation{}, err
	}
	return getOne[Allocation](ctx, c, EndpointAllocation, p)
}

// ListJobAllocations fetches every allocation of a job, all pages.
func (c *Client) ListJobAllocations(ctx context.Context, jobID string) ([]Allocation, error) {
	q, err := jobQuery(jobID)
	if err != nil {
		return nil, err
	}
	return getAll[Allocation](ctx, c, EndpointJobAllocations, pathAllocations, q)
}

// GetSiteFormsByJob fetches the site forms that hang off a job: objectType
// Job only, like the spec's GetSiteFormsbyJob (§5.3).
func (c *Client) GetSiteFormsByJob(ctx context.Context, jobID string) ([]SiteForm, error) {
	q, err := jobQuery(jobID, filterEq("objectType", SiteFormObjectJob))
	if err != nil {
		return nil, err
	}
	return getAll[SiteForm](ctx, c, EndpointSiteForms, pathSiteForms, q)
}

// GetEstimatesByJob fetches a job's estimates with their categories and line
// items (§5.4).
func (c *Client) GetEstimatesByJob(ctx context.Context, jobID string) ([]Estimate, error) {
	q, err := jobQuery(jobID)
	if err != nil {
		return nil, err
	}
	return getAll[Estimate](ctx, c, EndpointEstimates, pathEstimates, q)
}

// GetContact fetches a contact.
func (c *Client) GetContact(ctx context.Context, id string) (Contact, error) {
	p, err := itemPath(pathContacts, id)
	if err != nil {
		return Contact{}, err
	}
	return getOne[Contact](ctx, c, EndpointContact, p)
}

// GetJobContactRelationships fetches the contacts linked to a job (§5.2).
func (c *Client) GetJobContactRelationships(ctx context.Context, jobID string) ([]ContactRelationship, error) {
	q, err := jobQuery(jobID)
	if err != nil {
		return nil, err
	}
	return getAll[ContactRelationship](ctx, c, EndpointContactRelationships, pathContactRelationships, q)
}

// GetJobStatusHistories fetches a job's status changes.
func (c *Client) GetJobStatusHistories(ctx context.Context, jobID string) ([]StatusHistory, error) {
	q, err := jobQuery(jobID)
	if err != nil {
		return nil, err
	}
	return getAll[StatusHistory](ctx, c, EndpointStatusHistories, pathStatusHistories, q)
}

func itemPath(collection, id string) (string, error) {
	if strings.TrimSpace(id) == "" {
		return "", fmt.Errorf("prime: %s: empty id", collection)
	}
	return collection + "/" + url.PathEscape(id), nil
}

// jobQuery filters a list by jobId with Prime's q syntax
// ('jobId'.eq('…'), terms joined by "," for AND), plus any further terms.
func jobQuery(jobID string, more ...string) (url.Values, error) {
	if strings.TrimSpace(jobID) == "" || strings.ContainsAny(jobID, "'(),|") {
		return nil, fmt.Errorf("prime: job id %q cannot be used in a filter", jobID)
	}
	terms := append([]string{filterEq("jobId", jobID)}, more...)
	return url.Values{"q": {strings.Join(terms, ",")}}, nil
}

func filterEq(field, value string) string { return filter(field, "eq", value) }

// filter is one term of Prime's q syntax: 'field'.op('value').
func filter(field, op, value string) string { return "'" + field + "'." + op + "('" + value + "')" }
