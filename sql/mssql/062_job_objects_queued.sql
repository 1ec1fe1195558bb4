-- The version of each job whose missing objects (spec §6 step 1: status
-- histories, contacts, allocations, contact relationships) primeflow last
-- queued in ethSyncQueue: at the job's first sight, and by the jobs-by-date
-- backstop once the job has changed since, so that the backstop keeps every
-- mirrored job's children current, as n8n's "Prime Sync Jobs by Date" did
-- (§7), and queues nothing for a job at that version (sql/README.md). A
-- primeflow addition. Every batch is safe to run again.
IF OBJECT_ID(N'dbo.primeflowJobObjectsQueued', N'U') IS NULL
CREATE TABLE dbo.primeflowJobObjectsQueued (
    jobId     UNIQUEIDENTIFIER NOT NULL CONSTRAINT PK_primeflowJobObjectsQueued PRIMARY KEY,
    version   BIGINT           NOT NULL,
    updatedAt DATETIME2(3)     NOT NULL,
    queuedUTC DATETIME2(3)     NOT NULL
);
GO

-- spPrimeflowGetJobObjectsQueued: the version of the job whose objects were
-- last queued; no rows when none was recorded.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowGetJobObjectsQueued
    @JobId UNIQUEIDENTIFIER
AS
BEGIN
    SET NOCOUNT ON;

    SELECT version, updatedAt FROM dbo.primeflowJobObjectsQueued WHERE jobId = @JobId;
END;
GO

-- spPrimeflowSetJobObjectsQueued: records the version of the job whose
-- objects were queued now (inserting its row).
CREATE OR ALTER PROCEDURE dbo.spPrimeflowSetJobObjectsQueued
    @JobId     UNIQUEIDENTIFIER,
    @Version   BIGINT,
    @UpdatedAt DATETIME2(3)
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;

    BEGIN TRANSACTION;

    UPDATE dbo.primeflowJobObjectsQueued WITH (UPDLOCK, HOLDLOCK)
    SET version = @Version, updatedAt = @UpdatedAt, queuedUTC = SYSUTCDATETIME()
    WHERE jobId = @JobId;

    IF @@ROWCOUNT = 0
        INSERT INTO dbo.primeflowJobObjectsQueued (jobId, version, updatedAt, queuedUTC)
        VALUES (@JobId, @Version, @UpdatedAt, SYSUTCDATETIME());

    COMMIT TRANSACTION;
END;
GO
