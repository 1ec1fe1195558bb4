-- The SMS queue (spec §6 "SMS Send Queued Messages", §8.2 "Webhook Send Queued
-- SMS"): text messages waiting to be sent, and how their sending went.
-- sql/README.md describes the states and the claim. Every batch is safe to
-- run again.
IF OBJECT_ID(N'dbo.smsQueue', N'U') IS NULL
CREATE TABLE dbo.smsQueue (
    ID              BIGINT IDENTITY(1,1) NOT NULL CONSTRAINT PK_smsQueue PRIMARY KEY,
    Recipient       NVARCHAR(50)   NOT NULL,
    Body            NVARCHAR(1000) NOT NULL,
    Source          NVARCHAR(50)   NULL,
    DedupeKey       NVARCHAR(200)  NULL,
    State           NVARCHAR(20)   NOT NULL CONSTRAINT DF_smsQueue_State DEFAULT N'Queued',
    Attempts        INT            NOT NULL CONSTRAINT DF_smsQueue_Attempts DEFAULT 0,
    NextAttemptUTC  DATETIME2(3)   NOT NULL,
    ClaimedUntilUTC DATETIME2(3)   NULL,
    LastError       NVARCHAR(500)  NULL,
    QueuedUTC       DATETIME2(3)   NOT NULL,
    SentUTC         DATETIME2(3)   NULL,
    FailedUTC       DATETIME2(3)   NULL,
    UpdatedUTC      DATETIME2(3)   NOT NULL
);
GO

-- A message with a dedupe key is queued once (a make-safe SMS once a job).
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'UX_smsQueue_DedupeKey' AND object_id = OBJECT_ID(N'dbo.smsQueue'))
CREATE UNIQUE INDEX UX_smsQueue_DedupeKey ON dbo.smsQueue (DedupeKey) WHERE DedupeKey IS NOT NULL;
GO

-- The claim reads only the messages still to send.
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_smsQueue_pending' AND object_id = OBJECT_ID(N'dbo.smsQueue'))
CREATE INDEX IX_smsQueue_pending ON dbo.smsQueue (ID) INCLUDE (State, NextAttemptUTC, ClaimedUntilUTC)
    WHERE State IN (N'Queued', N'Sending');
GO

-- spSmsQueueInsert: queues a message and returns its ID and queued = 1; with
-- a @DedupeKey already queued — in smsQueue, or archived (081's
-- smsArchivedDedupeKey) — it queues nothing and returns that message's ID
-- and queued = 0. UPDLOCK + HOLDLOCK hold the key from the check to the
-- insert, so two sessions queueing the same key cannot both insert, and an
-- archive deleting its message waits for the insert, or the insert for it.
CREATE OR ALTER PROCEDURE dbo.spSmsQueueInsert
    @Recipient NVARCHAR(50),
    @Body      NVARCHAR(1000),
    @Source    NVARCHAR(50)  = NULL,
    @DedupeKey NVARCHAR(200) = NULL,
    @NowUTC    DATETIME2(3)  = NULL
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;

    DECLARE @now DATETIME2(3) = COALESCE(@NowUTC, SYSUTCDATETIME()), @id BIGINT, @queued BIT = 0;

    BEGIN TRANSACTION;
    IF @DedupeKey IS NOT NULL
    BEGIN
        SELECT @id = ID FROM dbo.smsQueue WITH (UPDLOCK, HOLDLOCK) WHERE DedupeKey = @DedupeKey;
        IF @id IS NULL
            SELECT @id = SmsQueueID FROM dbo.smsArchivedDedupeKey WITH (UPDLOCK, HOLDLOCK) WHERE DedupeKey = @DedupeKey;
    END;
    IF @id IS NULL
    BEGIN
        INSERT INTO dbo.smsQueue
            (Recipient, Body, Source, DedupeKey, State, Attempts, NextAttemptUTC, QueuedUTC, UpdatedUTC)
        VALUES (@Recipient, @Body, @Source, @DedupeKey, N'Queued', 0, @now, @now, @now);
        SET @id = CAST(SCOPE_IDENTITY() AS BIGINT);
        SET @queued = 1;
    END;
    COMMIT TRANSACTION;

    SELECT @id AS ID, @queued AS queued;
END;
GO

-- spSmsQueueClaim: claims up to @Top messages due at @NowUTC, oldest first —
-- Queued ones whose NextAttemptUTC has come and Sending ones whose claim has
-- lapsed — as Sending until @LeaseUntilUTC with Attempts + 1, and returns
-- them. A lapsed claim that was already the @MaxAttempts-th fails instead.
-- READPAST skips rows another claim holds, so concurrent claims share the
-- messages out rather than wait for each other.
CREATE OR ALTER PROCEDURE dbo.spSmsQueueClaim
    @NowUTC        DATETIME2(3),
    @LeaseUntilUTC DATETIME2(3),
    @MaxAttempts   INT,
    @Top           INT = 20
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;

    DECLARE @claimed TABLE (ID BIGINT NOT NULL PRIMARY KEY);

    BEGIN TRANSACTION;
    UPDATE dbo.smsQueue
    SET State = N'Failed', FailedUTC = @NowUTC, UpdatedUTC = @NowUTC, ClaimedUntilUTC = NULL,
        LastError = N'the claim of the last attempt lapsed: the sender stopped before it recorded the outcome'
    WHERE State = N'Sending' AND ClaimedUntilUTC <= @NowUTC AND Attempts >= @MaxAttempts;

    WITH due AS (
        SELECT TOP (@Top) ID, State, Attempts, ClaimedUntilUTC, UpdatedUTC
        FROM dbo.smsQueue WITH (UPDLOCK, READPAST, ROWLOCK)
        WHERE (State = N'Queued' AND NextAttemptUTC <= @NowUTC)
           OR (State = N'Sending' AND ClaimedUntilUTC <= @NowUTC)
        ORDER BY ID
    )
    UPDATE due
    SET State = N'Sending', Attempts = Attempts + 1, ClaimedUntilUTC = @LeaseUntilUTC, UpdatedUTC = @NowUTC
    OUTPUT inserted.ID INTO @claimed;
    COMMIT TRANSACTION;

    SELECT q.ID, q.Recipient, q.Body, q.Source, q.DedupeKey, q.State, q.Attempts, q.NextAttemptUTC,
           q.ClaimedUntilUTC, q.LastError, q.QueuedUTC, q.SentUTC, q.FailedUTC, q.UpdatedUTC
    FROM dbo.smsQueue AS q
    JOIN @claimed AS c ON c.ID = q.ID
    ORDER BY q.ID;
END;
GO

-- The outcome of a post is recorded against the claim that made it: @ID
-- and @Attempt, the Attempts that claim gave the row. A row that no longer
-- holds the claim (it lapsed and another drain claimed the row, or it
-- failed on the lapse) is left as it is, so a late sender cannot undo a
-- later claim's work. Each returns rowsUpdated (0: the claim is gone or the
-- row does not exist).

-- spSmsQueueSetSent: the endpoint accepted the message; with @State =
-- 'Logged', a sender that only logs (no SMS endpoint) handed it on, and it
-- was never sent.
CREATE OR ALTER PROCEDURE dbo.spSmsQueueSetSent
    @ID      BIGINT,
    @Attempt INT,
    @SentUTC DATETIME2(3),
    @State   NVARCHAR(20) = N'Sent'
AS
BEGIN
    SET NOCOUNT ON;

    UPDATE dbo.smsQueue
    SET State = CASE WHEN @State = N'Logged' THEN N'Logged' ELSE N'Sent' END,
        SentUTC = @SentUTC, UpdatedUTC = @SentUTC, ClaimedUntilUTC = NULL
    WHERE ID = @ID AND State = N'Sending' AND Attempts = @Attempt;

    SELECT @@ROWCOUNT AS rowsUpdated;
END;
GO

-- spSmsQueueSetFailed: a send failed. With @RetryUTC the message is Queued
-- again from then; without, it is Failed for good.
CREATE OR ALTER PROCEDURE dbo.spSmsQueueSetFailed
    @ID       BIGINT,
    @Attempt  INT,
    @Error    NVARCHAR(MAX),
    @RetryUTC DATETIME2(3) = NULL,
    @NowUTC   DATETIME2(3)
AS
BEGIN
    SET NOCOUNT ON;

    UPDATE dbo.smsQueue
    SET State           = CASE WHEN @RetryUTC IS NULL THEN N'Failed' ELSE N'Queued' END,
        NextAttemptUTC  = COALESCE(@RetryUTC, NextAttemptUTC),
        FailedUTC       = CASE WHEN @RetryUTC IS NULL THEN @NowUTC ELSE FailedUTC END,
        LastError       = LEFT(@Error, 500),
        ClaimedUntilUTC = NULL,
        UpdatedUTC      = @NowUTC
    WHERE ID = @ID AND State = N'Sending' AND Attempts = @Attempt;

    SELECT @@ROWCOUNT AS rowsUpdated;
END;
GO

-- spSmsQueueRelease: a claim that posted nothing (the drainer was stopping)
-- is given back: Queued again, as due as it was, the attempt not counted.
-- With @RetryUTC it is a message the endpoint did not take because it is
-- not there or not taking posts (no connection, 429, 502, 503, 504): a
-- wait, due from then, @Error its last error, the attempt not counted.
CREATE OR ALTER PROCEDURE dbo.spSmsQueueRelease
    @ID       BIGINT,
    @Attempt  INT,
    @NowUTC   DATETIME2(3),
    @RetryUTC DATETIME2(3)  = NULL,
    @Error    NVARCHAR(MAX) = NULL
AS
BEGIN
    SET NOCOUNT ON;

    UPDATE dbo.smsQueue
    SET State = N'Queued', Attempts = Attempts - 1, ClaimedUntilUTC = NULL, UpdatedUTC = @NowUTC,
        NextAttemptUTC = COALESCE(@RetryUTC, NextAttemptUTC),
        LastError      = COALESCE(LEFT(@Error, 500), LastError)
    WHERE ID = @ID AND State = N'Sending' AND Attempts = @Attempt;

    SELECT @@ROWCOUNT AS rowsUpdated;
END;
GO

-- spSmsQueueGet: one message; no rows when it does not exist.
CREATE OR ALTER PROCEDURE dbo.spSmsQueueGet
    @ID BIGINT
AS
BEGIN
    SET NOCOUNT ON;

    SELECT ID, Recipient, Body, Source, DedupeKey, State, Attempts, NextAttemptUTC,
           ClaimedUntilUTC, LastError, QueuedUTC, SentUTC, FailedUTC, UpdatedUTC
    FROM dbo.smsQueue
    WHERE ID = @ID;
END;
GO

-- spSmsQueueNextDue: when the next Queued message is due or the next claim
-- lapses; dueUTC is NULL when nothing waits.
CREATE OR ALTER PROCEDURE dbo.spSmsQueueNextDue
AS
BEGIN
    SET NOCOUNT ON;

    SELECT MIN(t) AS dueUTC
    FROM (SELECT MIN(NextAttemptUTC) AS t FROM dbo.smsQueue WHERE State = N'Queued'
          UNION ALL
          SELECT MIN(ClaimedUntilUTC) FROM dbo.smsQueue WHERE State = N'Sending') AS w;
END;
GO

-- spSmsQueueOldestWaiting: when the oldest message not sent yet (Queued or
-- Sending) was queued; queuedUTC is NULL when none is. It reads
-- IX_smsQueue_pending's rows alone.
CREATE OR ALTER PROCEDURE dbo.spSmsQueueOldestWaiting
AS
BEGIN
    SET NOCOUNT ON;

    SELECT MIN(QueuedUTC) AS queuedUTC FROM dbo.smsQueue WHERE State IN (N'Queued', N'Sending');
END;
GO

-- spSmsQueueCount: how many messages are in each state.
CREATE OR ALTER PROCEDURE dbo.spSmsQueueCount
AS
BEGIN
    SET NOCOUNT ON;

    SELECT State, COUNT(*) AS n FROM dbo.smsQueue GROUP BY State;
END;
GO
