-- The version of each job whose missing objects (spec §6 step 1: status
-- histories, contacts, allocations, contact relationships) primeflow last
-- queued in ethSyncQueue: at the job's first sight, and by the jobs-by-date
-- backstop once the job has changed since, so that the backstop keeps every
-- mirrored job's children current, as n8n's "Prime Sync Jobs by Date" did
-- (§7), and queues nothing for a job at that version (sql/README.md).
CREATE TABLE primeflowJobObjectsQueued (
    jobId     TEXT PRIMARY KEY,
    version   INTEGER NOT NULL,
    updatedAt TEXT NOT NULL,
    queuedUTC TEXT NOT NULL
);
