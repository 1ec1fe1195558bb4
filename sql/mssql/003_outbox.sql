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

-- The procedures over the outbox (sql/README.md). The pkg/outbox publisher
-- publishes right after the commit; the sweeper picks up what that missed
-- and purges what was published long ago.

-- spPrimeflowOutboxInsert: stores one message and returns its id. Subject and
-- msgId arrive as NVARCHAR(MAX) so that one longer than its column fails the
-- insert instead of being cut: a cut subject publishes elsewhere, and a cut
-- msgId can collide with another message's and be dropped as its duplicate.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowOutboxInsert
    @Subject    NVARCHAR(MAX),
    @MsgId      NVARCHAR(MAX),
    @Headers    NVARCHAR(MAX) = NULL,
    @Data       NVARCHAR(MAX),
    @CreatedUTC DATETIME2(3)  = NULL
AS
BEGIN
    SET NOCOUNT ON;

    INSERT INTO dbo.primeflowOutbox (subject, msgId, headers, data, createdUTC)
    VALUES (@Subject, @MsgId, @Headers, COALESCE(@Data, N''), COALESCE(@CreatedUTC, SYSUTCDATETIME()));

    SELECT CAST(SCOPE_IDENTITY() AS BIGINT) AS id;
END;
GO

-- spPrimeflowOutboxGetUnpublished: the messages still to publish after
-- @AfterId that were written before @CreatedBefore (the sweeper leaves fresh
-- ones to the publish that follows their commit), oldest first, at most @Top.
-- The sweeper pages on by id past the messages NATS refused, which stay
-- unpublished for its next sweep.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowOutboxGetUnpublished
    @CreatedBefore DATETIME2(3),
    @Top           INT = 200,
    @AfterId       BIGINT = 0
AS
BEGIN
    SET NOCOUNT ON;

    SELECT TOP (@Top)
        id, subject, msgId, headers, data, createdUTC
    FROM dbo.primeflowOutbox
    WHERE publishedUTC IS NULL
      AND id > @AfterId
      AND createdUTC < @CreatedBefore
    ORDER BY id;
END;
GO

-- spPrimeflowOutboxSetPublished: records that the messages in @IDs were
-- published at @PublishedUTC (now when NULL).
CREATE OR ALTER PROCEDURE dbo.spPrimeflowOutboxSetPublished
    @IDs          dbo.primeflowIdList READONLY,
    @PublishedUTC DATETIME2(3) = NULL
AS
BEGIN
    SET NOCOUNT ON;

    UPDATE o
    SET publishedUTC = COALESCE(@PublishedUTC, SYSUTCDATETIME())
    FROM dbo.primeflowOutbox AS o
    INNER JOIN @IDs AS i ON i.id = o.id;
END;
GO

-- spPrimeflowOutboxPurge: deletes the messages published before
-- @PublishedBefore and returns how many. Never an unpublished one. It deletes
-- in chunks, each its own transaction when the caller has none, so a large
-- purge never escalates to a table lock that would hold up the stages writing
-- new messages.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowOutboxPurge
    @PublishedBefore DATETIME2(3)
AS
BEGIN
    SET NOCOUNT ON;

    DECLARE @chunk INT = 4000, @deleted INT = 0, @n INT;

    WHILE 1 = 1
    BEGIN
        DELETE TOP (@chunk) FROM dbo.primeflowOutbox
        WHERE publishedUTC IS NOT NULL
          AND publishedUTC < @PublishedBefore;

        SET @n = @@ROWCOUNT;
        SET @deleted += @n;
        IF @n < @chunk
            BREAK;
    END;

    SELECT @deleted AS rowsDeleted;
END;
GO
