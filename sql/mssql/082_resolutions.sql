-- A person's answers to the rows that wait for one (primectl sms, invites,
-- emails: requeue, dismiss; sql/README.md, "Resolutions"): a Failed SMS or
-- triage invite requeued or dismissed, a Failed new-job email's receipt
-- dismissed, each recorded — who, when, why — in the transaction that
-- changes the row, which stays where it is; and the lists a person reads
-- to find them. The operators' login (EXECUTE on dbo, no table writes)
-- runs them all: the procedures reach the tables through ownership
-- chaining. Every batch is safe to run again.

-- One row an answer: tableName is the row's table, rowId its id; action
-- Requeued or Dismissed; resolvedBy who, as far as primectl knows.
IF OBJECT_ID(N'dbo.primeflowResolution', N'U') IS NULL
CREATE TABLE dbo.primeflowResolution (
    id          BIGINT IDENTITY(1,1) NOT NULL CONSTRAINT PK_primeflowResolution PRIMARY KEY,
    tableName   NVARCHAR(128) NOT NULL,
    rowId       BIGINT        NOT NULL,
    action      NVARCHAR(20)  NOT NULL,
    resolvedBy  NVARCHAR(200) NOT NULL,
    reason      NVARCHAR(500) NULL,
    resolvedUTC DATETIME2(3)  NOT NULL
);
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_primeflowResolution_row' AND object_id = OBJECT_ID(N'dbo.primeflowResolution'))
CREATE INDEX IX_primeflowResolution_row ON dbo.primeflowResolution (tableName, rowId);
GO

-- spPrimeflowResolve: applies @Action to row @ID of @Table, if it waits for
-- a person, and records it, in one transaction; returns one row
-- (resolutionID, state, inFolder): resolutionID the record's id (NULL when
-- nothing was done), state the row's state after (NULL: no such row),
-- inFolder 1 for an email receipt whose message is still in MAIL_FOLDER.
--   smsQueue, ethTriageInviteQueue  a Failed row (an invite not stamped
--       sent): Requeued is queued anew at @NowUTC — Queued, due then, its
--       queue time then (so its wait, and an invite's contact wait, count
--       from the requeue), 0 attempts: the sender's whole MAX_ATTEMPTS,
--       under the same id; Dismissed is Dismissed, never sent, waiting for
--       nobody. LastError and FailedUTC stay, saying what happened.
--   PrimeEmailJobRegistered  a Failed receipt whose message was moved out
--       of the folder: Dismissed only (the mail intake tries a message again
--       when a person moves it back into the folder).
CREATE OR ALTER PROCEDURE dbo.spPrimeflowResolve
    @Table  NVARCHAR(128),
    @ID     BIGINT,
    @Action NVARCHAR(20),
    @By     NVARCHAR(200),
    @Reason NVARCHAR(500) = NULL,
    @NowUTC DATETIME2(3)  = NULL
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;

    DECLARE @now DATETIME2(3) = COALESCE(@NowUTC, SYSUTCDATETIME()), @changed INT = 0,
            @state NVARCHAR(20), @inFolder BIT = 0, @resolutionID BIGINT,
            @requeue BIT = CASE WHEN @Action = N'Requeued' THEN 1 ELSE 0 END;
    IF @Action NOT IN (N'Requeued', N'Dismissed')
        THROW 50082, N'spPrimeflowResolve: @Action is Requeued or Dismissed', 1;

    BEGIN TRANSACTION;
    IF @Table = N'smsQueue'
    BEGIN
        UPDATE dbo.smsQueue
        SET State           = CASE WHEN @requeue = 1 THEN N'Queued' ELSE N'Dismissed' END,
            Attempts        = CASE WHEN @requeue = 1 THEN 0 ELSE Attempts END,
            QueuedUTC       = CASE WHEN @requeue = 1 THEN @now ELSE QueuedUTC END,
            NextAttemptUTC  = CASE WHEN @requeue = 1 THEN @now ELSE NextAttemptUTC END,
            ClaimedUntilUTC = NULL,
            UpdatedUTC      = @now
        WHERE ID = @ID AND State = N'Failed';
        SET @changed = @@ROWCOUNT;
        SELECT @state = State FROM dbo.smsQueue WHERE ID = @ID;
    END
    ELSE IF @Table = N'ethTriageInviteQueue'
    BEGIN
        UPDATE dbo.ethTriageInviteQueue
        SET state           = CASE WHEN @requeue = 1 THEN N'Queued' ELSE N'Dismissed' END,
            attempts        = CASE WHEN @requeue = 1 THEN 0 ELSE attempts END,
            queuedUTC       = CASE WHEN @requeue = 1 THEN @now ELSE queuedUTC END,
            nextAttemptUTC  = CASE WHEN @requeue = 1 THEN @now ELSE nextAttemptUTC END,
            claimedUntilUTC = NULL,
            updatedUTC      = @now
        WHERE id = @ID AND state = N'Failed' AND sentUTC IS NULL;
        SET @changed = @@ROWCOUNT;
        SELECT @state = state FROM dbo.ethTriageInviteQueue WHERE id = @ID;
    END
    ELSE IF @Table = N'PrimeEmailJobRegistered'
    BEGIN
        UPDATE dbo.PrimeEmailJobRegistered
        SET outcome = N'Dismissed', updatedUTC = @now
        WHERE id = @ID AND outcome = N'Failed' AND movedUTC IS NOT NULL AND @requeue = 0;
        SET @changed = @@ROWCOUNT;
        SELECT @state = outcome, @inFolder = CASE WHEN movedUTC IS NULL THEN 1 ELSE 0 END
        FROM dbo.PrimeEmailJobRegistered
        WHERE id = @ID;
    END
    ELSE
        THROW 50082, N'spPrimeflowResolve: @Table is not a table whose rows a person resolves', 1;

    IF @changed = 1
    BEGIN
        INSERT INTO dbo.primeflowResolution (tableName, rowId, action, resolvedBy, reason, resolvedUTC)
        VALUES (@Table, @ID, @Action, @By, @Reason, @now);
        SET @resolutionID = CAST(SCOPE_IDENTITY() AS BIGINT);
    END;
    COMMIT TRANSACTION;

    SELECT @resolutionID AS resolutionID, @state AS state, @inFolder AS inFolder;
END;
GO

-- spPrimeflowListResolutions: the resolutions of @Table's rows with an id in
-- @IDs, oldest first.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowListResolutions
    @Table NVARCHAR(128),
    @IDs   dbo.primeflowIdList READONLY
AS
BEGIN
    SET NOCOUNT ON;

    SELECT r.id, r.tableName, r.rowId, r.action, r.resolvedBy, r.reason, r.resolvedUTC
    FROM dbo.primeflowResolution AS r
    WHERE r.tableName = @Table AND r.rowId IN (SELECT i.id FROM @IDs AS i)
    ORDER BY r.id;
END;
GO

-- spSmsQueueList: up to @Top messages, oldest first, as
-- spPrimeflowListTriageInviteQueue lists invites; @State 0 any, 1 not sent
-- (Queued, Sending, Failed), 2 Failed.
CREATE OR ALTER PROCEDURE dbo.spSmsQueueList
    @State INT = 0,
    @Top   INT = 100
AS
BEGIN
    SET NOCOUNT ON;

    SELECT TOP (@Top) ID, Recipient, Body, Source, DedupeKey, State, Attempts, NextAttemptUTC,
           ClaimedUntilUTC, LastError, QueuedUTC, SentUTC, FailedUTC, UpdatedUTC
    FROM dbo.smsQueue
    WHERE @State = 0
       OR (@State = 1 AND State IN (N'Queued', N'Sending', N'Failed'))
       OR (@State = 2 AND State = N'Failed')
    ORDER BY ID
    OPTION (RECOMPILE);
END;
GO

-- spPrimeflowEmailJobRegisteredList: up to @Top receipts, oldest first, as
-- spPrimeflowEmailJobRegisteredGet returns one; @State 0 any, 1 not done
-- (Pending, Failed), 2 Failed.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowEmailJobRegisteredList
    @State INT = 0,
    @Top   INT = 100
AS
BEGIN
    SET NOCOUNT ON;

    SELECT TOP (@Top) id, internetMessageId, subject, receivedDateTime, fromAddress, bodyPreview, JobID, JobIDKind,
           NumericReference, JobNumber, primeJobId, outcome, lastError, attempts, movedUTC, movedTo,
           registeredUTC, updatedUTC, CAST(0 AS BIT) AS inserted
    FROM dbo.PrimeEmailJobRegistered
    WHERE @State = 0
       OR (@State = 1 AND outcome IN (N'Pending', N'Failed'))
       OR (@State = 2 AND outcome = N'Failed')
    ORDER BY id
    OPTION (RECOMPILE);
END;
GO
