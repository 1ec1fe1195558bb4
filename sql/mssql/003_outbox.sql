-- The transactional outbox (a primeflow addition, sql/README.md): a stage
-- writes the messages it hands on in the same transaction as its effect, so
-- a hand-off is never lost and never made without the effect. They are
-- published right after the commit and, failing that, by the outbox sweeper;
-- msgId is the Nats-Msg-Id, so a second publish is dropped by JetStream.
IF OBJECT_ID(N'dbo.primeflowOutbox', N'U') IS NULL
CREATE TABLE dbo.primeflowOutbox (
    id           BIGINT IDENTITY(1,1) NOT NULL CONSTRAINT PK_primeflowOutbox PRIMARY KEY,
    subject      NVARCHAR(200) NOT NULL,
    msgId        NVARCHAR(200) NOT NULL,
    headers      NVARCHAR(MAX) NULL,
    data         NVARCHAR(MAX) NOT NULL,
    createdUTC   DATETIME2(3)  NOT NULL,
    publishedUTC DATETIME2(3)  NULL
);
GO
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_primeflowOutbox_unpublished' AND object_id = OBJECT_ID(N'dbo.primeflowOutbox'))
CREATE INDEX IX_primeflowOutbox_unpublished ON dbo.primeflowOutbox (id) WHERE publishedUTC IS NULL;
GO
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_primeflowOutbox_publishedUTC' AND object_id = OBJECT_ID(N'dbo.primeflowOutbox'))
CREATE INDEX IX_primeflowOutbox_publishedUTC ON dbo.primeflowOutbox (publishedUTC) WHERE publishedUTC IS NOT NULL;
GO
