package mailintake

import (
	"errors"
	"fmt"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/metrics"

	"github.com/prometheus/client_golang/prometheus"
)

type collectors struct {
	messages *prometheus.CounterVec
	polls    *prometheus.CounterVec
	waits    *prometheus.CounterVec
	backlog  prometheus.Gauge
}

// newMetrics registers the intake's metrics; oldest is how long the oldest
// message has waited in the folder.
func newMetrics(reg prometheus.Registerer, oldest func() time.Duration) (*collectors, error) {
	m := &collectors{
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "primeflow_mailintake_messages_total",
			Help: "New-job emails by outcome: processed (job made sure of, moved to MAIL_PROCESSED_FOLDER), failed (moved to MAIL_FAILED_FOLDER after its last attempt, or larger than MAIL_MAX_BODY_BYTES), retry (an attempt failed; tried again at the next poll), reopened (moved back into the folder by a person), rejected (moved to MAIL_FAILED_FOLDER unread: not from MAIL_ALLOWED_SENDERS, or failed DMARC and DKIM).",
		}, []string{"outcome"}),
		polls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "primeflow_mailintake_polls_total",
			Help: "Polls of MAIL_FOLDER by result: ok, failed (the folder could not be listed).",
		}, []string{"result"}),
		waits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "primeflow_mailintake_waits_total",
			Help: "Waits that counted no attempt, by reason: throttled (Graph's 429), unavailable (Graph's 5xx or no answer), graph (an email's call that Graph did not answer in time or refused: the email waits, the poll goes on), job_mirror (Prime's rate limit, or job-mirror not answering), ensure_failed (job-mirror could not make sure of the job: Prime's 5xx or no answer), folder_missing (a folder of the intake deleted).",
		}, []string{"reason"}),
		backlog: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "primeflow_mailintake_folder_messages",
			Help: "Messages the last poll left in MAIL_FOLDER: listed and not moved out (a poll cut short counts those it listed).",
		}),
	}
	age := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "primeflow_mailintake_oldest_message_age_seconds",
		Help: "How long the oldest message still in MAIL_FOLDER has been there (since its receivedDateTime); 0 when the folder is empty.",
	}, func() float64 { return oldest().Seconds() })
	if err := errors.Join(metrics.Register(reg, &m.messages), metrics.Register(reg, &m.polls), metrics.Register(reg, &m.waits),
		metrics.Register(reg, &m.backlog), metrics.Replace(reg, age)); err != nil {
		return nil, fmt.Errorf("mail-intake metrics: %w", err)
	}
	for vec, values := range map[*prometheus.CounterVec][]string{
		m.messages: {"processed", "failed", "retry", "reopened", "rejected"},
		m.polls:    {"ok", "failed"},
		m.waits:    {"throttled", "unavailable", "graph", "job_mirror", "ensure_failed", "folder_missing"},
	} {
		for _, v := range values {
			vec.WithLabelValues(v) // served at 0 from the start
		}
	}
	return m, nil
}
