-- One new-job path (spec §7.1: "Merge the post-job-sync pipeline into one
-- proc, spEthProcessNewPrimeJob @JobId, shared by the webhook, Prime Sync
-- Jobs by Date and any future caller"), the jobs-by-date backstop's
-- watermark and sightings, and the coverage report that compares the paths
-- ("Compare coverage for a week"). sql/README.md, "One new-job path".
-- Every batch is safe to run again.

-- Which path claimed a job's first sight: webhook, email, backstop,
-- appointment-sweep, manual; NULL for a caller that did not say.
IF COL_LENGTH(N'dbo.primeflowJobFirstSeen', N'via') IS NULL
    ALTER TABLE dbo.primeflowJobFirstSeen ADD via NVARCHAR(50) NULL;
GO

-- The coverage report takes the jobs Prime created in its window.
IF NOT EXISTS (SELECT 1 FROM sys.indexes
               WHERE object_id = OBJECT_ID(N'dbo.primeJobs') AND name = N'IX_primeJobs_createdAt')
    CREATE NONCLUSTERED INDEX IX_primeJobs_createdAt
        ON dbo.primeJobs (createdAt);
GO

-- The jobs-by-date backstop's first sight of each job it listed.
IF OBJECT_ID(N'dbo.primeflowBackstopSeen', N'U') IS NULL
CREATE TABLE dbo.primeflowBackstopSeen (
    jobId        UNIQUEIDENTIFIER NOT NULL CONSTRAINT PK_primeflowBackstopSeen PRIMARY KEY,
    firstSeenUTC DATETIME2(3)     NOT NULL
);
GO

-- How far each scheduled sweep has got: the next one lists from here,
-- less its overlap window.
IF OBJECT_ID(N'dbo.primeflowSweepWatermark', N'U') IS NULL
CREATE TABLE dbo.primeflowSweepWatermark (
    name         NVARCHAR(100) NOT NULL CONSTRAINT PK_primeflowSweepWatermark PRIMARY KEY,
    watermarkUTC DATETIME2(3)  NOT NULL,
    updatedUTC   DATETIME2(3)  NOT NULL
);
GO

-- spPrimeflowClaimJobFirstSeen: records a job's first sight and the path
-- that saw it, and returns whether this call made the record (claimed).
-- Only the first claim wins. Replaces 010's, which had no @Via.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowClaimJobFirstSeen
    @JobId UNIQUEIDENTIFIER,
    @LogId BIGINT       = NULL,
    @Via   NVARCHAR(50) = NULL
AS
BEGIN
    SET NOCOUNT ON;

    INSERT INTO dbo.primeflowJobFirstSeen (jobId, logId, firstSeenUTC, via)
    SELECT @JobId, @LogId, SYSUTCDATETIME(), @Via
    WHERE NOT EXISTS (SELECT 1 FROM dbo.primeflowJobFirstSeen WITH (UPDLOCK, HOLDLOCK)
                      WHERE jobId = @JobId);

    SELECT CAST(@@ROWCOUNT AS BIT) AS claimed;
END;
GO

-- spPrimeflowGetJobFirstSeen: a job's first-sight row; no rows when never claimed.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowGetJobFirstSeen
    @JobId UNIQUEIDENTIFIER
AS
BEGIN
    SET NOCOUNT ON;

    SELECT jobId, logId, firstSeenUTC, pipelineCompletedUTC, pipelineAttempts, pipelineStatus, via
    FROM dbo.primeflowJobFirstSeen
    WHERE jobId = @JobId;
END;
GO

-- spPrimeflowListJobFirstSeen: first-sight rows, oldest first, at most @Top.
-- @State: 0 any, 1 pending (pipeline not finished), 2 failed (pending with a
-- failed attempt), 3 completed.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowListJobFirstSeen
    @State TINYINT = 0,
    @Top   INT     = 100
AS
BEGIN
    SET NOCOUNT ON;

    SELECT TOP (@Top) jobId, logId, firstSeenUTC, pipelineCompletedUTC, pipelineAttempts, pipelineStatus, via
    FROM dbo.primeflowJobFirstSeen
    WHERE @State = 0
       OR (@State = 1 AND pipelineCompletedUTC IS NULL)
       OR (@State = 2 AND pipelineCompletedUTC IS NULL AND pipelineAttempts > 0)
       OR (@State = 3 AND pipelineCompletedUTC IS NOT NULL)
    ORDER BY firstSeenUTC, jobId
    OPTION (RECOMPILE);
END;
GO

-- spEthProcessNewPrimeJob (§6 RunNewJobPipelineAsync, §7.1): the new-job
-- pipeline's SQL for one job, once, whoever calls. In one transaction: the
-- first sight is claimed if nobody has (@Via, @LogId say by whom); a job
-- whose pipeline has completed is left alone (ran 0); otherwise step 1
-- (spEthSyncQueueMissingObjectsByJobID), step 2's hand-off to make-safe
-- detection with queue-checks on (an outbox message, which primeflow
-- publishes to makesafe.detect), and the completed stamp. primeflow passes
-- the hand-off; a caller that does not (the spec's one-parameter call) gets
-- the same one the new-job pipeline writes, and an outbox sweeper of
-- primeflow's publishes it. Returns ran, queued and the hand-off's outbox row.
CREATE OR ALTER PROCEDURE dbo.spEthProcessNewPrimeJob
    @JobId          UNIQUEIDENTIFIER,
    @Via            NVARCHAR(50)  = NULL,
    @LogId          BIGINT        = NULL,
    @HandOffSubject NVARCHAR(MAX) = NULL,
    @HandOffMsgId   NVARCHAR(MAX) = NULL,
    @HandOffData    NVARCHAR(MAX) = NULL
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;

    DECLARE @ran BIT = 0, @queued INT = 0, @outboxId BIGINT = NULL,
            @now DATETIME2(3) = SYSUTCDATETIME(),
            @job NVARCHAR(36) = LOWER(CONVERT(NVARCHAR(36), @JobId));
    DECLARE @counts TABLE (queued INT);

    IF @HandOffSubject IS NULL
        SELECT @HandOffSubject = N'makesafe.detect',
               @HandOffMsgId   = N'makesafe.detect:firstseen:' + @job,
               @HandOffData    = N'{"jobId":"' + @job + N'","queueChecks":true,"source":"firstseen"}';

    BEGIN TRANSACTION;

    IF NOT EXISTS (SELECT 1 FROM dbo.primeflowJobFirstSeen WITH (UPDLOCK, HOLDLOCK) WHERE jobId = @JobId)
        INSERT INTO dbo.primeflowJobFirstSeen (jobId, logId, firstSeenUTC, via)
        VALUES (@JobId, @LogId, @now, @Via);

    IF EXISTS (SELECT 1 FROM dbo.primeflowJobFirstSeen WHERE jobId = @JobId AND pipelineCompletedUTC IS NULL)
    BEGIN
        SET @ran = 1;

        INSERT INTO @counts (queued)
        EXEC dbo.spEthSyncQueueMissingObjectsByJobID @JobId = @JobId;
        SELECT @queued = COALESCE(MAX(queued), 0) FROM @counts;

        INSERT INTO dbo.primeflowOutbox (subject, msgId, headers, data, createdUTC)
        VALUES (@HandOffSubject, @HandOffMsgId, NULL, COALESCE(@HandOffData, N''), @now);
        SET @outboxId = CAST(SCOPE_IDENTITY() AS BIGINT);

        UPDATE dbo.primeflowJobFirstSeen
        SET pipelineCompletedUTC = @now,
            pipelineStatus = LEFT(CONCAT(N'Completed: ', @queued, N' missing objects queued, make-safe detection requested'), 500)
        WHERE jobId = @JobId;
    END;

    COMMIT TRANSACTION;

    SELECT @ran AS ran, @queued AS queued, o.id AS outboxId, o.subject, o.msgId, o.data, o.createdUTC
    FROM (SELECT 1 AS one) AS x
    LEFT JOIN dbo.primeflowOutbox AS o ON o.id = @outboxId;
END;
GO

-- spPrimeflowRecordBackstopSeen: the jobs a backstop sweep listed
-- (@JobIds, a JSON array of GUIDs), each recorded the first time only;
-- returns how many were new.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowRecordBackstopSeen
    @JobIds  NVARCHAR(MAX),
    @SeenUTC DATETIME2(3)
AS
BEGIN
    SET NOCOUNT ON;

    INSERT INTO dbo.primeflowBackstopSeen (jobId, firstSeenUTC)
    SELECT DISTINCT j.jobId, @SeenUTC
    FROM OPENJSON(@JobIds) WITH (jobId UNIQUEIDENTIFIER '$') AS j
    WHERE j.jobId IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM dbo.primeflowBackstopSeen AS b WITH (UPDLOCK, HOLDLOCK) WHERE b.jobId = j.jobId);

    SELECT @@ROWCOUNT AS recorded;
END;
GO

-- spPrimeflowGetSweepWatermark: a sweep's watermark; no rows before its first sweep.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowGetSweepWatermark
    @Name NVARCHAR(100)
AS
BEGIN
    SET NOCOUNT ON;

    SELECT watermarkUTC FROM dbo.primeflowSweepWatermark WHERE name = @Name;
END;
GO

-- spPrimeflowSetSweepWatermark: moves a sweep's watermark (inserting its row).
CREATE OR ALTER PROCEDURE dbo.spPrimeflowSetSweepWatermark
    @Name         NVARCHAR(100),
    @WatermarkUTC DATETIME2(3)
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;

    BEGIN TRANSACTION;

    UPDATE dbo.primeflowSweepWatermark WITH (UPDLOCK, HOLDLOCK)
    SET watermarkUTC = @WatermarkUTC, updatedUTC = SYSUTCDATETIME()
    WHERE name = @Name;

    IF @@ROWCOUNT = 0
        INSERT INTO dbo.primeflowSweepWatermark (name, watermarkUTC, updatedUTC)
        VALUES (@Name, @WatermarkUTC, SYSUTCDATETIME());

    COMMIT TRANSACTION;
END;
GO

-- spPrimeflowJobCoverage (§7.1 "Compare coverage for a week"): every job
-- Prime created at or after @SinceUTC (a job without createdAt counts from
-- its first sight), with when each path first saw it — the webhook (its
-- first log row of the job, and that row's eventAction), the email (its
-- first receipt) and the backstop — and which path claimed its first sight.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowJobCoverage
    @SinceUTC DATETIME2(3)
AS
BEGIN
    SET NOCOUNT ON;

    SELECT j.jobId, j.jobNumber, j.createdAt,
           f.firstSeenUTC, f.via, fl.eventAction AS firstAction,
           w.receivedUTC AS webhookUTC, w.eventAction AS webhookAction,
           e.emailUTC,
           b.firstSeenUTC AS backstopUTC
    FROM dbo.primeJobs AS j
    LEFT JOIN dbo.primeflowJobFirstSeen AS f ON f.jobId = j.jobId
    LEFT JOIN dbo.ethPrimeWebhookLog AS fl ON fl.id = f.logId
    OUTER APPLY (SELECT TOP (1) l.receivedUTC, l.eventAction
                 FROM dbo.ethPrimeWebhookLog AS l
                 WHERE l.jobId = j.jobId
                 ORDER BY l.receivedUTC, l.id) AS w
    OUTER APPLY (SELECT MIN(COALESCE(r.receivedDateTime, r.registeredUTC)) AS emailUTC
                 FROM dbo.PrimeEmailJobRegistered AS r
                 WHERE r.primeJobId = j.jobId) AS e
    LEFT JOIN dbo.primeflowBackstopSeen AS b ON b.jobId = j.jobId
    WHERE j.createdAt >= @SinceUTC
       OR (j.createdAt IS NULL AND f.firstSeenUTC >= @SinceUTC)
    ORDER BY COALESCE(j.createdAt, f.firstSeenUTC), j.jobId;
END;
GO

-- spPrimeflowCountEmailReceipts: the coverage report's emails — the
-- receipts of the emails received at or after @SinceUTC (receivedDateTime,
-- else when the receipt was written), by outcome: Processed, Failed (for a
-- person), Rejected (refused unread as not Prime's), Pending.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowCountEmailReceipts
    @SinceUTC DATETIME2(3)
AS
BEGIN
    SET NOCOUNT ON;

    SELECT outcome, COUNT_BIG(*) AS receipts
    FROM dbo.PrimeEmailJobRegistered
    WHERE COALESCE(receivedDateTime, registeredUTC) >= @SinceUTC
    GROUP BY outcome;
END;
GO

-- spPrimeflowWebhookActionCoverage: §7.1's coverage check — events, first
-- and last seen by eventAction — over the rows received at or after
-- @SinceUTC (NULL: the whole log).
CREATE OR ALTER PROCEDURE dbo.spPrimeflowWebhookActionCoverage
    @SinceUTC DATETIME2(3) = NULL
AS
BEGIN
    SET NOCOUNT ON;

    SELECT eventAction, COUNT(*) AS events, MIN(receivedUTC) AS firstSeen, MAX(receivedUTC) AS lastSeen
    FROM dbo.ethPrimeWebhookLog WITH (NOLOCK)
    WHERE @SinceUTC IS NULL OR receivedUTC >= @SinceUTC
    GROUP BY eventAction
    ORDER BY lastSeen DESC
    OPTION (RECOMPILE);
END;
GO
