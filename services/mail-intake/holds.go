package mailintake

import (
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
)

// hold is a message waiting out a fault that is not its own (Graph, Prime,
// job-mirror): no attempt is counted, and the polls pass it by until Until.
type hold struct {
	until time.Time
	// waits counts its waits in a row.
	waits int
}

// hold makes the message wait: at least after, and the next step of
// MAIL_WAIT_BACKOFF.
// reason labels primeflow_mailintake_waits_total.
func (in *Intake) hold(r store.EmailReceipt, reason string, after time.Duration, cause error) {
	h := in.holds[r.InternetMessageID]
	h.waits++
	wait := max(after, in.cfg.WaitBackoff.After(h.waits))
	h.until = time.Now().Add(wait)
	in.holds[r.InternetMessageID] = h
	in.metrics.waits.WithLabelValues(reason).Inc()
	log := in.log.Info
	if h.waits == 1 {
		log = in.log.Warn
	}
	log("new-job email waits, no attempt counted: the poll goes on to the next", "internetMessageId", r.InternetMessageID,
		"reason", reason, "waits", h.waits, "for", wait, "err", cause)
}

// held reports whether the message is waiting still.
func (in *Intake) held(key string) bool {
	h, ok := in.holds[key]
	return ok && time.Now().Before(h.until)
}

// release forgets a message's waits: it was worked.
func (in *Intake) release(key string) { delete(in.holds, key) }

// forget drops the holds of the messages a whole poll did not list: they
// left the folder.
func (in *Intake) forget(listed map[string]bool) {
	for key := range in.holds {
		if !listed[key] {
			delete(in.holds, key)
		}
	}
}
