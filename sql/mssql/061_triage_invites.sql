-- The triage invite sender (spec §3.1, TriageInviteService.ProcessQueueAsync):
-- ethTriageInviteQueue (011) becomes a send queue like smsQueue (030), with
-- the same claim, outcomes and states, so an invite is claimed before it is
-- posted, retried with backoff, left Failed for a person after its last
-- attempt, and sent once; one invite an arrival in the status
-- (spPrimeflowQueueTriageInvite, redefined here). sql/README.md ("Triage
-- invites") gives the reading.
-- Every batch is safe to run again.

-- The states of 030's smsQueue. A live table's rows already sent count as
-- Sent, so the sender posts only those still waiting. The UPDATE is dynamic
-- SQL because this batch compiles before the column exists.
IF COL_LENGTH(N'dbo.ethTriageInviteQueue', N'state') IS NULL
BEGIN
    ALTER TABLE dbo.ethTriageInviteQueue ADD state NVARCHAR(20) NOT NULL
        CONSTRAINT DF_ethTriageInviteQueue_state DEFAULT N'Queued';
    EXEC sys.sp_executesql N'UPDATE dbo.ethTriageInviteQueue SET state = N''Sent'' WHERE sentUTC IS NOT NULL;';
END;
GO

IF COL_LENGTH(N'dbo.ethTriageInviteQueue', N'attempts') IS NULL
    ALTER TABLE dbo.ethTriageInviteQueue ADD attempts INT NOT NULL
        CONSTRAINT DF_ethTriageInviteQueue_attempts DEFAULT 0;
GO

-- Defaults, so that QueueTriageInvite's insert (011, the integration point:
-- sql/README.md) needs no change: a new invite is due at once.
IF COL_LENGTH(N'dbo.ethTriageInviteQueue', N'nextAttemptUTC') IS NULL
    ALTER TABLE dbo.ethTriageInviteQueue ADD nextAttemptUTC DATETIME2(3) NOT NULL
        CONSTRAINT DF_ethTriageInviteQueue_nextAttemptUTC DEFAULT SYSUTCDATETIME();
GO

IF COL_LENGTH(N'dbo.ethTriageInviteQueue', N'claimedUntilUTC') IS NULL
    ALTER TABLE dbo.ethTriageInviteQueue ADD claimedUntilUTC DATETIME2(3) NULL;
GO

IF COL_LENGTH(N'dbo.ethTriageInviteQueue', N'lastError') IS NULL
    ALTER TABLE dbo.ethTriageInviteQueue ADD lastError NVARCHAR(500) NULL;
GO

IF COL_LENGTH(N'dbo.ethTriageInviteQueue', N'failedUTC') IS NULL
    ALTER TABLE dbo.ethTriageInviteQueue ADD failedUTC DATETIME2(3) NULL;
GO

IF COL_LENGTH(N'dbo.ethTriageInviteQueue', N'updatedUTC') IS NULL
    ALTER TABLE dbo.ethTriageInviteQueue ADD updatedUTC DATETIME2(3) NOT NULL
        CONSTRAINT DF_ethTriageInviteQueue_updatedUTC DEFAULT SYSUTCDATETIME();
GO

-- A triage invite answers one status change (§5.1 step 6, §10.4 "make every
-- downstream insert de-duplicate"): the job's arrival in the status as the
-- mirror saw it (jobVersion: the mirrored job's version when the invite was
-- queued), until the mirror sees the job in another status (statusLeftUTC).
IF COL_LENGTH(N'dbo.ethTriageInviteQueue', N'jobVersion') IS NULL
    ALTER TABLE dbo.ethTriageInviteQueue ADD jobVersion BIGINT NULL;
GO

-- The invites already queued: one a later invite of its job followed, or
-- whose job the mirror no longer holds in its status, answered a change that
-- is over; the newest of a job still in its status stays open.
IF COL_LENGTH(N'dbo.ethTriageInviteQueue', N'statusLeftUTC') IS NULL
BEGIN
    ALTER TABLE dbo.ethTriageInviteQueue ADD statusLeftUTC DATETIME2(3) NULL;
    EXEC sys.sp_executesql N'UPDATE q SET statusLeftUTC = SYSUTCDATETIME()
FROM dbo.ethTriageInviteQueue AS q
WHERE EXISTS (SELECT 1 FROM dbo.ethTriageInviteQueue AS later WHERE later.jobId = q.jobId AND later.id > q.id)
   OR NOT EXISTS (SELECT 1 FROM dbo.primeJobs AS j WHERE j.jobId = q.jobId AND j.statusId = q.statusId);';
END;
GO

-- The body posted, fixed by the first claim that can build it, so every
-- attempt under one Idempotency-Key posts the same bytes.
IF COL_LENGTH(N'dbo.ethTriageInviteQueue', N'payload') IS NULL
    ALTER TABLE dbo.ethTriageInviteQueue ADD payload NVARCHAR(MAX) NULL;
GO

-- The arrival an invite answers, however the mirror learns of it: the job's
-- status-history entry (Prime's record of the arrival), where the mirror
-- held it when the invite was queued, and Prime's time of the job as the
-- invite saw it (its updatedAt, or the entry's createdAt when later): an
-- entry more than a minute after it is a later change. An open invite
-- queued before takes its job's updatedAt, no earlier than its arrival.
IF COL_LENGTH(N'dbo.ethTriageInviteQueue', N'statusHistoryId') IS NULL
    ALTER TABLE dbo.ethTriageInviteQueue ADD statusHistoryId UNIQUEIDENTIFIER NULL;
GO

IF COL_LENGTH(N'dbo.ethTriageInviteQueue', N'jobUpdatedAt') IS NULL
BEGIN
    ALTER TABLE dbo.ethTriageInviteQueue ADD jobUpdatedAt DATETIME2(3) NULL;
    EXEC sys.sp_executesql N'UPDATE q SET jobUpdatedAt = j.updatedAt
FROM dbo.ethTriageInviteQueue AS q
JOIN dbo.primeJobs AS j ON j.jobId = q.jobId
WHERE q.statusLeftUTC IS NULL;';
END;
GO

-- One pending invite a job's open arrival: 011's UX_ethTriageInviteQueue_pending
-- (one unsent invite a job) narrowed to the invites whose arrival is open,
-- so a Failed invite no longer blocks the job's later return to the status.
-- Every row it holds is one the spec's own insert looks for (§5.1 step 6,
-- "skips any job that already has an invite pending", 011's procedure,
-- which the live processor runs through the cutover), so that insert skips
-- where it would collide instead of failing the event; the one open invite
-- a job is spPrimeflowOpenTriageInvite's check, under its locks. Replaces
-- the UX_ethTriageInviteQueue_open (one open invite a job) of the first
-- 061, which the spec's insert broke for a job whose invite was sent.
IF EXISTS (SELECT 1 FROM sys.indexes
           WHERE object_id = OBJECT_ID(N'dbo.ethTriageInviteQueue') AND name = N'UX_ethTriageInviteQueue_open')
    DROP INDEX UX_ethTriageInviteQueue_open ON dbo.ethTriageInviteQueue;
GO

IF EXISTS (SELECT 1 FROM sys.indexes
           WHERE object_id = OBJECT_ID(N'dbo.ethTriageInviteQueue') AND name = N'UX_ethTriageInviteQueue_pending'
             AND (filter_definition IS NULL OR filter_definition NOT LIKE N'%statusLeftUTC%'))
    DROP INDEX UX_ethTriageInviteQueue_pending ON dbo.ethTriageInviteQueue;
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes
               WHERE object_id = OBJECT_ID(N'dbo.ethTriageInviteQueue') AND name = N'UX_ethTriageInviteQueue_pending')
    CREATE UNIQUE NONCLUSTERED INDEX UX_ethTriageInviteQueue_pending
        ON dbo.ethTriageInviteQueue (jobId)
        WHERE sentUTC IS NULL AND statusLeftUTC IS NULL;
GO

-- A job's invites: the checks above read, and lock, the job's range of it,
-- and every write of the job closes its invites through it.
IF NOT EXISTS (SELECT 1 FROM sys.indexes
               WHERE object_id = OBJECT_ID(N'dbo.ethTriageInviteQueue') AND name = N'IX_ethTriageInviteQueue_jobId')
    CREATE NONCLUSTERED INDEX IX_ethTriageInviteQueue_jobId
        ON dbo.ethTriageInviteQueue (jobId);
GO

-- The claim reads only the invites still to send.
IF NOT EXISTS (SELECT 1 FROM sys.indexes
               WHERE object_id = OBJECT_ID(N'dbo.ethTriageInviteQueue') AND name = N'IX_ethTriageInviteQueue_unsent')
    CREATE NONCLUSTERED INDEX IX_ethTriageInviteQueue_unsent
        ON dbo.ethTriageInviteQueue (id)
        WHERE state IN (N'Queued', N'Sending');
GO

-- spPrimeflowClaimTriageInvites: spSmsQueueClaim for invites. Claims up to
-- @Top invites due at @NowUTC, oldest first — Queued ones whose
-- nextAttemptUTC has come and Sending ones whose claim has lapsed — as
-- Sending until @LeaseUntilUTC with attempts + 1, and returns them; a lapsed
-- claim that was already the @MaxAttempts-th fails instead. An invite
-- another writer stamped sent (sentUTC) is never claimed: it is recorded
-- Sent first when it is Queued, Failed, or Sending under a lapsed claim.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowClaimTriageInvites
    @NowUTC        DATETIME2(3),
    @LeaseUntilUTC DATETIME2(3),
    @MaxAttempts   INT,
    @Top           INT = 20
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;

    DECLARE @claimed TABLE (id BIGINT NOT NULL PRIMARY KEY);

    BEGIN TRANSACTION;
    UPDATE dbo.ethTriageInviteQueue
    SET state = N'Sent', claimedUntilUTC = NULL, updatedUTC = @NowUTC
    WHERE sentUTC IS NOT NULL
      AND (state IN (N'Queued', N'Failed') OR (state = N'Sending' AND claimedUntilUTC <= @NowUTC));

    UPDATE dbo.ethTriageInviteQueue
    SET state = N'Failed', failedUTC = @NowUTC, updatedUTC = @NowUTC, claimedUntilUTC = NULL,
        lastError = N'the claim of the last attempt lapsed: the sender stopped before it recorded the outcome'
    WHERE state = N'Sending' AND claimedUntilUTC <= @NowUTC AND attempts >= @MaxAttempts AND sentUTC IS NULL;

    WITH due AS (
        SELECT TOP (@Top) id, state, attempts, claimedUntilUTC, updatedUTC
        FROM dbo.ethTriageInviteQueue WITH (UPDLOCK, READPAST, ROWLOCK)
        WHERE sentUTC IS NULL
          AND ((state = N'Queued' AND nextAttemptUTC <= @NowUTC)
            OR (state = N'Sending' AND claimedUntilUTC <= @NowUTC))
        ORDER BY id
    )
    UPDATE due
    SET state = N'Sending', attempts = attempts + 1, claimedUntilUTC = @LeaseUntilUTC, updatedUTC = @NowUTC
    OUTPUT inserted.id INTO @claimed;
    COMMIT TRANSACTION;

    SELECT q.id, q.jobId, q.statusId, q.queuedUTC, q.sentUTC, q.state, q.attempts, q.nextAttemptUTC,
           q.claimedUntilUTC, q.lastError, q.failedUTC, q.updatedUTC, q.jobVersion, q.statusLeftUTC, q.payload,
           q.statusHistoryId, q.jobUpdatedAt
    FROM dbo.ethTriageInviteQueue AS q
    JOIN @claimed AS c ON c.id = q.id
    ORDER BY q.id;
END;
GO

-- The outcome of a post is recorded against the claim that made it (@ID and
-- @Attempt), as 030's are; each returns rowsUpdated (0: the claim is gone or
-- the invite does not exist).

-- spPrimeflowSetTriageInviteSent: the endpoint accepted the invite; with
-- @State = 'Logged', a sender that only logs (no TRIAGE_INVITE_SEND_URL)
-- handed it on, and it was never sent.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowSetTriageInviteSent
    @ID      BIGINT,
    @Attempt INT,
    @SentUTC DATETIME2(3),
    @State   NVARCHAR(20) = N'Sent'
AS
BEGIN
    SET NOCOUNT ON;

    UPDATE dbo.ethTriageInviteQueue
    SET state = CASE WHEN @State = N'Logged' THEN N'Logged' ELSE N'Sent' END, sentUTC = @SentUTC, updatedUTC = @SentUTC, claimedUntilUTC = NULL
    WHERE id = @ID AND state = N'Sending' AND attempts = @Attempt;

    SELECT @@ROWCOUNT AS rowsUpdated;
END;
GO

-- spPrimeflowSetTriageInviteFailed: a send failed. With @RetryUTC the invite
-- is Queued again from then; without, it is Failed for good, for a person
-- (and, while the job stays in its status, the job's open invite:
-- QueueTriageInvite queues no second one for the same change).
CREATE OR ALTER PROCEDURE dbo.spPrimeflowSetTriageInviteFailed
    @ID       BIGINT,
    @Attempt  INT,
    @Error    NVARCHAR(MAX),
    @RetryUTC DATETIME2(3) = NULL,
    @NowUTC   DATETIME2(3)
AS
BEGIN
    SET NOCOUNT ON;

    UPDATE dbo.ethTriageInviteQueue
    SET state           = CASE WHEN @RetryUTC IS NULL THEN N'Failed' ELSE N'Queued' END,
        nextAttemptUTC  = COALESCE(@RetryUTC, nextAttemptUTC),
        failedUTC       = CASE WHEN @RetryUTC IS NULL THEN @NowUTC ELSE failedUTC END,
        lastError       = LEFT(@Error, 500),
        claimedUntilUTC = NULL,
        updatedUTC      = @NowUTC
    WHERE id = @ID AND state = N'Sending' AND attempts = @Attempt;

    SELECT @@ROWCOUNT AS rowsUpdated;
END;
GO

-- spPrimeflowReleaseTriageInvite: a claim that posted nothing (the sender
-- was stopping) is given back: Queued again, as due as it was, the attempt
-- not counted. With @RetryUTC it is an invite that cannot be sent yet (its
-- primary contact not mirrored): due from then, @Error its last error.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowReleaseTriageInvite
    @ID       BIGINT,
    @Attempt  INT,
    @NowUTC   DATETIME2(3),
    @RetryUTC DATETIME2(3)  = NULL,
    @Error    NVARCHAR(MAX) = NULL
AS
BEGIN
    SET NOCOUNT ON;

    UPDATE dbo.ethTriageInviteQueue
    SET state = N'Queued', attempts = attempts - 1, claimedUntilUTC = NULL, updatedUTC = @NowUTC,
        nextAttemptUTC = COALESCE(@RetryUTC, nextAttemptUTC),
        lastError      = COALESCE(LEFT(@Error, 500), lastError)
    WHERE id = @ID AND state = N'Sending' AND attempts = @Attempt;

    SELECT @@ROWCOUNT AS rowsUpdated;
END;
GO

-- spPrimeflowSetTriageInvitePayload: fixes the body to post for an invite,
-- while @Attempt's claim holds it and none is fixed yet; returns
-- rowsUpdated.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowSetTriageInvitePayload
    @ID      BIGINT,
    @Attempt INT,
    @Payload NVARCHAR(MAX)
AS
BEGIN
    SET NOCOUNT ON;

    UPDATE dbo.ethTriageInviteQueue
    SET payload = @Payload
    WHERE id = @ID AND state = N'Sending' AND attempts = @Attempt AND payload IS NULL;

    SELECT @@ROWCOUNT AS rowsUpdated;
END;
GO

-- The triage invite rule (sql/README.md, "Triage invites"): an invite
-- answers one arrival of the job in a status. The three procedures below
-- run in their caller's transaction; only procedures call them.

-- spPrimeflowCloseTriageInvites: closes (statusLeftUTC = @NowUTC) the job's
-- open invites whose arrival is over as the mirror shows it: the job
-- mirrored in another status, or an entry of its status history more than
-- a minute (store.ArrivalSlack) after the job as the invite saw it. Every
-- write of the job (spPrimeflowUpsertJob, 010) and of its status history
-- (spPrimeflowReplaceJobStatusHistory, 060) runs it, as
-- spPrimeflowQueueTriageInvite does before it looks.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowCloseTriageInvites
    @JobId  UNIQUEIDENTIFIER,
    @NowUTC DATETIME2(3)
AS
BEGIN
    SET NOCOUNT ON;

    UPDATE q
    SET statusLeftUTC = @NowUTC
    FROM dbo.ethTriageInviteQueue AS q WITH (UPDLOCK, HOLDLOCK)
    WHERE q.jobId = @JobId AND q.statusLeftUTC IS NULL
      AND (EXISTS (SELECT 1 FROM dbo.primeJobs AS j
                   WHERE j.jobId = q.jobId AND j.statusId IS NOT NULL
                     AND (q.statusId IS NULL OR j.statusId <> q.statusId))
        OR EXISTS (SELECT 1 FROM dbo.primeJobStatusHistory AS h
                   WHERE h.jobId = q.jobId AND h.createdAt > DATEADD(SECOND, 60, q.jobUpdatedAt)));
END;
GO

-- spPrimeflowOpenTriageInvite: queues an invite, due at once, when the job
-- is mirrored in @StatusId and has no open invite; @Queued says whether it
-- did. The invite answers the latest entry of the job's status history when
-- that entry is an arrival in @StatusId no invite answers yet (none is keyed
-- on it, and it is more than the minute after the job as each earlier
-- invite saw it); with @OnHistory = 1 it is queued only then. UPDLOCK and
-- HOLDLOCK hold the job's range of IX_ethTriageInviteQueue_jobId from the
-- check to the insert.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowOpenTriageInvite
    @JobId     UNIQUEIDENTIFIER,
    @StatusId  UNIQUEIDENTIFIER,
    @NowUTC    DATETIME2(3),
    @OnHistory BIT = 0,
    @Queued    BIT = 0 OUTPUT
AS
BEGIN
    SET NOCOUNT ON;

    DECLARE @entry UNIQUEIDENTIFIER, @entryAt DATETIME2(3);
    SELECT @entry = l.statusHistoryId, @entryAt = l.createdAt
    FROM (SELECT TOP (1) h.statusHistoryId, h.statusId, h.createdAt
          FROM dbo.primeJobStatusHistory AS h
          WHERE h.jobId = @JobId
          ORDER BY h.createdAt DESC, h.statusHistoryId DESC) AS l
    WHERE l.statusId = @StatusId
      AND NOT EXISTS (SELECT 1 FROM dbo.ethTriageInviteQueue AS p WITH (UPDLOCK, HOLDLOCK)
                      WHERE p.jobId = @JobId
                        AND (p.statusHistoryId = l.statusHistoryId OR l.createdAt <= DATEADD(SECOND, 60, p.jobUpdatedAt)));

    INSERT INTO dbo.ethTriageInviteQueue (jobId, statusId, jobVersion, jobUpdatedAt, statusHistoryId, queuedUTC)
    SELECT j.jobId, j.statusId, j.version,
           CASE WHEN j.updatedAt IS NULL OR @entryAt > j.updatedAt THEN @entryAt ELSE j.updatedAt END,
           @entry, @NowUTC
    FROM dbo.primeJobs AS j
    WHERE j.jobId = @JobId
      AND j.statusId = @StatusId
      AND (@OnHistory = 0 OR @entry IS NOT NULL)
      AND NOT EXISTS (SELECT 1 FROM dbo.ethTriageInviteQueue AS q WITH (UPDLOCK, HOLDLOCK)
                      WHERE q.jobId = @JobId AND q.statusLeftUTC IS NULL);
    SET @Queued = CAST(@@ROWCOUNT AS BIT);
END;
GO

-- spPrimeflowReviewTriageInvites: follows a write of the job's status
-- history (060): the invites it shows over are closed, and a job an event
-- invited before, mirrored in the status of its last invite, is invited for
-- an arrival in it that the history alone shows (both events of a leave
-- and a return handled after the return found the job in the status).
CREATE OR ALTER PROCEDURE dbo.spPrimeflowReviewTriageInvites
    @JobId  UNIQUEIDENTIFIER,
    @NowUTC DATETIME2(3)
AS
BEGIN
    SET NOCOUNT ON;

    DECLARE @status UNIQUEIDENTIFIER = (SELECT TOP (1) statusId FROM dbo.ethTriageInviteQueue
                                        WHERE jobId = @JobId ORDER BY id DESC);
    EXEC dbo.spPrimeflowCloseTriageInvites @JobId = @JobId, @NowUTC = @NowUTC;
    IF @status IS NOT NULL
        EXEC dbo.spPrimeflowOpenTriageInvite @JobId = @JobId, @StatusId = @status, @NowUTC = @NowUTC, @OnHistory = 1;
END;
GO

-- spPrimeflowQueueTriageInvite (011's, keyed by the arrival): closes the
-- job's invites whose arrival is over, then queues one when the job is
-- mirrored in @InitialContactMadeStatusId and has no open invite; returns
-- queued. The call shape stays the spec's (sql/README.md, "Integration
-- points").
CREATE OR ALTER PROCEDURE dbo.spPrimeflowQueueTriageInvite
    @JobId                      UNIQUEIDENTIFIER,
    @InitialContactMadeStatusId UNIQUEIDENTIFIER
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;

    DECLARE @now DATETIME2(3) = SYSUTCDATETIME(), @queued BIT = 0;

    BEGIN TRANSACTION;
    EXEC dbo.spPrimeflowCloseTriageInvites @JobId = @JobId, @NowUTC = @now;
    EXEC dbo.spPrimeflowOpenTriageInvite @JobId = @JobId, @StatusId = @InitialContactMadeStatusId, @NowUTC = @now,
        @Queued = @queued OUTPUT;
    COMMIT TRANSACTION;

    SELECT @queued AS queued;
END;
GO

-- spPrimeflowGetTriageInvite: one invite; no rows when it does not exist.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowGetTriageInvite
    @ID BIGINT
AS
BEGIN
    SET NOCOUNT ON;

    SELECT id, jobId, statusId, queuedUTC, sentUTC, state, attempts, nextAttemptUTC,
           claimedUntilUTC, lastError, failedUTC, updatedUTC, jobVersion, statusLeftUTC, payload,
           statusHistoryId, jobUpdatedAt
    FROM dbo.ethTriageInviteQueue
    WHERE id = @ID;
END;
GO

-- spPrimeflowListTriageInvites (011, now with the send state): a job's
-- invites, oldest first.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowListTriageInvites
    @JobId UNIQUEIDENTIFIER
AS
BEGIN
    SET NOCOUNT ON;

    SELECT id, jobId, statusId, queuedUTC, sentUTC, state, attempts, nextAttemptUTC,
           claimedUntilUTC, lastError, failedUTC, updatedUTC, jobVersion, statusLeftUTC, payload,
           statusHistoryId, jobUpdatedAt
    FROM dbo.ethTriageInviteQueue
    WHERE jobId = @JobId
    ORDER BY id;
END;
GO

-- spPrimeflowListTriageInviteQueue: up to @Top invites, oldest first;
-- @State 0 any, 1 pending (not sent: Queued, Sending, Failed; not one a
-- person dismissed, 082), 2 Failed.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowListTriageInviteQueue
    @State INT = 0,
    @Top   INT = 100
AS
BEGIN
    SET NOCOUNT ON;

    SELECT TOP (@Top) id, jobId, statusId, queuedUTC, sentUTC, state, attempts, nextAttemptUTC,
           claimedUntilUTC, lastError, failedUTC, updatedUTC, jobVersion, statusLeftUTC, payload,
           statusHistoryId, jobUpdatedAt
    FROM dbo.ethTriageInviteQueue
    WHERE @State = 0
       OR (@State = 1 AND sentUTC IS NULL AND state <> N'Dismissed')
       OR (@State = 2 AND state = N'Failed')
    ORDER BY id
    OPTION (RECOMPILE);
END;
GO

-- spPrimeflowNextTriageInviteDue: when the next Queued invite is due or the
-- next claim lapses; dueUTC is NULL when nothing waits.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowNextTriageInviteDue
AS
BEGIN
    SET NOCOUNT ON;

    SELECT MIN(t) AS dueUTC
    FROM (SELECT MIN(nextAttemptUTC) AS t FROM dbo.ethTriageInviteQueue WHERE state = N'Queued' AND sentUTC IS NULL
          UNION ALL
          SELECT MIN(claimedUntilUTC) FROM dbo.ethTriageInviteQueue WHERE state = N'Sending') AS w;
END;
GO

-- spPrimeflowOldestTriageInviteWaiting: when the oldest invite not sent yet
-- (Queued or Sending, no sentUTC) was queued; queuedUTC is NULL when none
-- is. It reads IX_ethTriageInviteQueue_unsent's rows alone.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowOldestTriageInviteWaiting
AS
BEGIN
    SET NOCOUNT ON;

    SELECT MIN(queuedUTC) AS queuedUTC FROM dbo.ethTriageInviteQueue
    WHERE state IN (N'Queued', N'Sending') AND sentUTC IS NULL;
END;
GO

-- spPrimeflowCountTriageInvites: how many invites are in each state.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowCountTriageInvites
AS
BEGIN
    SET NOCOUNT ON;

    SELECT state, COUNT(*) AS n FROM dbo.ethTriageInviteQueue GROUP BY state;
END;
GO
