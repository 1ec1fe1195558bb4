-- The webhook log and the numeric job reference map (spec §3, §4.1).
-- Times are TEXT 'YYYY-MM-DD HH:MM:SS.fff' in UTC, which sorts as time does.

CREATE TABLE ethPrimeWebhookLog (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    receivedUTC     TEXT    NOT NULL,
    eventAction     TEXT    NULL,
    jobId           TEXT    NULL,
    payload         TEXT    NOT NULL,
    headers         TEXT    NULL,
    remoteIP        TEXT    NULL,
    isAuthenticated INTEGER NOT NULL DEFAULT 0,
    processedUTC    TEXT    NULL,
    processAttempts INTEGER NOT NULL DEFAULT 0,
    processStatus   TEXT    NULL,
    -- primeflow additions (sql/README.md)
    publishedUTC    TEXT    NULL,
    replayCount     INTEGER NOT NULL DEFAULT 0
);

-- Claiming unprocessed rows never scans the whole log (§3).
CREATE INDEX IX_ethPrimeWebhookLog_unprocessed ON ethPrimeWebhookLog (id) WHERE processedUTC IS NULL;
-- The relay finds rows still to publish the same way.
CREATE INDEX IX_ethPrimeWebhookLog_unpublished ON ethPrimeWebhookLog (id) WHERE publishedUTC IS NULL;
-- primectl filters by job and by time.
CREATE INDEX IX_ethPrimeWebhookLog_jobId ON ethPrimeWebhookLog (jobId) WHERE jobId IS NOT NULL;
CREATE INDEX IX_ethPrimeWebhookLog_receivedUTC ON ethPrimeWebhookLog (receivedUTC);

CREATE TABLE ethPrimeJobReference (
    numericReference INTEGER PRIMARY KEY,
    jobId            TEXT NOT NULL,
    firstSeenUTC     TEXT NOT NULL
);
