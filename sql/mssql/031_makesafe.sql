-- Make-safe detection (spec §5.5 step 3, §6): the phone call a person must make
-- for a job that needs a Make Safe out of hours, at most one a job, the rungs
-- of the re-check ladder (the spec's ethTask rows), the business-hours rule
-- and spMakesafeUpsertPhoneCallFromPrimeJob. sql/README.md gives the reading.
-- Needs 030_sms.sql (smsQueue) and the child mirror's
-- primeAllocations.isMakeSafe (020, computed by 032); the detection reads
-- primeflowSettings (032) when it runs. Every batch is safe to run again.
IF OBJECT_ID(N'dbo.makesafePhoneCall', N'U') IS NULL
CREATE TABLE dbo.makesafePhoneCall (
    ID            BIGINT IDENTITY(1,1) NOT NULL CONSTRAINT PK_makesafePhoneCall PRIMARY KEY,
    PrimeJobID    UNIQUEIDENTIFIER NOT NULL,
    JobNumber     NVARCHAR(50)     NULL,
    JobCreatedUTC DATETIME2(3)     NULL,
    RaisedUTC     DATETIME2(3)     NOT NULL,
    State         NVARCHAR(20)     NOT NULL CONSTRAINT DF_makesafePhoneCall_State DEFAULT N'Raised',
    SmsQueueID    BIGINT           NULL
);
GO

-- One phone call a job; the detection's UPDLOCK, HOLDLOCK locks this key range.
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'UX_makesafePhoneCall_PrimeJobID' AND object_id = OBJECT_ID(N'dbo.makesafePhoneCall'))
CREATE UNIQUE INDEX UX_makesafePhoneCall_PrimeJobID ON dbo.makesafePhoneCall (PrimeJobID);
GO

IF OBJECT_ID(N'dbo.makesafeAllocationCheck', N'U') IS NULL
CREATE TABLE dbo.makesafeAllocationCheck (
    PrimeJobID UNIQUEIDENTIFIER NOT NULL,
    Rung       INT              NOT NULL,
    DueUTC     DATETIME2(3)     NOT NULL,
    QueuedUTC  DATETIME2(3)     NOT NULL,
    FiredUTC   DATETIME2(3)     NULL,
    Outcome    NVARCHAR(500)    NULL,
    CONSTRAINT PK_makesafeAllocationCheck PRIMARY KEY (PrimeJobID, Rung)
);
GO

-- fnIsOutsideBusinessHours (§5.5): 1 on a Saturday or Sunday, or before 08:30
-- or from 17:00 on a weekday, in Melbourne local time ('AUS Eastern Standard
-- Time' holds the same rules as Australia/Melbourne, daylight saving
-- included). @UTC is a UTC time (Prime's timestamps are UTC). NULL gives 0:
-- nothing is raised for a time nobody knows. The weekday is counted from a
-- known Monday (1900-01-01), so @@DATEFIRST does not matter.
CREATE OR ALTER FUNCTION dbo.fnIsOutsideBusinessHours (@UTC DATETIME2(3))
RETURNS BIT
AS
BEGIN
    IF @UTC IS NULL
        RETURN 0;
    DECLARE @local DATETIME2(3) =
        CONVERT(DATETIME2(3), (@UTC AT TIME ZONE 'UTC') AT TIME ZONE 'AUS Eastern Standard Time');
    IF DATEDIFF(DAY, CONVERT(DATE, '19000101', 112), CONVERT(DATE, @local)) % 7 >= 5
        RETURN 1;
    DECLARE @clock TIME(3) = CONVERT(TIME(3), @local);
    IF @clock < CONVERT(TIME(3), '08:30') OR @clock >= CONVERT(TIME(3), '17:00')
        RETURN 1;
    RETURN 0;
END;
GO

-- spMakesafeUpsertPhoneCallFromPrimeJob (§5.5, §6; IPrimeData
-- UpsertMakeSafePhoneCallFromJob): in one transaction,
--   * raises a makesafePhoneCall, and queues its SMS to @SMSRecipient, only
--     for a job with a Make Safe allocation (primeAllocations.isMakeSafe)
--     created outside business hours (fnIsOutsideBusinessHours on
--     primeJobs.createdAt), and only when the job has no call yet: UPDLOCK,
--     HOLDLOCK keep the PrimeJobID key range locked from the check to the
--     insert, so concurrent calls raise one row;
--   * with @QueueMakeAllocationChecks = 1, when the job has no Make Safe
--     allocation and no call, queues the rungs of @CheckOffsets (seconds after
--     @ChecksFromUTC, by default @NowUTC; rung n is the n-th smallest) that
--     are not queued yet — the spec's spEthTaskInsertMakeSafeAllocation.
-- The spec's callers pass only @JobId and @QueueMakeAllocationChecks (§5.5,
-- §6, §7): with no @CheckOffsets the ladder is §6's +1/+4/+10/+15 minutes
-- (store.DefaultMakesafeLadder), and with no @SMSRecipient the SMS goes to
-- the primeflowSettings row MakesafeSMSRecipient (primectl migrate writes it
-- from MAKESAFE_SMS_TO); with no row either it is queued with no recipient,
-- and the sender fails it visibly.
-- Returns one row (jobFound, jobNumber, jobCreatedUTC, outsideBusinessHours,
-- hasMakeSafe, phoneCallID, raised, smsID), then the rungs it queued
-- (PrimeJobID, Rung, DueUTC, QueuedUTC). Nothing is written for a job that
-- is not in primeJobs.
CREATE OR ALTER PROCEDURE dbo.spMakesafeUpsertPhoneCallFromPrimeJob
    @JobId                     UNIQUEIDENTIFIER,
    @QueueMakeAllocationChecks BIT = 0,
    @CheckOffsets              dbo.primeflowIdList READONLY,
    @ChecksFromUTC             DATETIME2(3) = NULL,
    @NowUTC                    DATETIME2(3) = NULL,
    @SMSRecipient              NVARCHAR(50) = NULL
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;

    DECLARE @now DATETIME2(3) = COALESCE(@NowUTC, SYSUTCDATETIME());
    DECLARE @from DATETIME2(3) = COALESCE(@ChecksFromUTC, @now);
    DECLARE @jobFound BIT = 0, @jobNumber NVARCHAR(50), @createdAt DATETIME2(3), @body NVARCHAR(1000);
    DECLARE @hasMakeSafe BIT = 0, @outside BIT = 0, @raised BIT = 0;
    DECLARE @phoneCallID BIGINT, @smsID BIGINT, @recipient NVARCHAR(50) = NULLIF(LTRIM(RTRIM(@SMSRecipient)), N'');
    DECLARE @queued TABLE (Rung INT NOT NULL PRIMARY KEY, DueUTC DATETIME2(3) NOT NULL);
    DECLARE @ladder TABLE (id BIGINT NOT NULL PRIMARY KEY);

    INSERT INTO @ladder (id) SELECT id FROM @CheckOffsets;
    IF NOT EXISTS (SELECT 1 FROM @ladder)
        INSERT INTO @ladder (id) VALUES (60), (240), (600), (900);
    IF @recipient IS NULL
        SELECT @recipient = LEFT(NULLIF(LTRIM(RTRIM(value)), N''), 50)
        FROM dbo.primeflowSettings
        WHERE name = N'MakesafeSMSRecipient';

    BEGIN TRANSACTION;

    -- The SMS text is store.MakesafeSMSBody: parts left out when blank.
    SELECT @jobFound = 1, @jobNumber = j.jobNumber, @createdAt = j.createdAt,
           @body = CONCAT(N'MAKE SAFE after hours: job ',
                          COALESCE(NULLIF(LTRIM(RTRIM(j.jobNumber)), N''), LOWER(CONVERT(NVARCHAR(36), j.jobId))),
                          N', ' + NULLIF(LTRIM(RTRIM(j.addressLine1)), N''),
                          N', ' + NULLIF(LTRIM(RTRIM(j.suburb)), N''),
                          N', ' + NULLIF(LTRIM(RTRIM(j.state)), N''),
                          N', ' + NULLIF(LTRIM(RTRIM(j.postcode)), N''),
                          N'. Please call the customer now.')
    FROM dbo.primeJobs AS j
    WHERE j.jobId = @JobId;

    IF @jobFound = 1
    BEGIN
        IF EXISTS (SELECT 1 FROM dbo.primeAllocations WHERE jobId = @JobId AND isMakeSafe = 1)
            SET @hasMakeSafe = 1;
        SET @outside = dbo.fnIsOutsideBusinessHours(@createdAt);

        SELECT @phoneCallID = ID
        FROM dbo.makesafePhoneCall WITH (UPDLOCK, HOLDLOCK)
        WHERE PrimeJobID = @JobId;

        IF @phoneCallID IS NULL AND @hasMakeSafe = 1 AND @outside = 1
        BEGIN
            SELECT @smsID = ID
            FROM dbo.smsQueue WITH (UPDLOCK, HOLDLOCK)
            WHERE DedupeKey = CONCAT(N'makesafe:', LOWER(CONVERT(NVARCHAR(36), @JobId)));
            IF @smsID IS NULL -- a key archived with its message stays used (081)
                SELECT @smsID = SmsQueueID
                FROM dbo.smsArchivedDedupeKey WITH (UPDLOCK, HOLDLOCK)
                WHERE DedupeKey = CONCAT(N'makesafe:', LOWER(CONVERT(NVARCHAR(36), @JobId)));
            IF @smsID IS NULL
            BEGIN
                INSERT INTO dbo.smsQueue
                    (Recipient, Body, Source, DedupeKey, State, Attempts, NextAttemptUTC, QueuedUTC, UpdatedUTC)
                VALUES (COALESCE(@recipient, N''), @body, N'makesafe',
                        CONCAT(N'makesafe:', LOWER(CONVERT(NVARCHAR(36), @JobId))), N'Queued', 0, @now, @now, @now);
                SET @smsID = CAST(SCOPE_IDENTITY() AS BIGINT);
            END;

            INSERT INTO dbo.makesafePhoneCall (PrimeJobID, JobNumber, JobCreatedUTC, RaisedUTC, State, SmsQueueID)
            VALUES (@JobId, @jobNumber, @createdAt, @now, N'Raised', @smsID);
            SET @phoneCallID = CAST(SCOPE_IDENTITY() AS BIGINT);
            SET @raised = 1;
        END
        ELSE IF @QueueMakeAllocationChecks = 1 AND @hasMakeSafe = 0 AND @phoneCallID IS NULL
        BEGIN
            INSERT INTO dbo.makesafeAllocationCheck (PrimeJobID, Rung, DueUTC, QueuedUTC)
            OUTPUT inserted.Rung, inserted.DueUTC INTO @queued
            SELECT @JobId, o.Rung, DATEADD(SECOND, CAST(o.id AS INT), @from), @now
            FROM (SELECT id, CAST(ROW_NUMBER() OVER (ORDER BY id) AS INT) AS Rung FROM @ladder) AS o
            WHERE NOT EXISTS (SELECT 1 FROM dbo.makesafeAllocationCheck AS c WITH (UPDLOCK, HOLDLOCK)
                              WHERE c.PrimeJobID = @JobId AND c.Rung = o.Rung);
        END;
    END;

    COMMIT TRANSACTION;

    SELECT @jobFound AS jobFound, @jobNumber AS jobNumber, @createdAt AS jobCreatedUTC,
           @outside AS outsideBusinessHours, @hasMakeSafe AS hasMakeSafe,
           @phoneCallID AS phoneCallID, @raised AS raised,
           CASE WHEN @raised = 1 THEN @smsID END AS smsID;
    SELECT @JobId AS PrimeJobID, Rung, DueUTC, @now AS QueuedUTC FROM @queued ORDER BY Rung;
END;
GO

-- spMakesafeGetPhoneCall: the job's phone call; no rows when none was raised.
CREATE OR ALTER PROCEDURE dbo.spMakesafeGetPhoneCall
    @JobId UNIQUEIDENTIFIER
AS
BEGIN
    SET NOCOUNT ON;

    SELECT ID, PrimeJobID, JobNumber, JobCreatedUTC, RaisedUTC, State, SmsQueueID
    FROM dbo.makesafePhoneCall
    WHERE PrimeJobID = @JobId;
END;
GO

-- spMakesafeListAllocationChecks: the job's rungs in order.
CREATE OR ALTER PROCEDURE dbo.spMakesafeListAllocationChecks
    @JobId UNIQUEIDENTIFIER
AS
BEGIN
    SET NOCOUNT ON;

    SELECT PrimeJobID, Rung, DueUTC, QueuedUTC, FiredUTC, Outcome
    FROM dbo.makesafeAllocationCheck
    WHERE PrimeJobID = @JobId
    ORDER BY Rung;
END;
GO

-- spMakesafeSetAllocationCheckFired: records that a rung ran and what it did.
-- Returns rowsUpdated (0 for a rung never queued).
CREATE OR ALTER PROCEDURE dbo.spMakesafeSetAllocationCheckFired
    @JobId    UNIQUEIDENTIFIER,
    @Rung     INT,
    @Outcome  NVARCHAR(MAX),
    @FiredUTC DATETIME2(3)
AS
BEGIN
    SET NOCOUNT ON;

    UPDATE dbo.makesafeAllocationCheck
    SET FiredUTC = @FiredUTC, Outcome = LEFT(@Outcome, 500)
    WHERE PrimeJobID = @JobId AND Rung = @Rung;

    SELECT @@ROWCOUNT AS rowsUpdated;
END;
GO
