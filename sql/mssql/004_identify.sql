-- spPrimeIdentifyGuid (§4.2): which mirror tables hold a GUID. Prime labels
-- GUIDs wrongly (an appointmentTypeId that is an appointment's id), and GUIDs
-- are unique across entity types, so handlers look a value up rather than
-- trust its label. The tables are store.IdentifyTables, in its order; a new
-- entity type goes in both (TestIdentifyProcListsTheTables holds them equal).

-- Returns one row (entity) for each table the GUID is in, in probe order.
-- With @ExpectedEntity, the expected table is probed first: every branch of
-- the probe is guarded by @ExpectedEntity = N'<table>', and OPTION (RECOMPILE)
-- lets SQL Server put the parameter's value in the plan, so the other
-- branches fold away and the expected case costs one clustered index seek
-- however long the list grows. Only when that probe misses (or no entity is
-- expected, or the name is none of the tables) does the full sweep run, a
-- seek a table, with a plan that is cached.
--
-- The probe lands in a table variable rather than a scalar variable:
-- SQL Server does not embed parameters in a statement that assigns a variable,
-- and the branches would stay in the plan. The table variable also keeps the
-- answer to one result set whichever way it was found.
CREATE OR ALTER PROCEDURE dbo.spPrimeIdentifyGuid
    @Id             UNIQUEIDENTIFIER,
    @ExpectedEntity NVARCHAR(128) = NULL
AS
BEGIN
    SET NOCOUNT ON;

    DECLARE @found TABLE (probeOrder TINYINT NOT NULL PRIMARY KEY, entity NVARCHAR(128) NOT NULL);

    IF @ExpectedEntity IS NOT NULL
        INSERT INTO @found (probeOrder, entity)
        SELECT probe.probeOrder, probe.entity
        FROM (
                      SELECT 1, N'primeJobs' FROM dbo.primeJobs WHERE @ExpectedEntity = N'primeJobs' AND jobId = @Id
            UNION ALL SELECT 2, N'primeAppointments' FROM dbo.primeAppointments WHERE @ExpectedEntity = N'primeAppointments' AND appointmentId = @Id
            UNION ALL SELECT 3, N'primeAppointmentType' FROM dbo.primeAppointmentType WHERE @ExpectedEntity = N'primeAppointmentType' AND appointmentTypeId = @Id
            UNION ALL SELECT 4, N'primeStatuses' FROM dbo.primeStatuses WHERE @ExpectedEntity = N'primeStatuses' AND statusId = @Id
            UNION ALL SELECT 5, N'primeUsers' FROM dbo.primeUsers WHERE @ExpectedEntity = N'primeUsers' AND userId = @Id
            UNION ALL SELECT 6, N'primeContacts' FROM dbo.primeContacts WHERE @ExpectedEntity = N'primeContacts' AND contactId = @Id
            UNION ALL SELECT 7, N'primeAllocations' FROM dbo.primeAllocations WHERE @ExpectedEntity = N'primeAllocations' AND allocationId = @Id
            UNION ALL SELECT 8, N'primeSiteForms' FROM dbo.primeSiteForms WHERE @ExpectedEntity = N'primeSiteForms' AND siteFormId = @Id
            UNION ALL SELECT 9, N'primeEstimates' FROM dbo.primeEstimates WHERE @ExpectedEntity = N'primeEstimates' AND estimateId = @Id
            UNION ALL SELECT 10, N'primeWorkOrders' FROM dbo.primeWorkOrders WHERE @ExpectedEntity = N'primeWorkOrders' AND workOrderId = @Id
            UNION ALL SELECT 11, N'primeAttachment' FROM dbo.primeAttachment WHERE @ExpectedEntity = N'primeAttachment' AND attachmentId = @Id
            UNION ALL SELECT 12, N'primeNotifications' FROM dbo.primeNotifications WHERE @ExpectedEntity = N'primeNotifications' AND notificationId = @Id
            UNION ALL SELECT 13, N'primeSchedule' FROM dbo.primeSchedule WHERE @ExpectedEntity = N'primeSchedule' AND scheduleId = @Id
            UNION ALL SELECT 14, N'primeScheduleItem' FROM dbo.primeScheduleItem WHERE @ExpectedEntity = N'primeScheduleItem' AND scheduleItemId = @Id
            UNION ALL SELECT 15, N'primeFilterTags' FROM dbo.primeFilterTags WHERE @ExpectedEntity = N'primeFilterTags' AND filterTagId = @Id
            UNION ALL SELECT 16, N'primePerils' FROM dbo.primePerils WHERE @ExpectedEntity = N'primePerils' AND perilId = @Id
        ) AS probe (probeOrder, entity)
        OPTION (RECOMPILE);

    IF NOT EXISTS (SELECT 1 FROM @found)
        INSERT INTO @found (probeOrder, entity)
        SELECT sweep.probeOrder, sweep.entity
        FROM (
                      SELECT 1, N'primeJobs' FROM dbo.primeJobs WHERE jobId = @Id
            UNION ALL SELECT 2, N'primeAppointments' FROM dbo.primeAppointments WHERE appointmentId = @Id
            UNION ALL SELECT 3, N'primeAppointmentType' FROM dbo.primeAppointmentType WHERE appointmentTypeId = @Id
            UNION ALL SELECT 4, N'primeStatuses' FROM dbo.primeStatuses WHERE statusId = @Id
            UNION ALL SELECT 5, N'primeUsers' FROM dbo.primeUsers WHERE userId = @Id
            UNION ALL SELECT 6, N'primeContacts' FROM dbo.primeContacts WHERE contactId = @Id
            UNION ALL SELECT 7, N'primeAllocations' FROM dbo.primeAllocations WHERE allocationId = @Id
            UNION ALL SELECT 8, N'primeSiteForms' FROM dbo.primeSiteForms WHERE siteFormId = @Id
            UNION ALL SELECT 9, N'primeEstimates' FROM dbo.primeEstimates WHERE estimateId = @Id
            UNION ALL SELECT 10, N'primeWorkOrders' FROM dbo.primeWorkOrders WHERE workOrderId = @Id
            UNION ALL SELECT 11, N'primeAttachment' FROM dbo.primeAttachment WHERE attachmentId = @Id
            UNION ALL SELECT 12, N'primeNotifications' FROM dbo.primeNotifications WHERE notificationId = @Id
            UNION ALL SELECT 13, N'primeSchedule' FROM dbo.primeSchedule WHERE scheduleId = @Id
            UNION ALL SELECT 14, N'primeScheduleItem' FROM dbo.primeScheduleItem WHERE scheduleItemId = @Id
            UNION ALL SELECT 15, N'primeFilterTags' FROM dbo.primeFilterTags WHERE filterTagId = @Id
            UNION ALL SELECT 16, N'primePerils' FROM dbo.primePerils WHERE perilId = @Id
        ) AS sweep (probeOrder, entity);

    SELECT entity FROM @found ORDER BY probeOrder;
END;
GO
