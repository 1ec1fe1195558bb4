-- Retiring old rows without losing replay (primectl archive, replay
-- --from-archive; sql/README.md, "Archive"): the finished rows of the
-- webhook log and of the queues no mirror reads once they are done, listed
-- by id a page at a time, deleted a short batch at a time once the archive
-- file holds them, and log rows put back under their own ids. Every batch is
-- safe to run again: modules are CREATE OR ALTER.
--
-- "Finished before @Before", table by table (store.ArchiveTable):
--   ethPrimeWebhookLog       processed, received and processed before it;
--   smsQueue                 Sent or Logged before it, or Dismissed before
--                            it (UpdatedUTC; Failed stays); its dedupe key is
--                            kept (081's smsArchivedDedupeKey), so it is
--                            never queued again;
--   ethTriageInviteQueue     Sent or Logged before it, or Dismissed before it
--                            (updatedUTC), its status change over
--                            (statusLeftUTC: an open invite is what stops a
--                            replayed event inviting twice; Failed stays);
--   PrimeEmailJobRegistered  its message moved out of the folder before it,
--                            and done: Processed (moved to the processed
--                            folder), Rejected (refused unread), or
--                            Dismissed before it (Failed, and a receipt
--                            still in the folder, stay).

-- spPrimeflowArchiveCount: one row, each table's rows finished before @Before.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowArchiveCount
    @Before DATETIME2(3)
AS
BEGIN
    SET NOCOUNT ON;

    SELECT
        (SELECT COUNT_BIG(*) FROM dbo.ethPrimeWebhookLog
         WHERE processedUTC IS NOT NULL AND processedUTC < @Before AND receivedUTC < @Before) AS webhookLog,
        (SELECT COUNT_BIG(*) FROM dbo.smsQueue
         WHERE State IN (N'Sent', N'Logged') AND SentUTC < @Before
            OR State = N'Dismissed' AND UpdatedUTC < @Before) AS sms,
        (SELECT COUNT_BIG(*) FROM dbo.ethTriageInviteQueue
         WHERE (state IN (N'Sent', N'Logged') AND sentUTC < @Before OR state = N'Dismissed' AND updatedUTC < @Before)
           AND statusLeftUTC IS NOT NULL) AS triageInvites,
        (SELECT COUNT_BIG(*) FROM dbo.PrimeEmailJobRegistered
         WHERE movedUTC < @Before
           AND (outcome = N'Processed' AND movedTo = N'Processed' OR outcome = N'Rejected'
                OR outcome = N'Dismissed' AND updatedUTC < @Before)) AS emailReceipts;
END;
GO

-- spPrimeflowArchiveListWebhookLog: up to @Top finished log rows with an id
-- above @AfterID, oldest first, as spPrimeflowGetWebhookLog returns a row.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowArchiveListWebhookLog
    @Before  DATETIME2(3),
    @AfterID BIGINT = 0,
    @Top     INT    = 1000
AS
BEGIN
    SET NOCOUNT ON;

    SELECT TOP (@Top) id, receivedUTC, eventAction, jobId, payload, headers, remoteIP, isAuthenticated,
           processedUTC, processAttempts, processStatus, publishedUTC, replayCount
    FROM dbo.ethPrimeWebhookLog
    WHERE id > @AfterID AND processedUTC IS NOT NULL AND processedUTC < @Before AND receivedUTC < @Before
    ORDER BY id;
END;
GO

-- spPrimeflowArchiveListSMS: the same for smsQueue, as spSmsQueueGet
-- returns a message.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowArchiveListSMS
    @Before  DATETIME2(3),
    @AfterID BIGINT = 0,
    @Top     INT    = 1000
AS
BEGIN
    SET NOCOUNT ON;

    SELECT TOP (@Top) ID, Recipient, Body, Source, DedupeKey, State, Attempts, NextAttemptUTC,
           ClaimedUntilUTC, LastError, QueuedUTC, SentUTC, FailedUTC, UpdatedUTC
    FROM dbo.smsQueue
    WHERE ID > @AfterID
      AND (State IN (N'Sent', N'Logged') AND SentUTC < @Before OR State = N'Dismissed' AND UpdatedUTC < @Before)
    ORDER BY ID;
END;
GO

-- spPrimeflowArchiveListTriageInvites: the same for ethTriageInviteQueue, as
-- spPrimeflowGetTriageInvite returns an invite.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowArchiveListTriageInvites
    @Before  DATETIME2(3),
    @AfterID BIGINT = 0,
    @Top     INT    = 1000
AS
BEGIN
    SET NOCOUNT ON;

    SELECT TOP (@Top) id, jobId, statusId, queuedUTC, sentUTC, state, attempts, nextAttemptUTC,
           claimedUntilUTC, lastError, failedUTC, updatedUTC, jobVersion, statusLeftUTC, payload,
           statusHistoryId, jobUpdatedAt
    FROM dbo.ethTriageInviteQueue
    WHERE id > @AfterID
      AND (state IN (N'Sent', N'Logged') AND sentUTC < @Before OR state = N'Dismissed' AND updatedUTC < @Before)
      AND statusLeftUTC IS NOT NULL
    ORDER BY id;
END;
GO

-- spPrimeflowArchiveListEmailReceipts: the same for PrimeEmailJobRegistered,
-- as spPrimeflowEmailJobRegisteredGet returns a receipt.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowArchiveListEmailReceipts
    @Before  DATETIME2(3),
    @AfterID BIGINT = 0,
    @Top     INT    = 1000
AS
BEGIN
    SET NOCOUNT ON;

    SELECT TOP (@Top) id, internetMessageId, subject, receivedDateTime, fromAddress, bodyPreview, JobID, JobIDKind,
           NumericReference, JobNumber, primeJobId, outcome, lastError, attempts, movedUTC, movedTo,
           registeredUTC, updatedUTC, CAST(0 AS BIT) AS inserted
    FROM dbo.PrimeEmailJobRegistered
    WHERE id > @AfterID AND movedUTC < @Before
      AND (outcome = N'Processed' AND movedTo = N'Processed' OR outcome = N'Rejected'
           OR outcome = N'Dismissed' AND updatedUTC < @Before)
    ORDER BY id;
END;
GO

-- spPrimeflowArchiveDelete: deletes the rows of @Table (one of the four)
-- with an id in @IDs that are still finished before @Before — a row changed
-- since it was archived stays — and returns how many. One statement, in
-- the caller's transaction or its own: a batch holds its locks that long;
-- for smsQueue, two in one transaction: the delete, and the deleted
-- messages' dedupe keys into smsArchivedDedupeKey.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowArchiveDelete
    @Table  NVARCHAR(128),
    @IDs    dbo.primeflowIdList READONLY,
    @Before DATETIME2(3)
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;

    DECLARE @deleted INT = 0;
    IF @Table = N'ethPrimeWebhookLog'
    BEGIN
        DELETE l FROM dbo.ethPrimeWebhookLog AS l
        WHERE l.id IN (SELECT i.id FROM @IDs AS i)
          AND l.processedUTC IS NOT NULL AND l.processedUTC < @Before AND l.receivedUTC < @Before;
        SET @deleted = @@ROWCOUNT;
    END
    ELSE IF @Table = N'smsQueue'
    BEGIN
        DECLARE @gone TABLE (ID BIGINT NOT NULL PRIMARY KEY, DedupeKey NVARCHAR(200) NULL);
        BEGIN TRANSACTION;
        DELETE m
        OUTPUT deleted.ID, deleted.DedupeKey INTO @gone (ID, DedupeKey)
        FROM dbo.smsQueue AS m
        WHERE m.ID IN (SELECT i.id FROM @IDs AS i)
          AND (m.State IN (N'Sent', N'Logged') AND m.SentUTC < @Before OR m.State = N'Dismissed' AND m.UpdatedUTC < @Before);
        SET @deleted = @@ROWCOUNT;
        INSERT INTO dbo.smsArchivedDedupeKey (DedupeKey, SmsQueueID, ArchivedUTC)
        SELECT g.DedupeKey, g.ID, SYSUTCDATETIME()
        FROM @gone AS g
        WHERE g.DedupeKey IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM dbo.smsArchivedDedupeKey AS k WITH (UPDLOCK, HOLDLOCK)
                          WHERE k.DedupeKey = g.DedupeKey);
        COMMIT TRANSACTION;
    END
    ELSE IF @Table = N'ethTriageInviteQueue'
    BEGIN
        DELETE q FROM dbo.ethTriageInviteQueue AS q
        WHERE q.id IN (SELECT i.id FROM @IDs AS i)
          AND (q.state IN (N'Sent', N'Logged') AND q.sentUTC < @Before OR q.state = N'Dismissed' AND q.updatedUTC < @Before)
          AND q.statusLeftUTC IS NOT NULL;
        SET @deleted = @@ROWCOUNT;
    END
    ELSE IF @Table = N'PrimeEmailJobRegistered'
    BEGIN
        DELETE r FROM dbo.PrimeEmailJobRegistered AS r
        WHERE r.id IN (SELECT i.id FROM @IDs AS i)
          AND r.movedUTC < @Before
          AND (r.outcome = N'Processed' AND r.movedTo = N'Processed' OR r.outcome = N'Rejected'
               OR r.outcome = N'Dismissed' AND r.updatedUTC < @Before);
        SET @deleted = @@ROWCOUNT;
    END
    ELSE
        THROW 50080, N'spPrimeflowArchiveDelete: @Table is not a table the archive holds', 1;

    SELECT @deleted AS deleted;
END;
GO

-- spPrimeflowRestoreWebhookLog: puts one archived log row back under its
-- own id, as it was, unless the log holds that id; returns restored (the
-- caller then queues it for replay with spPrimeflowResetWebhookLog, in the
-- same transaction). An explicit id needs IDENTITY_INSERT, which only the
-- table's owner may set: the procedure runs as its owner, so the operators'
-- login, which may EXECUTE in dbo and write no table, can restore. The
-- identity's seed is not moved back: an archived id is below it.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowRestoreWebhookLog
    @ID              BIGINT,
    @ReceivedUTC     DATETIME2(3),
    @EventAction     NVARCHAR(100)    = NULL,
    @JobId           UNIQUEIDENTIFIER = NULL,
    @Payload         NVARCHAR(MAX),
    @Headers         NVARCHAR(MAX)    = NULL,
    @RemoteIP        NVARCHAR(64)     = NULL,
    @IsAuthenticated BIT              = 0,
    @ProcessedUTC    DATETIME2(3)     = NULL,
    @ProcessAttempts INT              = 0,
    @ProcessStatus   NVARCHAR(500)    = NULL,
    @PublishedUTC    DATETIME2(3)     = NULL,
    @ReplayCount     INT              = 0
WITH EXECUTE AS OWNER
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;

    IF EXISTS (SELECT 1 FROM dbo.ethPrimeWebhookLog WITH (UPDLOCK, HOLDLOCK) WHERE id = @ID)
    BEGIN
        SELECT CAST(0 AS BIT) AS restored;
        RETURN;
    END;
    SET IDENTITY_INSERT dbo.ethPrimeWebhookLog ON;
    INSERT INTO dbo.ethPrimeWebhookLog
        (id, receivedUTC, eventAction, jobId, payload, headers, remoteIP, isAuthenticated,
         processedUTC, processAttempts, processStatus, publishedUTC, replayCount)
    VALUES (@ID, @ReceivedUTC, @EventAction, @JobId, @Payload, @Headers, @RemoteIP, @IsAuthenticated,
            @ProcessedUTC, @ProcessAttempts, LEFT(@ProcessStatus, 500), @PublishedUTC, @ReplayCount);
    SET IDENTITY_INSERT dbo.ethPrimeWebhookLog OFF;
    SELECT CAST(1 AS BIT) AS restored;
END;
GO
