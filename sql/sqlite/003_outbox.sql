-- The transactional outbox (a primeflow addition, sql/README.md): a stage
-- writes the messages it hands on in the same transaction as its effect, so
-- a hand-off is never lost and never made without the effect. They are
-- published right after the commit and, failing that, by the outbox sweeper;
-- msgId is the Nats-Msg-Id, so a second publish is dropped by JetStream.
CREATE TABLE primeflowOutbox (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    subject      TEXT NOT NULL,
    msgId        TEXT NOT NULL,
    headers      TEXT NULL,
    data         TEXT NOT NULL,
    createdUTC   TEXT NOT NULL,
    publishedUTC TEXT NULL
);
CREATE INDEX IX_primeflowOutbox_unpublished ON primeflowOutbox (id) WHERE publishedUTC IS NULL;
CREATE INDEX IX_primeflowOutbox_publishedUTC ON primeflowOutbox (publishedUTC) WHERE publishedUTC IS NOT NULL;
