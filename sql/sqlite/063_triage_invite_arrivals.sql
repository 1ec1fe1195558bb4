-- A triage invite answers one arrival of the job in the status (spec §5.1
-- step 6, §10.4), however the mirror learns of it: every write of the job
-- or of its status history closes an open invite whose arrival is over, and
-- Prime's status history, where the mirror holds it, tells one arrival from
-- the next. sql/README.md ("Triage invites") gives the reading; the
-- statements are in pkg/store/sqlite.
--
-- statusHistoryId: the job's status-history entry (Prime's record of the
-- arrival) the invite answers, where the mirror held it when it was queued.
-- jobUpdatedAt: Prime's time of the job as the invite saw it (its
-- updatedAt, or the entry's createdAt when later); an entry more than a
-- minute after it is a later change. An open invite queued before takes its
-- job's updatedAt now, which is no earlier than the arrival it answers.
ALTER TABLE ethTriageInviteQueue ADD COLUMN statusHistoryId TEXT NULL;
ALTER TABLE ethTriageInviteQueue ADD COLUMN jobUpdatedAt TEXT NULL;
UPDATE ethTriageInviteQueue
SET jobUpdatedAt = (SELECT j.updatedAt FROM primeJobs AS j WHERE j.jobId = ethTriageInviteQueue.jobId)
WHERE statusLeftUTC IS NULL;
-- One pending invite a job's open arrival, in place of 062's one open
-- invite a job, as on SQL Server (061): the spec's own insert ("skips any
-- job that already has an invite pending", which the live processor runs
-- there) looks for every row this index holds, so it skips where it would
-- collide; primeflow's insert looks for an open invite first.
DROP INDEX UX_ethTriageInviteQueue_open;
CREATE UNIQUE INDEX UX_ethTriageInviteQueue_pending ON ethTriageInviteQueue (jobId) WHERE sentUTC IS NULL AND statusLeftUTC IS NULL;
-- A job's invites, for those checks and the close every write of the job runs.
CREATE INDEX IX_ethTriageInviteQueue_jobId ON ethTriageInviteQueue (jobId);
