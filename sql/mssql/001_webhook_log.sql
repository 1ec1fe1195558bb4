-- The webhook log and the numeric job reference map (spec §3, §4.1), and the
-- procedures over them. sql/README.md says how scripts are applied and why
-- each primeflow addition exists. Every batch is safe to run again: tables,
-- columns, indexes and types are created only when absent, and modules are
-- CREATE OR ALTER. Batches end at lines that hold only GO.

-- ethPrimeWebhookLog: every webhook as received (§2), and the work queue (§3).
IF OBJECT_ID(N'dbo.ethPrimeWebhookLog', N'U') IS NULL
CREATE TABLE dbo.ethPrimeWebhookLog (
    id              BIGINT IDENTITY(1,1) NOT NULL CONSTRAINT PK_ethPrimeWebhookLog PRIMARY KEY,
    receivedUTC     DATETIME2(3)     NOT NULL CONSTRAINT DF_ethPrimeWebhookLog_receivedUTC DEFAULT SYSUTCDATETIME(),
    eventAction     NVARCHAR(100)    NULL,
    jobId           UNIQUEIDENTIFIER NULL,
    payload         NVARCHAR(MAX)    NOT NULL,
    headers         NVARCHAR(MAX)    NULL,
    remoteIP        NVARCHAR(64)     NULL,
    isAuthenticated BIT              NOT NULL CONSTRAINT DF_ethPrimeWebhookLog_isAuthenticated DEFAULT 0,
    processedUTC    DATETIME2(3)     NULL,
    processAttempts INT              NOT NULL CONSTRAINT DF_ethPrimeWebhookLog_processAttempts DEFAULT 0,
    processStatus   NVARCHAR(500)    NULL,
    -- primeflow additions (sql/README.md)
    publishedUTC    DATETIME2(3)     NULL,
    replayCount     INT              NOT NULL CONSTRAINT DF_ethPrimeWebhookLog_replayCount DEFAULT 0
);
GO

-- The spec's table is live before primeflow arrives (§11): give it the
-- primeflow additions. Rows the old processor finished or gave up on (§3 cap
-- of 5) count as published, so the relay publishes only the rows still queued.
-- The UPDATE is dynamic SQL because this batch compiles before the column exists.
IF COL_LENGTH(N'dbo.ethPrimeWebhookLog', N'publishedUTC') IS NULL
BEGIN
    ALTER TABLE dbo.ethPrimeWebhookLog ADD publishedUTC DATETIME2(3) NULL;
    EXEC sys.sp_executesql N'UPDATE dbo.ethPrimeWebhookLog
        SET publishedUTC = COALESCE(processedUTC, receivedUTC)
        WHERE processedUTC IS NOT NULL OR processAttempts >= 5;';
END;
GO

IF COL_LENGTH(N'dbo.ethPrimeWebhookLog', N'replayCount') IS NULL
    ALTER TABLE dbo.ethPrimeWebhookLog ADD replayCount INT NOT NULL
        CONSTRAINT DF_ethPrimeWebhookLog_replayCount DEFAULT 0;
GO

-- Claiming unprocessed rows never scans the whole log (§3); processAttempts
-- rides along so the attempt cap is checked inside the index.
IF NOT EXISTS (SELECT 1 FROM sys.indexes
               WHERE object_id = OBJECT_ID(N'dbo.ethPrimeWebhookLog') AND name = N'IX_ethPrimeWebhookLog_unprocessed')
    CREATE NONCLUSTERED INDEX IX_ethPrimeWebhookLog_unprocessed
        ON dbo.ethPrimeWebhookLog (id) INCLUDE (processAttempts)
        WHERE processedUTC IS NULL;
GO

-- The relay finds the rows still to publish the same way.
IF NOT EXISTS (SELECT 1 FROM sys.indexes
               WHERE object_id = OBJECT_ID(N'dbo.ethPrimeWebhookLog') AND name = N'IX_ethPrimeWebhookLog_unpublished')
    CREATE NONCLUSTERED INDEX IX_ethPrimeWebhookLog_unpublished
        ON dbo.ethPrimeWebhookLog (id) INCLUDE (receivedUTC)
        WHERE publishedUTC IS NULL;
GO

-- primectl filters by job and by time.
IF NOT EXISTS (SELECT 1 FROM sys.indexes
               WHERE object_id = OBJECT_ID(N'dbo.ethPrimeWebhookLog') AND name = N'IX_ethPrimeWebhookLog_jobId')
    CREATE NONCLUSTERED INDEX IX_ethPrimeWebhookLog_jobId
        ON dbo.ethPrimeWebhookLog (jobId)
        WHERE jobId IS NOT NULL;
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes
               WHERE object_id = OBJECT_ID(N'dbo.ethPrimeWebhookLog') AND name = N'IX_ethPrimeWebhookLog_receivedUTC')
    CREATE NONCLUSTERED INDEX IX_ethPrimeWebhookLog_receivedUTC
        ON dbo.ethPrimeWebhookLog (receivedUTC);
GO

-- ethPrimeJobReference: Prime's numeric job reference and the job it names (§4.1).
IF OBJECT_ID(N'dbo.ethPrimeJobReference', N'U') IS NULL
CREATE TABLE dbo.ethPrimeJobReference (
    numericReference BIGINT           NOT NULL CONSTRAINT PK_ethPrimeJobReference PRIMARY KEY,
    jobId            UNIQUEIDENTIFIER NOT NULL,
    firstSeenUTC     DATETIME2(3)     NOT NULL CONSTRAINT DF_ethPrimeJobReference_firstSeenUTC DEFAULT SYSUTCDATETIME()
);
GO

-- A list of log ids, for the procedures that take a set of rows.
IF TYPE_ID(N'dbo.primeflowIdList') IS NULL
    CREATE TYPE dbo.primeflowIdList AS TABLE (id BIGINT NOT NULL PRIMARY KEY);
GO

-- spPrimeInsertWebhookLog (§3): inserts one row and returns its id. Values
-- longer than their column are cut rather than failing the insert, because a
-- failed insert answers Prime 500 and Prime retries the same body for ever;
-- the payload keeps the whole body.
CREATE OR ALTER PROCEDURE dbo.spPrimeInsertWebhookLog
    @ReceivedUTC     DATETIME2(3)     = NULL,
    @EventAction     NVARCHAR(MAX)    = NULL,
    @JobId           UNIQUEIDENTIFIER = NULL,
    @Payload         NVARCHAR(MAX),
    @Headers         NVARCHAR(MAX)    = NULL,
    @RemoteIP        NVARCHAR(MAX)    = NULL,
    @IsAuthenticated BIT              = 0
AS
BEGIN
    SET NOCOUNT ON;

    INSERT INTO dbo.ethPrimeWebhookLog
        (receivedUTC, eventAction, jobId, payload, headers, remoteIP, isAuthenticated)
    VALUES
        (COALESCE(@ReceivedUTC, SYSUTCDATETIME()), LEFT(@EventAction, 100), @JobId,
         COALESCE(@Payload, N'{}'), @Headers, LEFT(@RemoteIP, 64), COALESCE(@IsAuthenticated, 0));

    SELECT CAST(SCOPE_IDENTITY() AS BIGINT) AS id;
END;
GO

-- spPrimeGetWebhookLogUnprocessed (§3): the oldest unprocessed rows under the
-- attempt cap. @MaxAttempts must stay equal to the service's cap (§10.6).
CREATE OR ALTER PROCEDURE dbo.spPrimeGetWebhookLogUnprocessed
    @Top         INT = 50,
    @MaxAttempts INT = 5
AS
BEGIN
    SET NOCOUNT ON;

    SELECT TOP (@Top)
        id, receivedUTC, eventAction, jobId, payload, headers, remoteIP, isAuthenticated,
        processedUTC, processAttempts, processStatus, publishedUTC, replayCount
    FROM dbo.ethPrimeWebhookLog
    WHERE processedUTC IS NULL
      AND processAttempts < @MaxAttempts
    ORDER BY id;
END;
GO

-- spPrimeSetWebhookLogProcessed (§3): stamps the row processed, and writes
-- jobId only when one is given. Returns how many rows it updated (0 or 1).
-- @OnlyIfUnprocessed, a primeflow addition after the spec's parameters, = 1
-- writes only a row still queued (processedUTC IS NULL), checked by the
-- UPDATE itself: a stage's commit does not land on a row another run of the
-- same event has finished; 0 then means already processed (or no such row).
CREATE OR ALTER PROCEDURE dbo.spPrimeSetWebhookLogProcessed
    @ID                BIGINT,
    @JobId             UNIQUEIDENTIFIER = NULL,
    @ProcessStatus     NVARCHAR(MAX)    = NULL,
    @OnlyIfUnprocessed BIT              = 0
AS
BEGIN
    SET NOCOUNT ON;

    UPDATE dbo.ethPrimeWebhookLog
    SET processedUTC  = SYSUTCDATETIME(),
        processStatus = LEFT(@ProcessStatus, 500),
        jobId         = COALESCE(@JobId, jobId)
    WHERE id = @ID
      AND (@OnlyIfUnprocessed = 0 OR processedUTC IS NULL);

    SELECT @@ROWCOUNT AS rowsUpdated;
END;
GO

-- spPrimeIncrementWebhookLogAttempt (§3): records a failed attempt and its
-- error and leaves the row queued. Returns the attempts so far, or no row
-- when @ID does not exist. @OnlyIfUnprocessed, a primeflow addition after
-- the spec's parameters, = 1 records nothing on a row already processed
-- (no row returned then either): a run of an event that fails after
-- another run finished it must not mark the row failed.
CREATE OR ALTER PROCEDURE dbo.spPrimeIncrementWebhookLogAttempt
    @ID                BIGINT,
    @JobId             UNIQUEIDENTIFIER = NULL,
    @ProcessStatus     NVARCHAR(MAX)    = NULL,
    @OnlyIfUnprocessed BIT              = 0
AS
BEGIN
    SET NOCOUNT ON;

    DECLARE @attempts INT;

    UPDATE dbo.ethPrimeWebhookLog
    SET @attempts = processAttempts = processAttempts + 1,
        processStatus = LEFT(@ProcessStatus, 500),
        jobId         = COALESCE(@JobId, jobId)
    WHERE id = @ID
      AND (@OnlyIfUnprocessed = 0 OR processedUTC IS NULL);

    SELECT @attempts AS processAttempts WHERE @attempts IS NOT NULL;
END;
GO

-- spPrimeGetJobIDbyReference (§4.1): the job a numeric reference maps to; no
-- rows when the reference is unknown.
CREATE OR ALTER PROCEDURE dbo.spPrimeGetJobIDbyReference
    @NumericReference BIGINT
AS
BEGIN
    SET NOCOUNT ON;

    SELECT jobId
    FROM dbo.ethPrimeJobReference
    WHERE numericReference = @NumericReference;
END;
GO

-- spPrimeSaveJobReference (§4.1): maps a numeric reference to a job when it is
-- not mapped yet, and returns whether it inserted. The mapping is immutable: a
-- reference already mapped to another job raises error 51001, which the Go
-- adapter reports as store.ErrReferenceConflict.
CREATE OR ALTER PROCEDURE dbo.spPrimeSaveJobReference
    @NumericReference BIGINT,
    @JobId            UNIQUEIDENTIFIER
AS
BEGIN
    SET NOCOUNT ON;
    -- THROW honours XACT_ABORT: with it OFF a conflict fails this call and
    -- leaves the caller's transaction usable, as the SQLite store does.
    SET XACT_ABORT OFF;

    DECLARE @inserted BIT = 0, @existing UNIQUEIDENTIFIER, @message NVARCHAR(2048);

    -- A NULL would slip past the <> below and report "not inserted".
    IF @NumericReference IS NULL OR @JobId IS NULL
        THROW 51002, N'spPrimeSaveJobReference: @NumericReference and @JobId are required.', 1;

    -- UPDLOCK + HOLDLOCK hold the key range from the check to the insert, so
    -- two sessions saving the same new reference cannot both insert.
    INSERT INTO dbo.ethPrimeJobReference (numericReference, jobId, firstSeenUTC)
    SELECT @NumericReference, @JobId, SYSUTCDATETIME()
    WHERE NOT EXISTS (SELECT 1 FROM dbo.ethPrimeJobReference WITH (UPDLOCK, HOLDLOCK)
                      WHERE numericReference = @NumericReference);

    IF @@ROWCOUNT = 1
        SET @inserted = 1;
    ELSE
    BEGIN
        SELECT @existing = jobId
        FROM dbo.ethPrimeJobReference
        WHERE numericReference = @NumericReference;

        IF @existing <> @JobId
        BEGIN
            SET @message = CONCAT(N'numeric reference ', @NumericReference,
                N' is mapped to job ', CONVERT(NVARCHAR(36), @existing),
                N', not ', CONVERT(NVARCHAR(36), @JobId));
            THROW 51001, @message, 1;
        END;
    END;

    SELECT @inserted AS inserted;
END;
GO

-- The procedures below are primeflow's own (sql/README.md).

-- spPrimeflowGetWebhookLog: one row by id; no rows when it does not exist.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowGetWebhookLog
    @ID BIGINT
AS
BEGIN
    SET NOCOUNT ON;

    SELECT
        id, receivedUTC, eventAction, jobId, payload, headers, remoteIP, isAuthenticated,
        processedUTC, processAttempts, processStatus, publishedUTC, replayCount
    FROM dbo.ethPrimeWebhookLog
    WHERE id = @ID;
END;
GO

-- spPrimeflowGetWebhookLogUnpublished: the rows the relay still has to publish
-- (never published, or reset for replay) with an id above @AfterID received
-- before @ReceivedBefore, oldest first. The relay pages on with the last id it
-- saw, so a row it cannot publish does not come back on every page.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowGetWebhookLogUnpublished
    @AfterID        BIGINT = 0,
    @ReceivedBefore DATETIME2(3),
    @Top            INT = 100
AS
BEGIN
    SET NOCOUNT ON;

    SELECT TOP (@Top)
        id, receivedUTC, eventAction, jobId, payload, headers, remoteIP, isAuthenticated,
        processedUTC, processAttempts, processStatus, publishedUTC, replayCount
    FROM dbo.ethPrimeWebhookLog
    WHERE publishedUTC IS NULL
      AND id > @AfterID
      AND receivedUTC < @ReceivedBefore
    ORDER BY id;
END;
GO

-- spPrimeflowSetWebhookLogPublished: records that the rows in @IDs were
-- published at @PublishedUTC (now when NULL).
CREATE OR ALTER PROCEDURE dbo.spPrimeflowSetWebhookLogPublished
    @IDs          dbo.primeflowIdList READONLY,
    @PublishedUTC DATETIME2(3) = NULL
AS
BEGIN
    SET NOCOUNT ON;

    UPDATE l
    SET publishedUTC = COALESCE(@PublishedUTC, SYSUTCDATETIME())
    FROM dbo.ethPrimeWebhookLog AS l
    INNER JOIN @IDs AS i ON i.id = l.id;
END;
GO

-- fnPrimeflowWebhookLogFilter: the rows a store.LogFilter selects, for
-- primectl's list, count and replay. NULL arguments, an empty @IDs and
-- @Unpublished = 0 do not filter; @Unpublished = 1 keeps the rows the relay
-- has still to publish. @State: 0 any, 1 queued (unprocessed, under @MaxAttempts),
-- 2 capped (unprocessed, at or over @MaxAttempts), 3 processed. Callers add
-- OPTION (RECOMPILE) so the plan keeps only the filters actually given.
CREATE OR ALTER FUNCTION dbo.fnPrimeflowWebhookLogFilter (
    @IDs         dbo.primeflowIdList READONLY,
    @EventAction NVARCHAR(100),
    @JobId       UNIQUEIDENTIFIER,
    @FromUTC     DATETIME2(3),
    @ToUTC       DATETIME2(3),
    @State       TINYINT,
    @MaxAttempts INT,
    @Unpublished BIT
)
RETURNS TABLE
AS
RETURN
    SELECT
        l.id, l.receivedUTC, l.eventAction, l.jobId, l.payload, l.headers, l.remoteIP, l.isAuthenticated,
        l.processedUTC, l.processAttempts, l.processStatus, l.publishedUTC, l.replayCount
    FROM dbo.ethPrimeWebhookLog AS l
    WHERE (NOT EXISTS (SELECT 1 FROM @IDs) OR l.id IN (SELECT i.id FROM @IDs AS i))
      AND (@EventAction IS NULL OR l.eventAction = @EventAction)
      AND (@JobId IS NULL OR l.jobId = @JobId)
      AND (@FromUTC IS NULL OR l.receivedUTC >= @FromUTC)
      AND (@ToUTC IS NULL OR l.receivedUTC < @ToUTC)
      AND (@Unpublished = 0 OR l.publishedUTC IS NULL)
      AND (   @State = 0
           OR (@State = 1 AND l.processedUTC IS NULL AND l.processAttempts < @MaxAttempts)
           OR (@State = 2 AND l.processedUTC IS NULL AND l.processAttempts >= @MaxAttempts)
           OR (@State = 3 AND l.processedUTC IS NOT NULL));
GO

-- spPrimeflowListWebhookLog: the selected rows, oldest first (@Newest = 1:
-- the newest, newest first), at most @Top.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowListWebhookLog
    @IDs         dbo.primeflowIdList READONLY,
    @EventAction NVARCHAR(100)    = NULL,
    @JobId       UNIQUEIDENTIFIER = NULL,
    @FromUTC     DATETIME2(3)     = NULL,
    @ToUTC       DATETIME2(3)     = NULL,
    @State       TINYINT          = 0,
    @MaxAttempts INT              = 5,
    @Unpublished BIT              = 0,
    @Top         INT              = 100,
    @Newest      BIT              = 0
AS
BEGIN
    SET NOCOUNT ON;

    SELECT TOP (@Top)
        f.id, f.receivedUTC, f.eventAction, f.jobId, f.payload, f.headers, f.remoteIP, f.isAuthenticated,
        f.processedUTC, f.processAttempts, f.processStatus, f.publishedUTC, f.replayCount
    FROM dbo.fnPrimeflowWebhookLogFilter(@IDs, @EventAction, @JobId, @FromUTC, @ToUTC, @State, @MaxAttempts, @Unpublished) AS f
    ORDER BY CASE WHEN @Newest = 1 THEN -f.id ELSE f.id END
    OPTION (RECOMPILE);
END;
GO

-- spPrimeflowCountWebhookLog: how many rows the filter selects.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowCountWebhookLog
    @IDs         dbo.primeflowIdList READONLY,
    @EventAction NVARCHAR(100)    = NULL,
    @JobId       UNIQUEIDENTIFIER = NULL,
    @FromUTC     DATETIME2(3)     = NULL,
    @ToUTC       DATETIME2(3)     = NULL,
    @State       TINYINT          = 0,
    @MaxAttempts INT              = 5,
    @Unpublished BIT              = 0
AS
BEGIN
    SET NOCOUNT ON;

    SELECT COUNT_BIG(*) AS matching
    FROM dbo.fnPrimeflowWebhookLogFilter(@IDs, @EventAction, @JobId, @FromUTC, @ToUTC, @State, @MaxAttempts, @Unpublished) AS f
    OPTION (RECOMPILE);
END;
GO

-- spPrimeflowResetWebhookLog: queues the selected rows again for replay (§9:
-- reset processAttempts to replay a row from its stored payload): not
-- processed, no attempts, not published, replayCount + 1 so the replay gets a
-- new Nats-Msg-Id. Returns how many rows it reset.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowResetWebhookLog
    @IDs         dbo.primeflowIdList READONLY,
    @EventAction NVARCHAR(100)    = NULL,
    @JobId       UNIQUEIDENTIFIER = NULL,
    @FromUTC     DATETIME2(3)     = NULL,
    @ToUTC       DATETIME2(3)     = NULL,
    @State       TINYINT          = 0,
    @MaxAttempts INT              = 5,
    @Unpublished BIT              = 0
AS
BEGIN
    SET NOCOUNT ON;

    UPDATE l
    SET processedUTC    = NULL,
        processAttempts = 0,
        processStatus   = N'Queued for replay',
        publishedUTC    = NULL,
        replayCount     = l.replayCount + 1
    FROM dbo.ethPrimeWebhookLog AS l
    WHERE l.id IN (SELECT f.id
                   FROM dbo.fnPrimeflowWebhookLogFilter(@IDs, @EventAction, @JobId, @FromUTC, @ToUTC, @State, @MaxAttempts, @Unpublished) AS f)
    OPTION (RECOMPILE);

    SELECT @@ROWCOUNT AS rowsReset;
END;
GO
