-- child-mirror (spec §5.2–§5.5): what the child mirror adds to the tables of
-- 002_mirror.sql, the AI summary queue of §5.3 step 4, and the procedures
-- behind the store's Appointments, Allocations, SiteForms, Estimates,
-- Contacts and AISummaryQueue (sql/README.md). The procedures are
-- primeflow's own (spPrimeflow…): the live database may hold procedures of
-- its own for these tables, and CREATE OR ALTER must not replace them.
-- The replace procedures read their rows from JSON (OPENJSON: database
-- compatibility level 130 or later).

-- The Make Safe rule's verdict. 032_callers.sql turns it into a column
-- computed from allocationType, so that a row any writer saves carries it.
IF COL_LENGTH(N'dbo.primeAllocations', N'isMakeSafe') IS NULL
ALTER TABLE dbo.primeAllocations ADD isMakeSafe BIT NOT NULL
    CONSTRAINT DF_primeAllocations_isMakeSafe DEFAULT 0;
GO

-- IAIData.QueueJobSummaryNow (§5.3 step 4): a job's AI summary is due at
-- QueuedFor; one row a job.
IF OBJECT_ID(N'dbo.ethAIJobSummaryQueue', N'U') IS NULL
CREATE TABLE dbo.ethAIJobSummaryQueue (
    jobId       UNIQUEIDENTIFIER NOT NULL CONSTRAINT PK_ethAIJobSummaryQueue PRIMARY KEY,
    QueuedFor   DATETIME2(3)     NOT NULL,
    createdUTC  DATETIME2(3)     NOT NULL,
    updatedUTC  DATETIME2(3)     NOT NULL
);
GO
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_ethAIJobSummaryQueue_QueuedFor' AND object_id = OBJECT_ID(N'dbo.ethAIJobSummaryQueue'))
CREATE INDEX IX_ethAIJobSummaryQueue_QueuedFor ON dbo.ethAIJobSummaryQueue (QueuedFor);
GO

-- spPrimeflowSaveAppointment: inserts the appointment or updates its row,
-- unless the stored version is newer (a late writer never rolls the mirror
-- back). Returns saved = 1 when it wrote the row.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowSaveAppointment
    @AppointmentId     UNIQUEIDENTIFIER,
    @JobId             UNIQUEIDENTIFIER = NULL,
    @AppointmentTypeId UNIQUEIDENTIFIER = NULL,
    @StartDate         DATETIME2(3)     = NULL,
    @EndDate           DATETIME2(3)     = NULL,
    @Status            NVARCHAR(50)     = NULL,
    @Version           BIGINT           = NULL,
    @AssignedId        UNIQUEIDENTIFIER = NULL,
    @Description       NVARCHAR(MAX)    = NULL,
    @Notes             NVARCHAR(MAX)    = NULL,
    @CreatedAt         DATETIME2(3)     = NULL,
    @UpdatedAt         DATETIME2(3)     = NULL,
    @Attributes        NVARCHAR(MAX)    = NULL
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;

    DECLARE @saved BIT = 0, @now DATETIME2(3) = SYSUTCDATETIME();

    BEGIN TRANSACTION;

    -- UPDLOCK + SERIALIZABLE hold the key (or the gap where it would be)
    -- from the update to the insert, so two sessions cannot both insert.
    UPDATE dbo.primeAppointments WITH (UPDLOCK, SERIALIZABLE)
    SET jobId = @JobId, appointmentTypeId = @AppointmentTypeId, startDate = @StartDate, endDate = @EndDate,
        status = @Status, version = @Version, assignedId = @AssignedId, description = @Description,
        notes = @Notes, createdAt = @CreatedAt, updatedAt = @UpdatedAt, attributes = @Attributes,
        syncedUTC = @now
    WHERE appointmentId = @AppointmentId
      AND (version IS NULL OR @Version IS NULL OR version <= @Version);

    IF @@ROWCOUNT = 1
        SET @saved = 1;
    ELSE IF NOT EXISTS (SELECT 1 FROM dbo.primeAppointments WITH (UPDLOCK, SERIALIZABLE) WHERE appointmentId = @AppointmentId)
    BEGIN
        INSERT INTO dbo.primeAppointments (appointmentId, jobId, appointmentTypeId, startDate, endDate, status,
            version, assignedId, description, notes, createdAt, updatedAt, attributes, syncedUTC)
        VALUES (@AppointmentId, @JobId, @AppointmentTypeId, @StartDate, @EndDate, @Status,
            @Version, @AssignedId, @Description, @Notes, @CreatedAt, @UpdatedAt, @Attributes, @now);
        SET @saved = 1;
    END;

    COMMIT TRANSACTION;

    SELECT @saved AS saved;
END;
GO

-- spPrimeflowGetAppointment: one appointment; no rows when not mirrored.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowGetAppointment
    @AppointmentId UNIQUEIDENTIFIER
AS
BEGIN
    SET NOCOUNT ON;

    SELECT appointmentId, jobId, appointmentTypeId, startDate, endDate, status, version, assignedId,
        description, notes, createdAt, updatedAt, attributes, syncedUTC
    FROM dbo.primeAppointments
    WHERE appointmentId = @AppointmentId;
END;
GO

-- spPrimeflowSaveAllocation (§5.5 SaveAllocation): inserts the allocation or
-- updates its row, unless the stored version is newer. Returns saved = 1
-- when it wrote the row. isMakeSafe is not written: SQL derives it from
-- allocationType (032_callers.sql); @IsMakeSafe is still accepted, and
-- ignored, for a primeflow of an earlier release during a rolling deploy.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowSaveAllocation
    @AllocationId       UNIQUEIDENTIFIER,
    @JobId              UNIQUEIDENTIFIER = NULL,
    @AssignedId         UNIQUEIDENTIFIER = NULL,
    @AssignedContactId  UNIQUEIDENTIFIER = NULL,
    @AllocationType     NVARCHAR(100)    = NULL,
    @AllocationNumber   NVARCHAR(50)     = NULL,
    @Label              NVARCHAR(200)    = NULL,
    @AllocationStatusId UNIQUEIDENTIFIER = NULL,
    @IsMakeSafe         BIT              = 0,
    @Version            BIGINT           = NULL,
    @CreatedAt          DATETIME2(3)     = NULL,
    @UpdatedAt          DATETIME2(3)     = NULL,
    @Attributes         NVARCHAR(MAX)    = NULL
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;

    DECLARE @saved BIT = 0, @now DATETIME2(3) = SYSUTCDATETIME();

    BEGIN TRANSACTION;

    UPDATE dbo.primeAllocations WITH (UPDLOCK, SERIALIZABLE)
    SET jobId = @JobId, assignedId = @AssignedId, assignedContactId = @AssignedContactId,
        allocationType = @AllocationType, allocationNumber = @AllocationNumber, label = @Label,
        allocationStatusId = @AllocationStatusId, version = @Version,
        createdAt = @CreatedAt, updatedAt = @UpdatedAt, attributes = @Attributes, syncedUTC = @now
    WHERE allocationId = @AllocationId
      AND (version IS NULL OR @Version IS NULL OR version <= @Version);

    IF @@ROWCOUNT = 1
        SET @saved = 1;
    ELSE IF NOT EXISTS (SELECT 1 FROM dbo.primeAllocations WITH (UPDLOCK, SERIALIZABLE) WHERE allocationId = @AllocationId)
    BEGIN
        INSERT INTO dbo.primeAllocations (allocationId, jobId, assignedId, assignedContactId, allocationType,
            allocationNumber, label, allocationStatusId, version, createdAt, updatedAt, attributes, syncedUTC)
        VALUES (@AllocationId, @JobId, @AssignedId, @AssignedContactId, @AllocationType,
            @AllocationNumber, @Label, @AllocationStatusId, @Version, @CreatedAt, @UpdatedAt, @Attributes, @now);
        SET @saved = 1;
    END;

    COMMIT TRANSACTION;

    SELECT @saved AS saved;
END;
GO

-- spPrimeflowGetAllocation: one allocation; no rows when not mirrored.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowGetAllocation
    @AllocationId UNIQUEIDENTIFIER
AS
BEGIN
    SET NOCOUNT ON;

    SELECT allocationId, jobId, assignedId, assignedContactId, allocationType, allocationNumber, label,
        allocationStatusId, isMakeSafe, version, createdAt, updatedAt, attributes, syncedUTC
    FROM dbo.primeAllocations
    WHERE allocationId = @AllocationId;
END;
GO

-- spPrimeflowListJobAllocations: a job's allocations, oldest createdAt first.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowListJobAllocations
    @JobId UNIQUEIDENTIFIER
AS
BEGIN
    SET NOCOUNT ON;

    SELECT allocationId, jobId, assignedId, assignedContactId, allocationType, allocationNumber, label,
        allocationStatusId, isMakeSafe, version, createdAt, updatedAt, attributes, syncedUTC
    FROM dbo.primeAllocations
    WHERE jobId = @JobId
    ORDER BY createdAt, allocationId;
END;
GO

-- spPrimeflowHasMakeSafeAllocation: hasMakeSafe = 1 when the job has an
-- allocation saved as Make Safe.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowHasMakeSafeAllocation
    @JobId UNIQUEIDENTIFIER
AS
BEGIN
    SET NOCOUNT ON;

    SELECT CAST(CASE WHEN EXISTS (SELECT 1 FROM dbo.primeAllocations WHERE jobId = @JobId AND isMakeSafe = 1)
                     THEN 1 ELSE 0 END AS BIT) AS hasMakeSafe;
END;
GO

-- spPrimeflowReplaceJobSiteForms (GetSiteFormsbyJob, §5.3): makes the job's
-- forms of @ObjectType exactly the forms in @SiteForms, a JSON array of
-- {siteFormId, objectId, name, status, createdAt, updatedAt, attributes}:
-- the job's other forms of that type are deleted, the rest updated or
-- inserted. Forms of the job under another object type are left alone.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowReplaceJobSiteForms
    @JobId      UNIQUEIDENTIFIER,
    @ObjectType NVARCHAR(50),
    @SiteForms  NVARCHAR(MAX)
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;

    DECLARE @now DATETIME2(3) = SYSUTCDATETIME();
    DECLARE @forms TABLE (
        siteFormId UNIQUEIDENTIFIER NOT NULL PRIMARY KEY,
        objectId   UNIQUEIDENTIFIER NULL,
        name       NVARCHAR(200)    NULL,
        status     NVARCHAR(50)     NULL,
        createdAt  DATETIME2(3)     NULL,
        updatedAt  DATETIME2(3)     NULL,
        attributes NVARCHAR(MAX)    NULL
    );

    INSERT INTO @forms (siteFormId, objectId, name, status, createdAt, updatedAt, attributes)
    SELECT siteFormId, objectId, name, status, createdAt, updatedAt, attributes
    FROM OPENJSON(@SiteForms) WITH (
        siteFormId UNIQUEIDENTIFIER '$.siteFormId',
        objectId   UNIQUEIDENTIFIER '$.objectId',
        name       NVARCHAR(200)    '$.name',
        status     NVARCHAR(50)     '$.status',
        createdAt  DATETIME2(3)     '$.createdAt',
        updatedAt  DATETIME2(3)     '$.updatedAt',
        attributes NVARCHAR(MAX)    '$.attributes'
    );

    BEGIN TRANSACTION;

    DELETE f
    FROM dbo.primeSiteForms AS f WITH (UPDLOCK, SERIALIZABLE)
    WHERE f.jobId = @JobId
      AND f.objectType = @ObjectType
      AND NOT EXISTS (SELECT 1 FROM @forms AS n WHERE n.siteFormId = f.siteFormId);

    UPDATE f
    SET jobId = @JobId, objectType = @ObjectType, objectId = n.objectId, name = n.name, status = n.status,
        createdAt = n.createdAt, updatedAt = n.updatedAt, attributes = n.attributes, syncedUTC = @now
    FROM dbo.primeSiteForms AS f WITH (UPDLOCK, SERIALIZABLE)
    INNER JOIN @forms AS n ON n.siteFormId = f.siteFormId;

    INSERT INTO dbo.primeSiteForms (siteFormId, jobId, objectType, objectId, name, status, createdAt, updatedAt,
        attributes, syncedUTC)
    SELECT n.siteFormId, @JobId, @ObjectType, n.objectId, n.name, n.status, n.createdAt, n.updatedAt,
        n.attributes, @now
    FROM @forms AS n
    WHERE NOT EXISTS (SELECT 1 FROM dbo.primeSiteForms AS f WITH (UPDLOCK, SERIALIZABLE)
                      WHERE f.siteFormId = n.siteFormId);

    COMMIT TRANSACTION;
END;
GO

-- spPrimeflowGetSiteForm: one site form; no rows when not mirrored.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowGetSiteForm
    @SiteFormId UNIQUEIDENTIFIER
AS
BEGIN
    SET NOCOUNT ON;

    SELECT siteFormId, jobId, objectType, objectId, name, status, createdAt, updatedAt, attributes, syncedUTC
    FROM dbo.primeSiteForms
    WHERE siteFormId = @SiteFormId;
END;
GO

-- spPrimeflowListJobSiteForms: every form of a job, oldest createdAt first.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowListJobSiteForms
    @JobId UNIQUEIDENTIFIER
AS
BEGIN
    SET NOCOUNT ON;

    SELECT siteFormId, jobId, objectType, objectId, name, status, createdAt, updatedAt, attributes, syncedUTC
    FROM dbo.primeSiteForms
    WHERE jobId = @JobId
    ORDER BY createdAt, siteFormId;
END;
GO

-- spPrimeflowReplaceJobEstimates (GetEstimatesByJob, §5.4): deletes the
-- job's estimates, categories and line items and inserts the ones given, in
-- one transaction (Prime gives no way to spot deletions, so the whole job is
-- swept). The rows come as three JSON arrays: @Estimates {estimateId,
-- status, total, createdAt, updatedAt, attributes}, @Categories
-- {categoryId, estimateId, name, sortOrder, attributes} and @Items {itemId,
-- categoryId, estimateId, description, quantity, unitPrice, total,
-- sortOrder, attributes}. Decimals come as text and are kept as
-- DECIMAL(19,4). An estimate given that is mirrored under another job
-- leaves that job with it.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowReplaceJobEstimates
    @JobId      UNIQUEIDENTIFIER,
    @Estimates  NVARCHAR(MAX),
    @Categories NVARCHAR(MAX),
    @Items      NVARCHAR(MAX)
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;

    DECLARE @now DATETIME2(3) = SYSUTCDATETIME();
    -- Not @estimates: variable names follow the instance's collation, which
    -- is case-insensitive by default, and @Estimates is the parameter.
    DECLARE @estimateRows TABLE (
        estimateId UNIQUEIDENTIFIER NOT NULL PRIMARY KEY,
        status     NVARCHAR(50)     NULL,
        total      NVARCHAR(50)     NULL,
        createdAt  DATETIME2(3)     NULL,
        updatedAt  DATETIME2(3)     NULL,
        attributes NVARCHAR(MAX)    NULL
    );

    INSERT INTO @estimateRows (estimateId, status, total, createdAt, updatedAt, attributes)
    SELECT estimateId, status, total, createdAt, updatedAt, attributes
    FROM OPENJSON(@Estimates) WITH (
        estimateId UNIQUEIDENTIFIER '$.estimateId',
        status     NVARCHAR(50)     '$.status',
        total      NVARCHAR(50)     '$.total',
        createdAt  DATETIME2(3)     '$.createdAt',
        updatedAt  DATETIME2(3)     '$.updatedAt',
        attributes NVARCHAR(MAX)    '$.attributes'
    );

    BEGIN TRANSACTION;

    DELETE FROM dbo.primeEstimateItems
    WHERE jobId = @JobId OR estimateId IN (SELECT estimateId FROM @estimateRows);
    DELETE FROM dbo.primeEstimateCategories
    WHERE jobId = @JobId OR estimateId IN (SELECT estimateId FROM @estimateRows);
    DELETE FROM dbo.primeEstimates
    WHERE jobId = @JobId OR estimateId IN (SELECT estimateId FROM @estimateRows);

    INSERT INTO dbo.primeEstimates (estimateId, jobId, status, total, createdAt, updatedAt, attributes, syncedUTC)
    SELECT estimateId, @JobId, status, TRY_CONVERT(DECIMAL(19,4), total), createdAt, updatedAt, attributes, @now
    FROM @estimateRows;

    INSERT INTO dbo.primeEstimateCategories (categoryId, estimateId, jobId, name, sortOrder, attributes, syncedUTC)
    SELECT categoryId, estimateId, @JobId, name, sortOrder, attributes, @now
    FROM OPENJSON(@Categories) WITH (
        categoryId UNIQUEIDENTIFIER '$.categoryId',
        estimateId UNIQUEIDENTIFIER '$.estimateId',
        name       NVARCHAR(200)    '$.name',
        sortOrder  INT              '$.sortOrder',
        attributes NVARCHAR(MAX)    '$.attributes'
    );

    INSERT INTO dbo.primeEstimateItems (itemId, categoryId, estimateId, jobId, description, quantity, unitPrice,
        total, sortOrder, attributes, syncedUTC)
    SELECT itemId, categoryId, estimateId, @JobId, description, TRY_CONVERT(DECIMAL(19,4), quantity),
        TRY_CONVERT(DECIMAL(19,4), unitPrice), TRY_CONVERT(DECIMAL(19,4), total), sortOrder, attributes, @now
    FROM OPENJSON(@Items) WITH (
        itemId      UNIQUEIDENTIFIER '$.itemId',
        categoryId  UNIQUEIDENTIFIER '$.categoryId',
        estimateId  UNIQUEIDENTIFIER '$.estimateId',
        description NVARCHAR(MAX)    '$.description',
        quantity    NVARCHAR(50)     '$.quantity',
        unitPrice   NVARCHAR(50)     '$.unitPrice',
        total       NVARCHAR(50)     '$.total',
        sortOrder   INT              '$.sortOrder',
        attributes  NVARCHAR(MAX)    '$.attributes'
    );

    COMMIT TRANSACTION;
END;
GO

-- spPrimeflowListJobEstimates: a job's estimates, oldest createdAt first,
-- then their categories, then their line items: three result sets.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowListJobEstimates
    @JobId UNIQUEIDENTIFIER
AS
BEGIN
    SET NOCOUNT ON;

    SELECT estimateId, jobId, status, total, createdAt, updatedAt, attributes, syncedUTC
    FROM dbo.primeEstimates
    WHERE jobId = @JobId
    ORDER BY createdAt, estimateId;

    SELECT categoryId, estimateId, jobId, name, sortOrder, attributes, syncedUTC
    FROM dbo.primeEstimateCategories
    WHERE jobId = @JobId
    ORDER BY estimateId, sortOrder, categoryId;

    SELECT itemId, categoryId, estimateId, jobId, description, quantity, unitPrice, total, sortOrder,
        attributes, syncedUTC
    FROM dbo.primeEstimateItems
    WHERE jobId = @JobId
    ORDER BY categoryId, sortOrder, itemId;
END;
GO

-- spPrimeflowSaveContact: inserts the contact or updates its row.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowSaveContact
    @ContactId  UNIQUEIDENTIFIER,
    @Name       NVARCHAR(200) = NULL,
    @FirstName  NVARCHAR(100) = NULL,
    @LastName   NVARCHAR(100) = NULL,
    @Email      NVARCHAR(320) = NULL,
    @Mobile     NVARCHAR(50)  = NULL,
    @Phone      NVARCHAR(50)  = NULL,
    @Attributes NVARCHAR(MAX) = NULL
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;

    DECLARE @now DATETIME2(3) = SYSUTCDATETIME();

    BEGIN TRANSACTION;

    UPDATE dbo.primeContacts WITH (UPDLOCK, SERIALIZABLE)
    SET name = @Name, firstName = @FirstName, lastName = @LastName, email = @Email, mobile = @Mobile,
        phone = @Phone, attributes = @Attributes, syncedUTC = @now
    WHERE contactId = @ContactId;

    IF @@ROWCOUNT = 0
        INSERT INTO dbo.primeContacts (contactId, name, firstName, lastName, email, mobile, phone, attributes, syncedUTC)
        VALUES (@ContactId, @Name, @FirstName, @LastName, @Email, @Mobile, @Phone, @Attributes, @now);

    COMMIT TRANSACTION;
END;
GO

-- spPrimeflowGetContact: one contact; no rows when not mirrored.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowGetContact
    @ContactId UNIQUEIDENTIFIER
AS
BEGIN
    SET NOCOUNT ON;

    SELECT contactId, name, firstName, lastName, email, mobile, phone, attributes, syncedUTC
    FROM dbo.primeContacts
    WHERE contactId = @ContactId;
END;
GO

-- spPrimeflowReplaceJobContactRelationships: makes the job's contact
-- relationships exactly those in @Relationships, a JSON array of
-- {contactRelationshipId, contactId, relationshipType, attributes}: Prime
-- lists a job's relationships as they are now, so one it no longer lists is
-- deleted.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowReplaceJobContactRelationships
    @JobId         UNIQUEIDENTIFIER,
    @Relationships NVARCHAR(MAX)
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;

    DECLARE @now DATETIME2(3) = SYSUTCDATETIME();
    DECLARE @rels TABLE (
        contactRelationshipId UNIQUEIDENTIFIER NOT NULL PRIMARY KEY,
        contactId             UNIQUEIDENTIFIER NULL,
        relationshipType      NVARCHAR(100)    NULL,
        attributes            NVARCHAR(MAX)    NULL
    );

    INSERT INTO @rels (contactRelationshipId, contactId, relationshipType, attributes)
    SELECT contactRelationshipId, contactId, relationshipType, attributes
    FROM OPENJSON(@Relationships) WITH (
        contactRelationshipId UNIQUEIDENTIFIER '$.contactRelationshipId',
        contactId             UNIQUEIDENTIFIER '$.contactId',
        relationshipType      NVARCHAR(100)    '$.relationshipType',
        attributes            NVARCHAR(MAX)    '$.attributes'
    );

    BEGIN TRANSACTION;

    DELETE r
    FROM dbo.primeContactRelationships AS r WITH (UPDLOCK, SERIALIZABLE)
    WHERE r.jobId = @JobId
      AND NOT EXISTS (SELECT 1 FROM @rels AS n WHERE n.contactRelationshipId = r.contactRelationshipId);

    UPDATE r
    SET jobId = @JobId, contactId = n.contactId, relationshipType = n.relationshipType,
        attributes = n.attributes, syncedUTC = @now
    FROM dbo.primeContactRelationships AS r WITH (UPDLOCK, SERIALIZABLE)
    INNER JOIN @rels AS n ON n.contactRelationshipId = r.contactRelationshipId;

    INSERT INTO dbo.primeContactRelationships (contactRelationshipId, jobId, contactId, relationshipType,
        attributes, syncedUTC)
    SELECT n.contactRelationshipId, @JobId, n.contactId, n.relationshipType, n.attributes, @now
    FROM @rels AS n
    WHERE NOT EXISTS (SELECT 1 FROM dbo.primeContactRelationships AS r WITH (UPDLOCK, SERIALIZABLE)
                      WHERE r.contactRelationshipId = n.contactRelationshipId);

    COMMIT TRANSACTION;
END;
GO

-- spPrimeflowListJobContactRelationships: a job's relationships, by id.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowListJobContactRelationships
    @JobId UNIQUEIDENTIFIER
AS
BEGIN
    SET NOCOUNT ON;

    SELECT contactRelationshipId, jobId, contactId, relationshipType, attributes, syncedUTC
    FROM dbo.primeContactRelationships
    WHERE jobId = @JobId
    ORDER BY contactRelationshipId;
END;
GO

-- spPrimeflowQueueJobSummaryNow (IAIData.QueueJobSummaryNow, §5.3 step 4):
-- makes the job's AI summary due at @Now, inserting its row or moving
-- QueuedFor to @Now (now when NULL). Earlier passes that found no triage
-- form pushed QueuedFor up to 36 hours out; this brings it back.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowQueueJobSummaryNow
    @JobId UNIQUEIDENTIFIER,
    @Now   DATETIME2(3) = NULL
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;

    DECLARE @at DATETIME2(3) = COALESCE(@Now, SYSUTCDATETIME());

    BEGIN TRANSACTION;

    UPDATE dbo.ethAIJobSummaryQueue WITH (UPDLOCK, SERIALIZABLE)
    SET QueuedFor = @at, updatedUTC = @at
    WHERE jobId = @JobId;

    IF @@ROWCOUNT = 0
        INSERT INTO dbo.ethAIJobSummaryQueue (jobId, QueuedFor, createdUTC, updatedUTC)
        VALUES (@JobId, @at, @at, @at);

    COMMIT TRANSACTION;
END;
GO

-- spPrimeflowGetJobSummaryQueue: a job's AI summary queue row; no rows when
-- the job was never queued.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowGetJobSummaryQueue
    @JobId UNIQUEIDENTIFIER
AS
BEGIN
    SET NOCOUNT ON;

    SELECT jobId, QueuedFor, createdUTC, updatedUTC
    FROM dbo.ethAIJobSummaryQueue
    WHERE jobId = @JobId;
END;
GO
