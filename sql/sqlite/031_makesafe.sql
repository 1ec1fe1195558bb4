-- Make-safe detection (spec §5.5 step 3, §6): the phone call a person must make
-- for a job that needs a Make Safe out of hours, at most one a job, and the
-- rungs of the re-check ladder (the spec's ethTask rows). sql/README.md gives
-- the rule of spMakesafeUpsertPhoneCallFromPrimeJob, which the SQLite adapter
-- runs in Go.
CREATE TABLE makesafePhoneCall (
    ID            INTEGER PRIMARY KEY AUTOINCREMENT,
    PrimeJobID    TEXT    NOT NULL,
    JobNumber     TEXT    NULL,
    JobCreatedUTC TEXT    NULL,
    RaisedUTC     TEXT    NOT NULL,
    State         TEXT    NOT NULL DEFAULT 'Raised',
    SmsQueueID    INTEGER NULL
);
-- One phone call a job, however many detections run at once.
CREATE UNIQUE INDEX UX_makesafePhoneCall_PrimeJobID ON makesafePhoneCall (PrimeJobID);

CREATE TABLE makesafeAllocationCheck (
    PrimeJobID TEXT    NOT NULL,
    Rung       INTEGER NOT NULL,
    DueUTC     TEXT    NOT NULL,
    QueuedUTC  TEXT    NOT NULL,
    FiredUTC   TEXT    NULL,
    Outcome    TEXT    NULL,
    PRIMARY KEY (PrimeJobID, Rung)
);
