-- The job mirror's first-sight record (spec §4.3, §5.1, §6; a primeflow
-- addition, sql/README.md). primeJobs itself is in 002_mirror.sql.

-- One row a job, made by the first event (or ensure-job request) that finds
-- the job missing from the mirror: the primary key lets only the first claim
-- win, so the new-job pipeline runs once per job. The pipeline columns record
-- how the pipeline went, for primectl firstseen.
CREATE TABLE primeflowJobFirstSeen (
    jobId                TEXT    PRIMARY KEY,
    logId                INTEGER NULL,
    firstSeenUTC         TEXT    NOT NULL,
    pipelineCompletedUTC TEXT    NULL,
    pipelineAttempts     INTEGER NOT NULL DEFAULT 0,
    pipelineStatus       TEXT    NULL
);
CREATE INDEX IX_primeflowJobFirstSeen_pending ON primeflowJobFirstSeen (firstSeenUTC) WHERE pipelineCompletedUTC IS NULL;
