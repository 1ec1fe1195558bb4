-- ethSyncQueue (spec §6, §7): the per-job child syncs still to run. One row
-- an (object, job) means "sync this job's <object> from Prime"; the object is
-- the mirror table (primeJobStatusHistory, primeContacts, primeAllocations,
-- primeContactRelationships). The spec does not give the columns or the
-- procedures' bodies; sql/README.md writes down the reading, and what to
-- check before these run against a database where the spec's procedures
-- are live. Every batch is safe to run again.
IF OBJECT_ID(N'dbo.ethSyncQueue', N'U') IS NULL
CREATE TABLE dbo.ethSyncQueue (
    id         BIGINT IDENTITY(1,1) NOT NULL CONSTRAINT PK_ethSyncQueue PRIMARY KEY,
    objectName NVARCHAR(100)    NOT NULL,
    jobId      UNIQUEIDENTIFIER NOT NULL,
    queuedUTC  DATETIME2(3)     NOT NULL CONSTRAINT DF_ethSyncQueue_queuedUTC DEFAULT SYSUTCDATETIME(),
    claimedUTC DATETIME2(3)     NULL
);
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes
               WHERE object_id = OBJECT_ID(N'dbo.ethSyncQueue') AND name = N'UX_ethSyncQueue_objectName_jobId')
    CREATE UNIQUE NONCLUSTERED INDEX UX_ethSyncQueue_objectName_jobId
        ON dbo.ethSyncQueue (objectName, jobId);
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes
               WHERE object_id = OBJECT_ID(N'dbo.ethSyncQueue') AND name = N'IX_ethSyncQueue_jobId')
    CREATE NONCLUSTERED INDEX IX_ethSyncQueue_jobId
        ON dbo.ethSyncQueue (jobId);
GO

-- spEthSyncQueueMissingObjectsByJobID (QueueMissingObjectsByJob, §6 step 1):
-- queues the job's status histories, contacts, allocations and contact
-- relationships, skipping those already queued; returns how many it queued.
CREATE OR ALTER PROCEDURE dbo.spEthSyncQueueMissingObjectsByJobID
    @JobId UNIQUEIDENTIFIER
AS
BEGIN
    SET NOCOUNT ON;

    INSERT INTO dbo.ethSyncQueue (objectName, jobId, queuedUTC)
    SELECT o.objectName, @JobId, SYSUTCDATETIME()
    FROM (VALUES (N'primeJobStatusHistory'), (N'primeContacts'), (N'primeAllocations'),
                 (N'primeContactRelationships')) AS o (objectName)
    WHERE NOT EXISTS (SELECT 1 FROM dbo.ethSyncQueue AS q WITH (UPDLOCK, HOLDLOCK)
                      WHERE q.objectName = o.objectName AND q.jobId = @JobId);

    SELECT @@ROWCOUNT AS queued;
END;
GO

-- spEthSyncQueueUpsert (§6 re-check step 1): queues one object of a job, or
-- queues it again when it is there (queued now, held by no drainer).
CREATE OR ALTER PROCEDURE dbo.spEthSyncQueueUpsert
    @ObjectName NVARCHAR(100),
    @JobId      UNIQUEIDENTIFIER
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;

    BEGIN TRANSACTION;

    UPDATE dbo.ethSyncQueue WITH (UPDLOCK, HOLDLOCK)
    SET queuedUTC = SYSUTCDATETIME(), claimedUTC = NULL
    WHERE objectName = @ObjectName AND jobId = @JobId;

    IF @@ROWCOUNT = 0
        INSERT INTO dbo.ethSyncQueue (objectName, jobId, queuedUTC)
        VALUES (@ObjectName, @JobId, SYSUTCDATETIME());

    COMMIT TRANSACTION;
END;
GO

-- spEthSyncQueueDelete (§7, §9): removes one object of a job from the queue,
-- as a drain does once it has synced it or Prime answered with nothing;
-- returns rowsDeleted.
CREATE OR ALTER PROCEDURE dbo.spEthSyncQueueDelete
    @ObjectName NVARCHAR(100),
    @JobId      UNIQUEIDENTIFIER
AS
BEGIN
    SET NOCOUNT ON;

    DELETE FROM dbo.ethSyncQueue
    WHERE objectName = @ObjectName AND jobId = @JobId;

    SELECT @@ROWCOUNT AS rowsDeleted;
END;
GO

-- spPrimeflowListSyncQueue: queued items, oldest queued first, at most @Top;
-- NULL arguments do not filter.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowListSyncQueue
    @ObjectName NVARCHAR(100)    = NULL,
    @JobId      UNIQUEIDENTIFIER = NULL,
    @Top        INT              = 100
AS
BEGIN
    SET NOCOUNT ON;

    SELECT TOP (@Top) id, objectName, jobId, queuedUTC, claimedUTC
    FROM dbo.ethSyncQueue
    WHERE (@ObjectName IS NULL OR objectName = @ObjectName)
      AND (@JobId IS NULL OR jobId = @JobId)
    ORDER BY queuedUTC, id
    OPTION (RECOMPILE);
END;
GO

-- spPrimeflowClaimSyncQueue: takes the selected items no drainer holds (never
-- claimed, or claimed before @StaleBefore), oldest queued first, stamps them
-- claimed and returns them. READPAST skips rows another claim has locked, so
-- two claims at once never take the same item.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowClaimSyncQueue
    @ObjectName  NVARCHAR(100)    = NULL,
    @JobId       UNIQUEIDENTIFIER = NULL,
    @StaleBefore DATETIME2(3),
    @Top         INT              = 100
AS
BEGIN
    SET NOCOUNT ON;

    WITH picked AS (
        SELECT TOP (@Top) id, objectName, jobId, queuedUTC, claimedUTC
        FROM dbo.ethSyncQueue WITH (UPDLOCK, READPAST, ROWLOCK)
        WHERE (@ObjectName IS NULL OR objectName = @ObjectName)
          AND (@JobId IS NULL OR jobId = @JobId)
          AND (claimedUTC IS NULL OR claimedUTC < @StaleBefore)
        ORDER BY queuedUTC, id
    )
    UPDATE picked
    SET claimedUTC = SYSUTCDATETIME()
    OUTPUT inserted.id, inserted.objectName, inserted.jobId, inserted.queuedUTC, inserted.claimedUTC
    OPTION (RECOMPILE);
END;
GO
