-- What a job status change queues besides the mirror (spec §5.1 steps 5, 6).
-- The spec names the calls but not the tables; sql/README.md writes down the
-- reading. Every batch is safe to run again.

-- ethClientWIPTrigger (§5.1 step 5): one row a (job, source), so a replayed
-- event (source ethPrimeWebhookLog:{id}) never queues a second trigger.
IF OBJECT_ID(N'dbo.ethClientWIPTrigger', N'U') IS NULL
CREATE TABLE dbo.ethClientWIPTrigger (
    id           BIGINT IDENTITY(1,1) NOT NULL CONSTRAINT PK_ethClientWIPTrigger PRIMARY KEY,
    jobId        UNIQUEIDENTIFIER NOT NULL,
    triggerType  NVARCHAR(50)     NOT NULL,
    source       NVARCHAR(200)    NOT NULL,
    queuedUTC    DATETIME2(3)     NOT NULL CONSTRAINT DF_ethClientWIPTrigger_queuedUTC DEFAULT SYSUTCDATETIME(),
    processedUTC DATETIME2(3)     NULL
);
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes
               WHERE object_id = OBJECT_ID(N'dbo.ethClientWIPTrigger') AND name = N'UX_ethClientWIPTrigger_jobId_source')
    CREATE UNIQUE NONCLUSTERED INDEX UX_ethClientWIPTrigger_jobId_source
        ON dbo.ethClientWIPTrigger (jobId, source);
GO

-- Client WIP's evaluator finds the triggers still to handle.
IF NOT EXISTS (SELECT 1 FROM sys.indexes
               WHERE object_id = OBJECT_ID(N'dbo.ethClientWIPTrigger') AND name = N'IX_ethClientWIPTrigger_unprocessed')
    CREATE NONCLUSTERED INDEX IX_ethClientWIPTrigger_unprocessed
        ON dbo.ethClientWIPTrigger (id)
        WHERE processedUTC IS NULL;
GO

-- ethTriageInviteQueue (§5.1 step 6): at most one pending (unsent) invite a job.
IF OBJECT_ID(N'dbo.ethTriageInviteQueue', N'U') IS NULL
CREATE TABLE dbo.ethTriageInviteQueue (
    id        BIGINT IDENTITY(1,1) NOT NULL CONSTRAINT PK_ethTriageInviteQueue PRIMARY KEY,
    jobId     UNIQUEIDENTIFIER NOT NULL,
    statusId  UNIQUEIDENTIFIER NULL,
    queuedUTC DATETIME2(3)     NOT NULL CONSTRAINT DF_ethTriageInviteQueue_queuedUTC DEFAULT SYSUTCDATETIME(),
    sentUTC   DATETIME2(3)     NULL
);
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes
               WHERE object_id = OBJECT_ID(N'dbo.ethTriageInviteQueue') AND name = N'UX_ethTriageInviteQueue_pending')
    CREATE UNIQUE NONCLUSTERED INDEX UX_ethTriageInviteQueue_pending
        ON dbo.ethTriageInviteQueue (jobId)
        WHERE sentUTC IS NULL;
GO

-- spPrimeflowQueueClientWIPStatusChange (QueueClientWIPStatusChangeAsync,
-- §5.1 step 5): queues a StatusChange trigger unless the job already has one
-- from @Source; returns queued.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowQueueClientWIPStatusChange
    @JobId  UNIQUEIDENTIFIER,
    @Source NVARCHAR(200)
AS
BEGIN
    SET NOCOUNT ON;

    INSERT INTO dbo.ethClientWIPTrigger (jobId, triggerType, source, queuedUTC)
    SELECT @JobId, N'StatusChange', @Source, SYSUTCDATETIME()
    WHERE NOT EXISTS (SELECT 1 FROM dbo.ethClientWIPTrigger WITH (UPDLOCK, HOLDLOCK)
                      WHERE jobId = @JobId AND source = @Source);

    SELECT CAST(@@ROWCOUNT AS BIT) AS queued;
END;
GO

-- spPrimeflowListClientWIPTriggers: a job's triggers, oldest first.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowListClientWIPTriggers
    @JobId UNIQUEIDENTIFIER
AS
BEGIN
    SET NOCOUNT ON;

    SELECT id, jobId, triggerType, source, queuedUTC, processedUTC
    FROM dbo.ethClientWIPTrigger
    WHERE jobId = @JobId
    ORDER BY id;
END;
GO

-- spPrimeflowQueueTriageInvite (ITaskData.QueueTriageInvite(jobId,
-- InitialContactMadeStatusId), §5.1 step 6): reads the job's status from the
-- mirror and queues an invite when it is @InitialContactMadeStatusId and the
-- job has no invite pending; returns queued.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowQueueTriageInvite
    @JobId                      UNIQUEIDENTIFIER,
    @InitialContactMadeStatusId UNIQUEIDENTIFIER
AS
BEGIN
    SET NOCOUNT ON;

    INSERT INTO dbo.ethTriageInviteQueue (jobId, statusId, queuedUTC)
    SELECT j.jobId, j.statusId, SYSUTCDATETIME()
    FROM dbo.primeJobs AS j
    WHERE j.jobId = @JobId
      AND j.statusId = @InitialContactMadeStatusId
      AND NOT EXISTS (SELECT 1 FROM dbo.ethTriageInviteQueue AS q WITH (UPDLOCK, HOLDLOCK)
                      WHERE q.jobId = @JobId AND q.sentUTC IS NULL);

    SELECT CAST(@@ROWCOUNT AS BIT) AS queued;
END;
GO

-- spPrimeflowListTriageInvites: a job's invites, oldest first.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowListTriageInvites
    @JobId UNIQUEIDENTIFIER
AS
BEGIN
    SET NOCOUNT ON;

    SELECT id, jobId, statusId, queuedUTC, sentUTC
    FROM dbo.ethTriageInviteQueue
    WHERE jobId = @JobId
    ORDER BY id;
END;
GO
