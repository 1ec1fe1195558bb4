-- The dedupe keys of the messages primectl archive has deleted (the
-- adapter's DeleteArchived writes them in the delete's transaction): a key
-- stays used once its message is archived, so the queue's insert
-- (pkg/store/sqlite, QueueSMS and the make-safe phone call) queues no second
-- message under it (sql/README.md, "Archive"). One row a key; SmsQueueID is
-- the archived message's ID.
CREATE TABLE smsArchivedDedupeKey (
    DedupeKey   TEXT    NOT NULL PRIMARY KEY,
    SmsQueueID  INTEGER NOT NULL,
    ArchivedUTC TEXT    NOT NULL
);
