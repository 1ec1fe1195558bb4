-- The job mirror's procedures and its first-sight record (spec §4.3, §5.1,
-- §6). primeJobs itself is in 002_mirror.sql. sql/README.md says why each
-- primeflow addition exists. Every batch is safe to run again.

-- primeflowJobFirstSeen: one row a job, made by the first event (or
-- ensure-job request) that finds the job missing from the mirror. The primary
-- key lets only the first claim win, so the new-job pipeline runs once per
-- job; the pipeline columns record how it went, for primectl firstseen.
IF OBJECT_ID(N'dbo.primeflowJobFirstSeen', N'U') IS NULL
CREATE TABLE dbo.primeflowJobFirstSeen (
    jobId                UNIQUEIDENTIFIER NOT NULL CONSTRAINT PK_primeflowJobFirstSeen PRIMARY KEY,
    logId                BIGINT           NULL,
    firstSeenUTC         DATETIME2(3)     NOT NULL CONSTRAINT DF_primeflowJobFirstSeen_firstSeenUTC DEFAULT SYSUTCDATETIME(),
    pipelineCompletedUTC DATETIME2(3)     NULL,
    pipelineAttempts     INT              NOT NULL CONSTRAINT DF_primeflowJobFirstSeen_pipelineAttempts DEFAULT 0,
    pipelineStatus       NVARCHAR(500)    NULL
);
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes
               WHERE object_id = OBJECT_ID(N'dbo.primeflowJobFirstSeen') AND name = N'IX_primeflowJobFirstSeen_pending')
    CREATE NONCLUSTERED INDEX IX_primeflowJobFirstSeen_pending
        ON dbo.primeflowJobFirstSeen (firstSeenUTC)
        WHERE pipelineCompletedUTC IS NULL;
GO

-- spPrimeflowUpsertJob: inserts the job or updates its row, and returns
-- whether it inserted (created). Not the email flow's spPrimeUpsertJob (§7),
-- which stays as it is. Parameters longer than their column are cut by their
-- declared length; an amount that is not a decimal is NULL (the raw
-- attributes keep it). A stored version newer than @Version is left alone, so
-- a late writer never rolls the mirror back; but not one written before
-- @AskedUTC, when the call Prime answered went out (less the hosts' clock
-- skew): Prime's versions only grow, so an answer to a later call that gives
-- a lower version says the stored one was never Prime's. The job's triage
-- invites whose arrival is over are closed (spPrimeflowCloseTriageInvites).
CREATE OR ALTER PROCEDURE dbo.spPrimeflowUpsertJob
    @JobId                       UNIQUEIDENTIFIER,
    @JobNumber                   NVARCHAR(50)     = NULL,
    @StatusId                    UNIQUEIDENTIFIER = NULL,
    @ClientId                    UNIQUEIDENTIFIER = NULL,
    @AssignedId                  UNIQUEIDENTIFIER = NULL,
    @EstimatorId                 UNIQUEIDENTIFIER = NULL,
    @CaseManagerId               UNIQUEIDENTIFIER = NULL,
    @SupervisorId                UNIQUEIDENTIFIER = NULL,
    @DivisionId                  UNIQUEIDENTIFIER = NULL,
    @Region                      NVARCHAR(100)    = NULL,
    @Description                 NVARCHAR(MAX)    = NULL,
    @IncidentDate                DATETIME2(3)     = NULL,
    @CreatedAt                   DATETIME2(3)     = NULL,
    @UpdatedAt                   DATETIME2(3)     = NULL,
    @Version                     BIGINT           = NULL,
    @PrimeUrl                    NVARCHAR(400)    = NULL,
    @AuthorisedTotalIncludingTax NVARCHAR(50)     = NULL,
    @AddressLine1                NVARCHAR(200)    = NULL,
    @AddressLine2                NVARCHAR(200)    = NULL,
    @Suburb                      NVARCHAR(100)    = NULL,
    @State                       NVARCHAR(50)     = NULL,
    @Postcode                    NVARCHAR(20)     = NULL,
    @PrimaryContactId            UNIQUEIDENTIFIER = NULL,
    @Attributes                  NVARCHAR(MAX)    = NULL,
    @AskedUTC                    DATETIME2(3)     = NULL
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;

    DECLARE @created BIT = 0,
            @total DECIMAL(19,4) = TRY_CONVERT(DECIMAL(19,4), @AuthorisedTotalIncludingTax),
            @now DATETIME2(3) = SYSUTCDATETIME();

    BEGIN TRANSACTION;

    -- UPDLOCK + HOLDLOCK hold the key (or the gap it would go in) from the
    -- check to the write, so two sessions upserting a new job cannot both
    -- insert: exactly one reports created.
    IF NOT EXISTS (SELECT 1 FROM dbo.primeJobs WITH (UPDLOCK, HOLDLOCK) WHERE jobId = @JobId)
    BEGIN
        INSERT INTO dbo.primeJobs
            (jobId, jobNumber, statusId, clientId, assignedId, estimatorId, caseManagerId, supervisorId,
             divisionId, region, description, incidentDate, createdAt, updatedAt, version, primeUrl,
             authorisedTotalIncludingTax, addressLine1, addressLine2, suburb, state, postcode,
             primaryContactId, attributes, syncedUTC)
        VALUES
            (@JobId, @JobNumber, @StatusId, @ClientId, @AssignedId, @EstimatorId, @CaseManagerId, @SupervisorId,
             @DivisionId, @Region, @Description, @IncidentDate, @CreatedAt, @UpdatedAt, @Version, @PrimeUrl,
             @total, @AddressLine1, @AddressLine2, @Suburb, @State, @Postcode,
             @PrimaryContactId, @Attributes, @now);
        SET @created = 1;
    END
    ELSE
        UPDATE dbo.primeJobs
        SET jobNumber = @JobNumber, statusId = @StatusId, clientId = @ClientId, assignedId = @AssignedId,
            estimatorId = @EstimatorId, caseManagerId = @CaseManagerId, supervisorId = @SupervisorId,
            divisionId = @DivisionId, region = @Region, description = @Description,
            incidentDate = @IncidentDate, createdAt = @CreatedAt, updatedAt = @UpdatedAt,
            version = @Version, primeUrl = @PrimeUrl, authorisedTotalIncludingTax = @total,
            addressLine1 = @AddressLine1, addressLine2 = @AddressLine2, suburb = @Suburb,
            state = @State, postcode = @Postcode, primaryContactId = @PrimaryContactId,
            attributes = @Attributes, syncedUTC = @now
        WHERE jobId = @JobId
          AND (version IS NULL OR @Version IS NULL OR version <= @Version OR @AskedUTC > syncedUTC);

    -- Whichever path wrote the job: an open triage invite whose arrival the
    -- mirror now shows over is closed, in this transaction
    -- (061_triage_invites.sql; SQL Server resolves the procedure when this
    -- one runs, so it may come from a later script).
    EXEC dbo.spPrimeflowCloseTriageInvites @JobId = @JobId, @NowUTC = @now;

    COMMIT TRANSACTION;

    SELECT @created AS created;
END;
GO

-- spPrimeflowGetJob: one primeJobs row; no rows when the job is not mirrored.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowGetJob
    @JobId UNIQUEIDENTIFIER
AS
BEGIN
    SET NOCOUNT ON;

    SELECT
        jobId, jobNumber, statusId, clientId, assignedId, estimatorId, caseManagerId, supervisorId,
        divisionId, region, description, incidentDate, createdAt, updatedAt, version, primeUrl,
        CONVERT(NVARCHAR(50), authorisedTotalIncludingTax) AS authorisedTotalIncludingTax,
        addressLine1, addressLine2, suburb, state, postcode, primaryContactId, attributes, syncedUTC
    FROM dbo.primeJobs
    WHERE jobId = @JobId;
END;
GO

-- spPrimeflowClaimJobFirstSeen: records a job's first sight and returns
-- whether this call made the record (claimed). Only the first claim wins.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowClaimJobFirstSeen
    @JobId UNIQUEIDENTIFIER,
    @LogId BIGINT = NULL
AS
BEGIN
    SET NOCOUNT ON;

    INSERT INTO dbo.primeflowJobFirstSeen (jobId, logId, firstSeenUTC)
    SELECT @JobId, @LogId, SYSUTCDATETIME()
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

    SELECT jobId, logId, firstSeenUTC, pipelineCompletedUTC, pipelineAttempts, pipelineStatus
    FROM dbo.primeflowJobFirstSeen
    WHERE jobId = @JobId;
END;
GO

-- spPrimeflowCompleteJobFirstSeen: stamps the job's new-job pipeline finished
-- (a second stamp keeps the first) and returns rowsUpdated (0: never claimed).
CREATE OR ALTER PROCEDURE dbo.spPrimeflowCompleteJobFirstSeen
    @JobId          UNIQUEIDENTIFIER,
    @PipelineStatus NVARCHAR(MAX) = NULL
AS
BEGIN
    SET NOCOUNT ON;

    UPDATE dbo.primeflowJobFirstSeen
    SET pipelineCompletedUTC = COALESCE(pipelineCompletedUTC, SYSUTCDATETIME()),
        pipelineStatus       = LEFT(@PipelineStatus, 500)
    WHERE jobId = @JobId;

    SELECT @@ROWCOUNT AS rowsUpdated;
END;
GO

-- spPrimeflowFailJobFirstSeen: records a failed attempt of the job's
-- pipeline and its error; returns the attempts so far, or no row when the job
-- was never claimed.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowFailJobFirstSeen
    @JobId          UNIQUEIDENTIFIER,
    @PipelineStatus NVARCHAR(MAX) = NULL
AS
BEGIN
    SET NOCOUNT ON;

    DECLARE @attempts INT;

    UPDATE dbo.primeflowJobFirstSeen
    SET @attempts = pipelineAttempts = pipelineAttempts + 1,
        pipelineStatus = LEFT(@PipelineStatus, 500)
    WHERE jobId = @JobId;

    SELECT @attempts AS pipelineAttempts WHERE @attempts IS NOT NULL;
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

    SELECT TOP (@Top) jobId, logId, firstSeenUTC, pipelineCompletedUTC, pipelineAttempts, pipelineStatus
    FROM dbo.primeflowJobFirstSeen
    WHERE @State = 0
       OR (@State = 1 AND pipelineCompletedUTC IS NULL)
       OR (@State = 2 AND pipelineCompletedUTC IS NULL AND pipelineAttempts > 0)
       OR (@State = 3 AND pipelineCompletedUTC IS NOT NULL)
    ORDER BY firstSeenUTC, jobId
    OPTION (RECOMPILE);
END;
GO
