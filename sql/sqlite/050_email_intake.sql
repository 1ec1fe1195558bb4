-- The email path (spec §7): the receipt of every Prime new-job email the
-- mail intake reads, keyed by the message's internetMessageId, with what the
-- flow's Extract JobID outputs and how the message fared (primeflow's
-- additions; sql/README.md, "The email path").
CREATE TABLE PrimeEmailJobRegistered (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    bodyPreview       TEXT    NULL,
    registeredUTC     TEXT    NOT NULL,
    internetMessageId TEXT    NULL,
    subject           TEXT    NULL,
    receivedDateTime  TEXT    NULL,
    fromAddress       TEXT    NULL,
    JobID             TEXT    NULL,
    JobIDKind         TEXT    NULL,
    NumericReference  INTEGER NULL,
    JobNumber         TEXT    NULL,
    primeJobId        TEXT    NULL,
    outcome           TEXT    NOT NULL DEFAULT 'Pending',
    lastError         TEXT    NULL,
    attempts          INTEGER NOT NULL DEFAULT 0,
    movedUTC          TEXT    NULL,
    movedTo           TEXT    NULL,
    updatedUTC        TEXT    NOT NULL
);
CREATE UNIQUE INDEX UX_PrimeEmailJobRegistered_internetMessageId ON PrimeEmailJobRegistered (internetMessageId)
    WHERE internetMessageId IS NOT NULL;
CREATE INDEX IX_PrimeEmailJobRegistered_primeJobId ON PrimeEmailJobRegistered (primeJobId, receivedDateTime)
    WHERE primeJobId IS NOT NULL;
