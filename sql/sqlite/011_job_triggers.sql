-- What a job status change queues besides the mirror (spec §5.1 steps 5, 6).
-- The spec names the calls but not the tables; sql/README.md writes down the
-- reading.

-- Client WIP triggers (§5.1 step 5): one row a (job, source), so a replayed
-- event (source ethPrimeWebhookLog:{id}) never queues a second trigger.
CREATE TABLE ethClientWIPTrigger (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    jobId        TEXT NOT NULL,
    triggerType  TEXT NOT NULL,
    source       TEXT NOT NULL,
    queuedUTC    TEXT NOT NULL,
    processedUTC TEXT NULL
);
CREATE UNIQUE INDEX UX_ethClientWIPTrigger_jobId_source ON ethClientWIPTrigger (jobId, source);
CREATE INDEX IX_ethClientWIPTrigger_unprocessed ON ethClientWIPTrigger (id) WHERE processedUTC IS NULL;

-- Triage invites (§5.1 step 6): at most one pending (unsent) invite a job.
CREATE TABLE ethTriageInviteQueue (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    jobId     TEXT NOT NULL,
    statusId  TEXT NULL,
    queuedUTC TEXT NOT NULL,
    sentUTC   TEXT NULL
);
CREATE UNIQUE INDEX UX_ethTriageInviteQueue_pending ON ethTriageInviteQueue (jobId) WHERE sentUTC IS NULL;
