package mssql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/ethosbuilding/primeflow/pkg/store"
)

// The procedures of the new-job path, the sweeps and the coverage report
// (sql/mssql/051_new_job_path.sql).
const (
	procProcessNewPrimeJob    = "dbo.spEthProcessNewPrimeJob"
	procRecordBackstopSeen    = "dbo.spPrimeflowRecordBackstopSeen"
	procGetSweepWatermark     = "dbo.spPrimeflowGetSweepWatermark"
	procSetSweepWatermark     = "dbo.spPrimeflowSetSweepWatermark"
	procJobCoverage           = "dbo.spPrimeflowJobCoverage"
	procWebhookActionCoverage = "dbo.spPrimeflowWebhookActionCoverage"
	procCountEmailReceipts    = "dbo.spPrimeflowCountEmailReceipts"
)

// ProcessNewPrimeJob runs the new-job pipeline's SQL for a job, once
// (spEthProcessNewPrimeJob), with the hand-off the caller built.
func (s *Store) ProcessNewPrimeJob(ctx context.Context, jobID string, logID int64, via string, handOff store.OutboxMessage) (store.NewJobRun, error) {
	id, err := parseGUID(jobID)
	if err != nil {
		return store.NewJobRun{}, fmt.Errorf("mssql: process new prime job: %w", err)
	}
	if handOff.Subject == "" || len(handOff.Header) > 0 {
		return store.NewJobRun{}, fmt.Errorf("mssql: process new prime job %s: the hand-off needs a subject and carries no headers", jobID)
	}
	var run store.NewJobRun
	var outboxID sql.NullInt64
	var m store.OutboxMessage
	var data string
	err = s.q().QueryRowContext(ctx, procProcessNewPrimeJob,
		sql.Named("JobId", id),
		sql.Named("Via", sqlString(via)),
		sql.Named("LogId", sqlInt64(logID)),
		sql.Named("HandOffSubject", handOff.Subject),
		sql.Named("HandOffMsgId", handOff.MsgID),
		sql.Named("HandOffData", string(handOff.Data)),
	).Scan(&run.Ran, &run.Queued, &outboxID, scanString{&m.Subject}, scanString{&m.MsgID}, scanString{&data}, scanTime{&m.CreatedUTC})
	if err != nil {
		return store.NewJobRun{}, fmt.Errorf("mssql: process new prime job %s: %w", strings.ToLower(jobID), err)
	}
	if run.Ran && outboxID.Valid {
		m.ID, m.Data = outboxID.Int64, []byte(data)
		run.HandOff = []store.OutboxMessage{m}
	}
	return run, nil
}
