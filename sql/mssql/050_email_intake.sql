-- The email path (spec §7): the receipt of every Prime new-job email the
-- mail intake reads. The spec's flow logs a receipt with
-- spPrimeEmailJobRegisteredInsert(bodyPreview) and keeps no outcome;
-- primeflow keys the receipt by the message's internetMessageId, so a
-- message seen twice is recorded once, and adds what the flow outputs and
-- how the message fared (sql/README.md, "The email path"). Every batch is
-- safe to run again: on a database where the table is live, the columns it
-- lacks are added.

IF OBJECT_ID(N'dbo.PrimeEmailJobRegistered', N'U') IS NULL
CREATE TABLE dbo.PrimeEmailJobRegistered (
    id                BIGINT IDENTITY(1,1) NOT NULL CONSTRAINT PK_PrimeEmailJobRegistered PRIMARY KEY,
    bodyPreview       NVARCHAR(MAX)    NULL,
    registeredUTC     DATETIME2(3)     NOT NULL CONSTRAINT DF_PrimeEmailJobRegistered_registeredUTC DEFAULT SYSUTCDATETIME(),
    internetMessageId NVARCHAR(450)    NULL,
    subject           NVARCHAR(400)    NULL,
    receivedDateTime  DATETIME2(3)     NULL,
    fromAddress       NVARCHAR(320)    NULL,
    JobID             NVARCHAR(50)     NULL,
    JobIDKind         NVARCHAR(10)     NULL,
    NumericReference  BIGINT           NULL,
    JobNumber         NVARCHAR(50)     NULL,
    primeJobId        UNIQUEIDENTIFIER NULL,
    outcome           NVARCHAR(20)     NOT NULL CONSTRAINT DF_PrimeEmailJobRegistered_outcome DEFAULT N'Pending',
    lastError         NVARCHAR(2000)   NULL,
    attempts          INT              NOT NULL CONSTRAINT DF_PrimeEmailJobRegistered_attempts DEFAULT 0,
    movedUTC          DATETIME2(3)     NULL,
    movedTo           NVARCHAR(20)     NULL,
    updatedUTC        DATETIME2(3)     NOT NULL CONSTRAINT DF_PrimeEmailJobRegistered_updatedUTC DEFAULT SYSUTCDATETIME()
);
GO

-- A live receipt table gains primeflow's columns.
IF COL_LENGTH(N'dbo.PrimeEmailJobRegistered', N'internetMessageId') IS NULL
    ALTER TABLE dbo.PrimeEmailJobRegistered ADD internetMessageId NVARCHAR(450) NULL;
GO
IF COL_LENGTH(N'dbo.PrimeEmailJobRegistered', N'subject') IS NULL
    ALTER TABLE dbo.PrimeEmailJobRegistered ADD subject NVARCHAR(400) NULL;
GO
IF COL_LENGTH(N'dbo.PrimeEmailJobRegistered', N'receivedDateTime') IS NULL
    ALTER TABLE dbo.PrimeEmailJobRegistered ADD receivedDateTime DATETIME2(3) NULL;
GO
IF COL_LENGTH(N'dbo.PrimeEmailJobRegistered', N'fromAddress') IS NULL
    ALTER TABLE dbo.PrimeEmailJobRegistered ADD fromAddress NVARCHAR(320) NULL;
GO
IF COL_LENGTH(N'dbo.PrimeEmailJobRegistered', N'JobID') IS NULL
    ALTER TABLE dbo.PrimeEmailJobRegistered ADD JobID NVARCHAR(50) NULL;
GO
IF COL_LENGTH(N'dbo.PrimeEmailJobRegistered', N'JobIDKind') IS NULL
    ALTER TABLE dbo.PrimeEmailJobRegistered ADD JobIDKind NVARCHAR(10) NULL;
GO
IF COL_LENGTH(N'dbo.PrimeEmailJobRegistered', N'NumericReference') IS NULL
    ALTER TABLE dbo.PrimeEmailJobRegistered ADD NumericReference BIGINT NULL;
GO
IF COL_LENGTH(N'dbo.PrimeEmailJobRegistered', N'JobNumber') IS NULL
    ALTER TABLE dbo.PrimeEmailJobRegistered ADD JobNumber NVARCHAR(50) NULL;
GO
IF COL_LENGTH(N'dbo.PrimeEmailJobRegistered', N'primeJobId') IS NULL
    ALTER TABLE dbo.PrimeEmailJobRegistered ADD primeJobId UNIQUEIDENTIFIER NULL;
GO
IF COL_LENGTH(N'dbo.PrimeEmailJobRegistered', N'outcome') IS NULL
    ALTER TABLE dbo.PrimeEmailJobRegistered ADD outcome NVARCHAR(20) NOT NULL
        CONSTRAINT DF_PrimeEmailJobRegistered_outcome DEFAULT N'Pending';
GO
IF COL_LENGTH(N'dbo.PrimeEmailJobRegistered', N'lastError') IS NULL
    ALTER TABLE dbo.PrimeEmailJobRegistered ADD lastError NVARCHAR(2000) NULL;
GO
IF COL_LENGTH(N'dbo.PrimeEmailJobRegistered', N'attempts') IS NULL
    ALTER TABLE dbo.PrimeEmailJobRegistered ADD attempts INT NOT NULL
        CONSTRAINT DF_PrimeEmailJobRegistered_attempts DEFAULT 0;
GO
IF COL_LENGTH(N'dbo.PrimeEmailJobRegistered', N'movedUTC') IS NULL
    ALTER TABLE dbo.PrimeEmailJobRegistered ADD movedUTC DATETIME2(3) NULL;
GO
IF COL_LENGTH(N'dbo.PrimeEmailJobRegistered', N'movedTo') IS NULL
    ALTER TABLE dbo.PrimeEmailJobRegistered ADD movedTo NVARCHAR(20) NULL;
GO
IF COL_LENGTH(N'dbo.PrimeEmailJobRegistered', N'updatedUTC') IS NULL
    ALTER TABLE dbo.PrimeEmailJobRegistered ADD updatedUTC DATETIME2(3) NOT NULL
        CONSTRAINT DF_PrimeEmailJobRegistered_updatedUTC DEFAULT SYSUTCDATETIME();
GO

-- Mail refused unread as not Prime's (not from MAIL_ALLOWED_SENDERS, or not
-- authenticated for its sender) has a receipt outcome of its own, Rejected:
-- junk needs nobody, where a Failed receipt waits for a person. The receipts
-- an intake before it wrote Failed for such mail, their lastError the
-- refusal, become Rejected.
IF EXISTS (SELECT 1 FROM dbo.PrimeEmailJobRegistered WHERE outcome = N'Failed' AND lastError LIKE N'refused unread:%')
    UPDATE dbo.PrimeEmailJobRegistered SET outcome = N'Rejected'
    WHERE outcome = N'Failed' AND lastError LIKE N'refused unread:%';
GO

-- One receipt a message. Filtered: the spec's one-parameter call (the n8n
-- flow, while it runs) stores no internetMessageId.
IF NOT EXISTS (SELECT 1 FROM sys.indexes
               WHERE object_id = OBJECT_ID(N'dbo.PrimeEmailJobRegistered') AND name = N'UX_PrimeEmailJobRegistered_internetMessageId')
    CREATE UNIQUE NONCLUSTERED INDEX UX_PrimeEmailJobRegistered_internetMessageId
        ON dbo.PrimeEmailJobRegistered (internetMessageId)
        WHERE internetMessageId IS NOT NULL;
GO

-- The coverage report (§7.1) reads a job's receipts by its GUID.
IF NOT EXISTS (SELECT 1 FROM sys.indexes
               WHERE object_id = OBJECT_ID(N'dbo.PrimeEmailJobRegistered') AND name = N'IX_PrimeEmailJobRegistered_primeJobId')
    CREATE NONCLUSTERED INDEX IX_PrimeEmailJobRegistered_primeJobId
        ON dbo.PrimeEmailJobRegistered (primeJobId)
        INCLUDE (receivedDateTime)
        WHERE primeJobId IS NOT NULL;
GO

-- spPrimeEmailJobRegisteredInsert (§7 "SQL Log Request"): records a
-- message's receipt and returns the receipt, with inserted 1 when this call
-- made it. @BodyPreview is the spec's parameter; the rest are primeflow's and
-- default to NULL, so the flow's call still runs. A message already
-- recorded under @InternetMessageId (checked under UPDLOCK, HOLDLOCK, so two
-- calls at once make one row) is returned as it is.
CREATE OR ALTER PROCEDURE dbo.spPrimeEmailJobRegisteredInsert
    @BodyPreview       NVARCHAR(MAX),
    @InternetMessageId NVARCHAR(450) = NULL,
    @Subject           NVARCHAR(400) = NULL,
    @ReceivedDateTime  DATETIME2(3)  = NULL,
    @FromAddress       NVARCHAR(320) = NULL
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;

    DECLARE @id BIGINT, @inserted BIT = 0, @now DATETIME2(3) = SYSUTCDATETIME();

    BEGIN TRANSACTION;

    IF @InternetMessageId IS NOT NULL
        SELECT @id = id
        FROM dbo.PrimeEmailJobRegistered WITH (UPDLOCK, HOLDLOCK)
        WHERE internetMessageId = @InternetMessageId;

    IF @id IS NULL
    BEGIN
        INSERT INTO dbo.PrimeEmailJobRegistered
            (bodyPreview, registeredUTC, internetMessageId, subject, receivedDateTime, fromAddress, outcome, attempts, updatedUTC)
        VALUES
            (@BodyPreview, @now, @InternetMessageId, @Subject, @ReceivedDateTime, @FromAddress, N'Pending', 0, @now);
        SET @id = CAST(SCOPE_IDENTITY() AS BIGINT);
        SET @inserted = 1;
    END;

    COMMIT TRANSACTION;

    SELECT id, internetMessageId, subject, receivedDateTime, fromAddress, bodyPreview, JobID, JobIDKind,
           NumericReference, JobNumber, primeJobId, outcome, lastError, attempts, movedUTC, movedTo,
           registeredUTC, updatedUTC, @inserted AS inserted
    FROM dbo.PrimeEmailJobRegistered
    WHERE id = @id;
END;
GO

-- spPrimeflowEmailJobRegisteredUpdate: writes what became of a message —
-- what Extract JobID found, the job's GUID, the outcome, the last error, the
-- attempts and where it was moved — and returns rowsUpdated (0: no receipt).
CREATE OR ALTER PROCEDURE dbo.spPrimeflowEmailJobRegisteredUpdate
    @InternetMessageId NVARCHAR(450),
    @JobID             NVARCHAR(50)     = NULL,
    @JobIDKind         NVARCHAR(10)     = NULL,
    @NumericReference  BIGINT           = NULL,
    @JobNumber         NVARCHAR(50)     = NULL,
    @PrimeJobId        UNIQUEIDENTIFIER = NULL,
    @Outcome           NVARCHAR(20),
    @LastError         NVARCHAR(MAX)    = NULL,
    @Attempts          INT,
    @MovedUTC          DATETIME2(3)     = NULL,
    @MovedTo           NVARCHAR(20)     = NULL
AS
BEGIN
    SET NOCOUNT ON;

    UPDATE dbo.PrimeEmailJobRegistered
    SET JobID = @JobID, JobIDKind = @JobIDKind, NumericReference = @NumericReference, JobNumber = @JobNumber,
        primeJobId = @PrimeJobId, outcome = @Outcome, lastError = LEFT(@LastError, 2000), attempts = @Attempts,
        movedUTC = @MovedUTC, movedTo = @MovedTo, updatedUTC = SYSUTCDATETIME()
    WHERE internetMessageId = @InternetMessageId;

    SELECT @@ROWCOUNT AS rowsUpdated;
END;
GO

-- spPrimeflowEmailJobRegisteredGet: a message's receipt; no rows when none.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowEmailJobRegisteredGet
    @InternetMessageId NVARCHAR(450)
AS
BEGIN
    SET NOCOUNT ON;

    SELECT id, internetMessageId, subject, receivedDateTime, fromAddress, bodyPreview, JobID, JobIDKind,
           NumericReference, JobNumber, primeJobId, outcome, lastError, attempts, movedUTC, movedTo,
           registeredUTC, updatedUTC, CAST(0 AS BIT) AS inserted
    FROM dbo.PrimeEmailJobRegistered
    WHERE internetMessageId = @InternetMessageId;
END;
GO
