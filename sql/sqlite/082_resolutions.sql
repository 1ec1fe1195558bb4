-- A person's answers to the rows that wait for one (primectl sms, invites,
-- emails: requeue, dismiss; sql/README.md, "Resolutions"): one row an
-- answer, written in the transaction that changes the row (pkg/store/sqlite,
-- Resolve), which stays where it is. tableName is the row's table, rowId its
-- id; action Requeued or Dismissed; resolvedBy who, as far as primectl knows.
CREATE TABLE primeflowResolution (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    tableName   TEXT    NOT NULL,
    rowId       INTEGER NOT NULL,
    action      TEXT    NOT NULL,
    resolvedBy  TEXT    NOT NULL,
    reason      TEXT    NULL,
    resolvedUTC TEXT    NOT NULL
);
CREATE INDEX IX_primeflowResolution_row ON primeflowResolution (tableName, rowId);
