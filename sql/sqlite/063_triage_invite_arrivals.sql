-- One pending invite a job's open status change, in place of 062's one
-- open invite a job, as on SQL Server (061): the spec's own insert ("skips
-- any job that already has an invite pending", which the live processor
-- runs there) looks for every row this index holds, so it skips where it
-- would collide; primeflow's insert looks for an open invite first.
-- sql/README.md ("Triage invites") gives the reading.
DROP INDEX UX_ethTriageInviteQueue_open;
CREATE UNIQUE INDEX UX_ethTriageInviteQueue_pending ON ethTriageInviteQueue (jobId) WHERE sentUTC IS NULL AND statusLeftUTC IS NULL;
-- A job's invites, for that check.
CREATE INDEX IX_ethTriageInviteQueue_jobId ON ethTriageInviteQueue (jobId);
