-- The SMS queue (spec §6 "SMS Send Queued Messages", §8.2 "Webhook Send Queued
-- SMS"): text messages waiting to be sent, and how their sending went.
-- sql/README.md describes the states and the claim. Times are TEXT
-- 'YYYY-MM-DD HH:MM:SS.fff' in UTC.
CREATE TABLE smsQueue (
    ID              INTEGER PRIMARY KEY AUTOINCREMENT,
    Recipient       TEXT    NOT NULL,
    Body            TEXT    NOT NULL,
    Source          TEXT    NULL,
    DedupeKey       TEXT    NULL,
    State           TEXT    NOT NULL DEFAULT 'Queued',
    Attempts        INTEGER NOT NULL DEFAULT 0,
    NextAttemptUTC  TEXT    NOT NULL,
    ClaimedUntilUTC TEXT    NULL,
    LastError       TEXT    NULL,
    QueuedUTC       TEXT    NOT NULL,
    SentUTC         TEXT    NULL,
    FailedUTC       TEXT    NULL,
    UpdatedUTC      TEXT    NOT NULL
);
-- A message with a dedupe key is queued once (a make-safe SMS once a job).
CREATE UNIQUE INDEX UX_smsQueue_DedupeKey ON smsQueue (DedupeKey) WHERE DedupeKey IS NOT NULL;
-- The claim reads only the messages still to send.
CREATE INDEX IX_smsQueue_pending ON smsQueue (ID) WHERE State IN ('Queued', 'Sending');
