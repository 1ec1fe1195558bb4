-- child-mirror (spec §5.2–§5.5): what the child mirror adds to the tables of
-- 002_mirror.sql, and the AI summary queue of §5.3 step 4 (sql/README.md).

-- The Make Safe rule's verdict, written with each allocation by primeflow
-- from prime.Allocation.IsMakeSafe, the one place the rule lives; SQL reads
-- this column instead of restating the rule.
ALTER TABLE primeAllocations ADD COLUMN isMakeSafe INTEGER NOT NULL DEFAULT 0;

-- IAIData.QueueJobSummaryNow (§5.3 step 4): a job's AI summary is due at
-- QueuedFor; one row a job.
CREATE TABLE ethAIJobSummaryQueue (
    jobId       TEXT PRIMARY KEY,
    QueuedFor   TEXT NOT NULL,
    createdUTC  TEXT NOT NULL,
    updatedUTC  TEXT NOT NULL
);
CREATE INDEX IX_ethAIJobSummaryQueue_QueuedFor ON ethAIJobSummaryQueue (QueuedFor);
