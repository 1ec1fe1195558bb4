-- ethSyncQueue (spec §6, §7): the per-job child syncs still to run. One row
-- an (object, job) means "sync this job's <object> from Prime"; the object is
-- the mirror table (primeJobStatusHistory, primeContacts, primeAllocations,
-- primeContactRelationships). The spec does not give the columns;
-- sql/README.md writes down the reading.
CREATE TABLE ethSyncQueue (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    objectName TEXT NOT NULL,
    jobId      TEXT NOT NULL,
    queuedUTC  TEXT NOT NULL,
    claimedUTC TEXT NULL
);
CREATE UNIQUE INDEX UX_ethSyncQueue_objectName_jobId ON ethSyncQueue (objectName, jobId);
CREATE INDEX IX_ethSyncQueue_jobId ON ethSyncQueue (jobId);
