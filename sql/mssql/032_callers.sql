-- What the spec's other callers need (§7, §11): the n8n flows and the
-- portals call procedures of this database with the spec's parameters only,
-- and write mirror rows of their own. sql/README.md ("Callers outside
-- primeflow") gives the reading. Every batch is safe to run again.

-- primeflowSettings: values a procedure reads because its callers do not
-- pass them (the make-safe SMS recipient, MakesafeSMSRecipient, written by
-- primectl migrate from MAKESAFE_SMS_TO).
IF OBJECT_ID(N'dbo.primeflowSettings', N'U') IS NULL
CREATE TABLE dbo.primeflowSettings (
    name       NVARCHAR(100)  NOT NULL CONSTRAINT PK_primeflowSettings PRIMARY KEY,
    value      NVARCHAR(4000) NULL,
    updatedUTC DATETIME2(3)   NOT NULL CONSTRAINT DF_primeflowSettings_updatedUTC DEFAULT SYSUTCDATETIME()
);
GO

-- spPrimeflowSetSetting: writes a setting (the adapter refuses a name or a
-- value longer than its column before it calls).
CREATE OR ALTER PROCEDURE dbo.spPrimeflowSetSetting
    @Name  NVARCHAR(100),
    @Value NVARCHAR(4000) = NULL
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;

    BEGIN TRANSACTION;
    UPDATE dbo.primeflowSettings WITH (UPDLOCK, SERIALIZABLE)
    SET value = @Value, updatedUTC = SYSUTCDATETIME()
    WHERE name = @Name;
    IF @@ROWCOUNT = 0
        INSERT INTO dbo.primeflowSettings (name, value, updatedUTC) VALUES (@Name, @Value, SYSUTCDATETIME());
    COMMIT TRANSACTION;
END;
GO

-- spPrimeflowGetSetting: one setting; no rows when it was never written.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowGetSetting
    @Name NVARCHAR(100)
AS
BEGIN
    SET NOCOUNT ON;

    SELECT value FROM dbo.primeflowSettings WHERE name = @Name;
END;
GO

-- isMakeSafe is derived from the allocation's own allocationType, so that a
-- row any writer saves (the n8n allocation syncs, §6) is read right by the
-- make-safe detection: "Make Safe" without regard to case, spaces, hyphens
-- or underscores, the rule of prime.Allocation.IsMakeSafe. A plain column
-- (020, or a live table's own) is replaced: its default constraint, if any,
-- goes first.
IF COLUMNPROPERTY(OBJECT_ID(N'dbo.primeAllocations'), N'isMakeSafe', N'IsComputed') = 0
BEGIN
    DECLARE @default SYSNAME = (
        SELECT dc.name
        FROM sys.default_constraints AS dc
        INNER JOIN sys.columns AS c ON c.object_id = dc.parent_object_id AND c.column_id = dc.parent_column_id
        WHERE dc.parent_object_id = OBJECT_ID(N'dbo.primeAllocations') AND c.name = N'isMakeSafe');
    IF @default IS NOT NULL
    BEGIN
        DECLARE @drop NVARCHAR(400) = N'ALTER TABLE dbo.primeAllocations DROP CONSTRAINT ' + QUOTENAME(@default) + N';';
        EXEC sys.sp_executesql @drop;
    END;
    ALTER TABLE dbo.primeAllocations DROP COLUMN isMakeSafe;
END;
GO
IF COL_LENGTH(N'dbo.primeAllocations', N'isMakeSafe') IS NULL
ALTER TABLE dbo.primeAllocations ADD isMakeSafe AS
    (CONVERT(BIT, CASE WHEN LOWER(REPLACE(REPLACE(REPLACE(allocationType, N' ', N''), N'-', N''), N'_', N'')) = N'makesafe'
                       THEN 1 ELSE 0 END));
GO

-- The rungs still to fire, for the sweep that fires those a caller outside
-- primeflow queued (no JetStream schedule holds them).
IF NOT EXISTS (SELECT 1 FROM sys.indexes
               WHERE object_id = OBJECT_ID(N'dbo.makesafeAllocationCheck') AND name = N'IX_makesafeAllocationCheck_due')
    CREATE NONCLUSTERED INDEX IX_makesafeAllocationCheck_due
        ON dbo.makesafeAllocationCheck (DueUTC)
        WHERE FiredUTC IS NULL;
GO

-- spMakesafeListDueAllocationChecks: up to @Top rungs that have not fired and
-- were due before @DueBefore, earliest first.
CREATE OR ALTER PROCEDURE dbo.spMakesafeListDueAllocationChecks
    @DueBefore DATETIME2(3),
    @Top       INT = 100
AS
BEGIN
    SET NOCOUNT ON;

    SELECT TOP (@Top) PrimeJobID, Rung, DueUTC, QueuedUTC, FiredUTC, Outcome
    FROM dbo.makesafeAllocationCheck
    WHERE FiredUTC IS NULL AND DueUTC < @DueBefore
    ORDER BY DueUTC, PrimeJobID, Rung;
END;
GO
