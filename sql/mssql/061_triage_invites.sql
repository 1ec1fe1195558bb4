-- The triage invite sender (spec §3.1, TriageInviteService.ProcessQueueAsync):
-- ethTriageInviteQueue (011) becomes a send queue like smsQueue (030), with
-- the same claim, outcomes and states, so an invite is claimed before it is
-- posted, retried with backoff, left Failed for a person after its last
-- attempt, and sent once; one invite a status change (spPrimeflowQueueTriageInvite,
-- redefined here). sql/README.md ("Triage invites") gives the reading.
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

-- One open invite a job, sent or not, in place of 011's one unsent invite a
-- job: a Failed invite no longer blocks the job's later return to the
-- status, and a sent one still answers its change.
IF EXISTS (SELECT 1 FROM sys.indexes
           WHERE object_id = OBJECT_ID(N'dbo.ethTriageInviteQueue') AND name = N'UX_ethTriageInviteQueue_pending')
    DROP INDEX UX_ethTriageInviteQueue_pending ON dbo.ethTriageInviteQueue;
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes
               WHERE object_id = OBJECT_ID(N'dbo.ethTriageInviteQueue') AND name = N'UX_ethTriageInviteQueue_open')
    CREATE UNIQUE NONCLUSTERED INDEX UX_ethTriageInviteQueue_open
        ON dbo.ethTriageInviteQueue (jobId)
        WHERE statusLeftUTC IS NULL;
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
           q.claimedUntilUTC, q.lastError, q.failedUTC, q.updatedUTC, q.jobVersion, q.statusLeftUTC, q.payload
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

-- spPrimeflowQueueTriageInvite (011's, keyed by the status change): reads
-- the job from the mirror; an open invite whose status the job is no longer
-- in is closed (statusLeftUTC), and an invite is queued when the job is in
-- @InitialContactMadeStatusId and has no open invite; returns queued. The
-- call shape stays the spec's (sql/README.md, "Integration points").
CREATE OR ALTER PROCEDURE dbo.spPrimeflowQueueTriageInvite
    @JobId                      UNIQUEIDENTIFIER,
    @InitialContactMadeStatusId UNIQUEIDENTIFIER
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;

    DECLARE @now DATETIME2(3) = SYSUTCDATETIME();

    BEGIN TRANSACTION;
    UPDATE q
    SET statusLeftUTC = @now
    FROM dbo.ethTriageInviteQueue AS q WITH (UPDLOCK, HOLDLOCK)
    JOIN dbo.primeJobs AS j ON j.jobId = q.jobId
    WHERE q.jobId = @JobId AND q.statusLeftUTC IS NULL
      AND (j.statusId IS NULL OR q.statusId IS NULL OR j.statusId <> q.statusId);

    INSERT INTO dbo.ethTriageInviteQueue (jobId, statusId, jobVersion, queuedUTC)
    SELECT j.jobId, j.statusId, j.version, @now
    FROM dbo.primeJobs AS j
    WHERE j.jobId = @JobId
      AND j.statusId = @InitialContactMadeStatusId
      AND NOT EXISTS (SELECT 1 FROM dbo.ethTriageInviteQueue AS q WITH (UPDLOCK, HOLDLOCK)
                      WHERE q.jobId = @JobId AND q.statusLeftUTC IS NULL);
    DECLARE @queued BIT = CAST(@@ROWCOUNT AS BIT);
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
           claimedUntilUTC, lastError, failedUTC, updatedUTC, jobVersion, statusLeftUTC, payload
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
           claimedUntilUTC, lastError, failedUTC, updatedUTC, jobVersion, statusLeftUTC, payload
    FROM dbo.ethTriageInviteQueue
    WHERE jobId = @JobId
    ORDER BY id;
END;
GO

-- spPrimeflowListTriageInviteQueue: up to @Top invites, oldest first;
-- @State 0 any, 1 pending (not sent: Queued, Sending, Failed), 2 Failed.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowListTriageInviteQueue
    @State INT = 0,
    @Top   INT = 100
AS
BEGIN
    SET NOCOUNT ON;

    SELECT TOP (@Top) id, jobId, statusId, queuedUTC, sentUTC, state, attempts, nextAttemptUTC,
           claimedUntilUTC, lastError, failedUTC, updatedUTC, jobVersion, statusLeftUTC, payload
    FROM dbo.ethTriageInviteQueue
    WHERE @State = 0
       OR (@State = 1 AND sentUTC IS NULL)
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
