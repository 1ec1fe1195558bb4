-- The ethSyncQueue drains (spec §6, §7, §9, §11): what primeflow's drains
-- need besides 012's claim and list. A drain claims an item, fetches its
-- object from Prime and, in one transaction, writes the mirror and removes
-- the item while it is as the claim found it. sql/README.md ("The sync-queue
-- drains") gives the reading. Every batch is safe to run again.

-- spPrimeflowReleaseSyncQueue: gives back a claim a drain holds (a drain
-- stopping, or keeping an item for a later pass), so the item may be claimed
-- again at once; only while it is claimed at @ClaimedUTC. Returns rowsUpdated.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowReleaseSyncQueue
    @ID         BIGINT,
    @ClaimedUTC DATETIME2(3)
AS
BEGIN
    SET NOCOUNT ON;

    UPDATE dbo.ethSyncQueue
    SET claimedUTC = NULL
    WHERE id = @ID AND claimedUTC = @ClaimedUTC;

    SELECT @@ROWCOUNT AS rowsUpdated;
END;
GO

-- spPrimeflowDeleteClaimedSyncQueue: spEthSyncQueueDelete for a drain that
-- holds a claim: removes the item only while it is claimed at @ClaimedUTC
-- and queued at @QueuedUTC. An item queued again since the claim
-- (spEthSyncQueueUpsert: the make-safe ladder, say) or claimed by another
-- drain stays for the pass that follows. Returns rowsDeleted.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowDeleteClaimedSyncQueue
    @ID         BIGINT,
    @QueuedUTC  DATETIME2(3),
    @ClaimedUTC DATETIME2(3)
AS
BEGIN
    SET NOCOUNT ON;

    DELETE FROM dbo.ethSyncQueue
    WHERE id = @ID AND queuedUTC = @QueuedUTC AND claimedUTC = @ClaimedUTC;

    SELECT @@ROWCOUNT AS rowsDeleted;
END;
GO

-- spPrimeflowSyncQueueStats: for each object the queue holds, its items, how
-- many are claimed, and when the oldest was queued (the metrics, primectl).
CREATE OR ALTER PROCEDURE dbo.spPrimeflowSyncQueueStats
AS
BEGIN
    SET NOCOUNT ON;

    SELECT objectName, COUNT(*) AS items,
           SUM(CASE WHEN claimedUTC IS NULL THEN 0 ELSE 1 END) AS claimed,
           MIN(queuedUTC) AS oldestQueuedUTC
    FROM dbo.ethSyncQueue
    GROUP BY objectName
    ORDER BY objectName;
END;
GO

-- spPrimeflowReplaceJobStatusHistory: makes the job's status changes exactly
-- those in @Histories, a JSON array of {statusHistoryId, statusId,
-- createdAt, attributes}: Prime lists a job's history as it is now, so an
-- entry it no longer lists is deleted (§10.4). The job's triage invites are
-- reviewed by it (spPrimeflowReviewTriageInvites). One transaction.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowReplaceJobStatusHistory
    @JobId     UNIQUEIDENTIFIER,
    @Histories NVARCHAR(MAX)
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;

    DECLARE @now DATETIME2(3) = SYSUTCDATETIME();
    DECLARE @entries TABLE (
        statusHistoryId UNIQUEIDENTIFIER NOT NULL PRIMARY KEY,
        statusId        UNIQUEIDENTIFIER NULL,
        createdAt       DATETIME2(3)     NULL,
        attributes      NVARCHAR(MAX)    NULL
    );

    INSERT INTO @entries (statusHistoryId, statusId, createdAt, attributes)
    SELECT statusHistoryId, statusId, createdAt, attributes
    FROM OPENJSON(@Histories) WITH (
        statusHistoryId UNIQUEIDENTIFIER '$.statusHistoryId',
        statusId        UNIQUEIDENTIFIER '$.statusId',
        createdAt       DATETIME2(3)     '$.createdAt',
        attributes      NVARCHAR(MAX)    '$.attributes'
    );

    BEGIN TRANSACTION;

    -- The job's row first, as every write of the job takes it before its
    -- history is read (spPrimeflowCloseTriageInvites): one order of locks,
    -- so the job's events and this replace wait for each other, never
    -- deadlock.
    DECLARE @mirrored BIT = 0;
    SELECT @mirrored = 1 FROM dbo.primeJobs WITH (UPDLOCK, HOLDLOCK) WHERE jobId = @JobId;

    DELETE h
    FROM dbo.primeJobStatusHistory AS h WITH (UPDLOCK, SERIALIZABLE)
    WHERE h.jobId = @JobId
      AND NOT EXISTS (SELECT 1 FROM @entries AS n WHERE n.statusHistoryId = h.statusHistoryId);

    UPDATE h
    SET jobId = @JobId, statusId = n.statusId, createdAt = n.createdAt, attributes = n.attributes, syncedUTC = @now
    FROM dbo.primeJobStatusHistory AS h WITH (UPDLOCK, SERIALIZABLE)
    INNER JOIN @entries AS n ON n.statusHistoryId = h.statusHistoryId;

    INSERT INTO dbo.primeJobStatusHistory (statusHistoryId, jobId, statusId, createdAt, attributes, syncedUTC)
    SELECT n.statusHistoryId, @JobId, n.statusId, n.createdAt, n.attributes, @now
    FROM @entries AS n
    WHERE NOT EXISTS (SELECT 1 FROM dbo.primeJobStatusHistory AS h WITH (UPDLOCK, SERIALIZABLE)
                      WHERE h.statusHistoryId = n.statusHistoryId);

    -- The job's triage invites, by its history (061_triage_invites.sql,
    -- resolved when this runs).
    IF @mirrored = 1
        EXEC dbo.spPrimeflowReviewTriageInvites @JobId = @JobId, @NowUTC = @now;

    COMMIT TRANSACTION;
END;
GO

-- spPrimeflowListJobStatusHistory: a job's status changes, oldest first.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowListJobStatusHistory
    @JobId UNIQUEIDENTIFIER
AS
BEGIN
    SET NOCOUNT ON;

    SELECT statusHistoryId, jobId, statusId, createdAt, attributes, syncedUTC
    FROM dbo.primeJobStatusHistory
    WHERE jobId = @JobId
    ORDER BY createdAt, statusHistoryId;
END;
GO
