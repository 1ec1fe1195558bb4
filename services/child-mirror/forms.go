package childmirror

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/pipeline"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/secureurl"
	"github.com/ethosbuilding/primeflow/pkg/store"
)

// customFormStatus is ProcessChangeCustomFormStatusAsync (§5.3). These
// events fire in practice when a triage form is completed.
func (c *ChildMirror) customFormStatus(ctx context.Context, ev events.Resolved) (pipeline.Finish, error) {
	// Step 1: the job from the numeric reference (the resolver's
	// ResolveJobIdAsync); Prime's site-forms route is queried by job only.
	jobID, err := c.referencedJob(ctx, ev)
	if err != nil {
		return pipeline.Finish{}, err
	}
	// Step 2: GetSiteFormsbyJob, objectType Job.
	forms, err := c.prime.GetSiteFormsByJob(ctx, jobID)
	if err != nil {
		return pipeline.Finish{}, fmt.Errorf("site forms of job %s: %w", jobID, err)
	}
	rows := siteFormRows(jobID, forms)
	log := c.log.With("logId", ev.LogID, "action", ev.Action, "jobId", jobID)
	return pipeline.Finish{
		JobID: jobID,
		Write: func(ctx context.Context, tx store.Store) error {
			if err := saveReference(ctx, tx, ev.NumericRef, jobID); err != nil {
				return err
			}
			if err := tx.ReplaceJobSiteForms(ctx, jobID, prime.SiteFormObjectJob, rows); err != nil {
				return err
			}
			// Step 3: the form must now be in primeSiteForms. Not found only
			// warns: it may hang off a non-Job object, which step 2 does not query.
			if err := confirm(ctx, tx, log, ev, jobID, store.TableSiteForms,
				"it may hang off a non-Job object, and only the job's Job forms are synced"); err != nil {
				return err
			}
			// Step 4: QueueJobSummaryNow; its failure fails the event.
			return tx.QueueJobSummaryNow(ctx, jobID)
		},
		// Step 4's nudge: best effort, after the commit, so the job is
		// already due when the generator looks.
		After: func(ctx context.Context) { c.nudgeAISummary(ctx, log, jobID) },
	}, nil
}

// referencedJob is the job of §5.3 and §5.4 step 1, ResolveJobIdAsync
// (forceSync: false), which the resolver ran: the GUID from the reference
// map, or the job it fetched from Prime. No job is MissingIdentifier,
// thrown. The job is then made sure of in the mirror (step 2, §4.3), by
// its numeric reference too: job-mirror then asks Prime by the reference as
// the resolver did, and the resolver's answer serves it (pkg/prime's
// coalescing) instead of a second call.
func (c *ChildMirror) referencedJob(ctx context.Context, ev events.Resolved) (string, error) {
	jobID := ev.JobID
	if r, ok := ev.FetchedJob(); ok && jobID == "" {
		jobID = r.ID
	}
	if jobID == "" {
		return "", pipeline.Fault(pipeline.MissingIdentifier, ev.Action, "no job reference in the payload")
	}
	return c.ensureJob(ctx, events.SubjectEnsureJobEvent, events.EnsureJobRequest{JobID: strings.ToLower(jobID), NumericRef: ev.NumericRef, LogID: ev.LogID})
}

// confirm checks, after the sync, that the event's id is now in its mirror
// table (§5.3 step 3, §5.4 step 3). No property name is trusted (§4.2,
// §10.2): every GUID of the payload is probed in order, and the first in
// the table is the id, with a warning if it came under an unexpected name.
// The event's own job is expected in a payload and is skipped. When none is
// in the table, an id under the expected name (customFormStatusId,
// estimateId …) that is elsewhere in the mirror is WrongEntityType, thrown,
// as the spec's step 3 reads; any other GUID elsewhere is some other record
// the payload names, and like an id found nowhere only warns.
func confirm(ctx context.Context, tx store.Store, log *slog.Logger, ev events.Resolved, jobID, table, why string) error {
	var probed, elsewhere []string
	for _, c := range ev.ConfirmCandidates() {
		if strings.EqualFold(c.ID, jobID) {
			continue
		}
		tables, err := tx.IdentifyGuid(ctx, c.ID, table)
		if err != nil {
			return err
		}
		if slices.Contains(tables, table) {
			if !c.Preferred {
				log.Warn("payload shape has changed: the id to confirm came under an unexpected property; update the preferred property names",
					"property", c.Property, "id", c.ID, "table", table)
			}
			return nil
		}
		probed = append(probed, c.Property+"="+c.ID)
		if len(tables) > 0 && c.Preferred {
			elsewhere = append(elsewhere, fmt.Sprintf("%s=%s is in %v", c.Property, c.ID, tables))
		}
	}
	switch {
	case len(elsewhere) > 0:
		return pipeline.Fault(pipeline.WrongEntityType, ev.Action, "expected %s; %v", table, elsewhere)
	case len(probed) == 0:
		log.Warn("the payload had no id to confirm after the sync", "expected", table)
	default:
		log.Warn("the event's id is not in the mirror after the sync; "+why, "ids", probed, "table", table)
	}
	return nil
}

// nudgeAISummary fires the AI summary generator for the job (GET
// AI_SUMMARY_NUDGE_URL?jobId=…): best effort, a failure is logged only.
// Neither the URL nor the error's URL is logged: the URL may carry a key.
func (c *ChildMirror) nudgeAISummary(ctx context.Context, log *slog.Logger, jobID string) {
	if !c.cfg.nudges() {
		return
	}
	if err := c.nudge(ctx, jobID); err != nil {
		c.metrics.swallowed.WithLabelValues("ai_summary_nudge").Inc()
		log.Warn("AI summary nudge failed; logged only, the queue row makes the job due", "err", err)
	}
}

func (c *ChildMirror) nudge(ctx context.Context, jobID string) error {
	u, err := url.Parse(c.cfg.AISummaryNudgeURL)
	if err != nil {
		return errors.New("AI_SUMMARY_NUDGE_URL is not a URL")
	}
	q := u.Query()
	q.Set("jobId", jobID)
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return withoutURL(err)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return withoutURL(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // drained so the connection is reused
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("the AI summary generator answered %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	return nil
}

// checkNudgeURL refuses a nudge URL the request's key must not go to, as a
// send queue's URL is refused (secureurl.Check: https, or http to a
// loopback address), without repeating it.
func checkNudgeURL(s string) error {
	if err := secureurl.Check(s); err != nil {
		return config.Refuse("AI_SUMMARY_NUDGE_URL", "%v, or off", err)
	}
	return nil
}

// withoutURL drops the URL an *url.Error carries, keeping what went wrong.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}
