-- OptimoRoute (spec §5.2 step 5, §8): the orders primeflow made from
-- appointments and work orders, the plan state of each date, the queues
-- derived from them, and the procedures the spec names
-- (spOptimoRouteUpsertOrder → spOptimoRoutePlanUpsert, spOptimoRoutePlanGetQueue,
-- spOptimoRoutePlanSetStatus @PlanDate, @Status, @OnlyIfStatus). Their bodies
-- live in another project; sql/README.md ("OptimoRoute") says how each was
-- read. Every batch is safe to run again.

-- One row an order: where it came from, the source version last handled,
-- what OptimoRoute holds, and what the routes of its date say of it.
IF OBJECT_ID(N'dbo.optimoRouteOrder', N'U') IS NULL
CREATE TABLE dbo.optimoRouteOrder (
    orderNo       NVARCHAR(100)    NOT NULL CONSTRAINT PK_optimoRouteOrder PRIMARY KEY,
    appointmentId UNIQUEIDENTIFIER NULL,
    workOrderId   UNIQUEIDENTIFIER NULL,
    jobId         UNIQUEIDENTIFIER NULL,
    version       BIGINT           NULL,
    orderDate     DATE             NULL,
    duration      INT              NULL,
    timeFrom      NVARCHAR(5)      NULL,
    timeTo        NVARCHAR(5)      NULL,
    address       NVARCHAR(400)    NULL,
    assignedTo    NVARCHAR(100)    NULL,
    state         NVARCHAR(20)     NOT NULL CONSTRAINT DF_optimoRouteOrder_state DEFAULT N'Active',
    errorText     NVARCHAR(1000)   NULL,
    optimoId      NVARCHAR(100)    NULL,
    scheduledUTC  DATETIME2(3)     NULL,
    driverSerial  NVARCHAR(100)    NULL,
    driverName    NVARCHAR(200)    NULL,
    routesUTC     DATETIME2(3)     NULL,
    refreshedUTC  DATETIME2(3)     NULL,
    createdUTC    DATETIME2(3)     NOT NULL CONSTRAINT DF_optimoRouteOrder_createdUTC DEFAULT SYSUTCDATETIME(),
    updatedUTC    DATETIME2(3)     NOT NULL CONSTRAINT DF_optimoRouteOrder_updatedUTC DEFAULT SYSUTCDATETIME()
);
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes
               WHERE object_id = OBJECT_ID(N'dbo.optimoRouteOrder') AND name = N'IX_optimoRouteOrder_appointmentId')
    CREATE NONCLUSTERED INDEX IX_optimoRouteOrder_appointmentId
        ON dbo.optimoRouteOrder (appointmentId)
        WHERE appointmentId IS NOT NULL;
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes
               WHERE object_id = OBJECT_ID(N'dbo.optimoRouteOrder') AND name = N'IX_optimoRouteOrder_workOrderId')
    CREATE NONCLUSTERED INDEX IX_optimoRouteOrder_workOrderId
        ON dbo.optimoRouteOrder (workOrderId)
        WHERE workOrderId IS NOT NULL;
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes
               WHERE object_id = OBJECT_ID(N'dbo.optimoRouteOrder') AND name = N'IX_optimoRouteOrder_orderDate')
    CREATE NONCLUSTERED INDEX IX_optimoRouteOrder_orderDate
        ON dbo.optimoRouteOrder (orderDate);
GO

-- One row a date (§8): NotPlanned queues it for planning. The table is live
-- before primeflow arrives (§8, §11), so the columns beyond PlanDate and
-- PlanStatus are added when missing.
IF OBJECT_ID(N'dbo.optimoRoutePlan', N'U') IS NULL
CREATE TABLE dbo.optimoRoutePlan (
    PlanDate    DATE           NOT NULL CONSTRAINT PK_optimoRoutePlan PRIMARY KEY,
    PlanStatus  NVARCHAR(100)  NOT NULL,
    PlanningId  BIGINT         NULL,
    ErrorText   NVARCHAR(1000) NULL,
    QueuedUTC   DATETIME2(3)   NULL,
    StartedUTC  DATETIME2(3)   NULL,
    FinishedUTC DATETIME2(3)   NULL,
    UpdatedUTC  DATETIME2(3)   NOT NULL CONSTRAINT DF_optimoRoutePlan_UpdatedUTC DEFAULT SYSUTCDATETIME()
);
GO

IF COL_LENGTH(N'dbo.optimoRoutePlan', N'PlanningId') IS NULL
    ALTER TABLE dbo.optimoRoutePlan ADD PlanningId BIGINT NULL;
GO
IF COL_LENGTH(N'dbo.optimoRoutePlan', N'ErrorText') IS NULL
    ALTER TABLE dbo.optimoRoutePlan ADD ErrorText NVARCHAR(1000) NULL;
GO
IF COL_LENGTH(N'dbo.optimoRoutePlan', N'QueuedUTC') IS NULL
    ALTER TABLE dbo.optimoRoutePlan ADD QueuedUTC DATETIME2(3) NULL;
GO
IF COL_LENGTH(N'dbo.optimoRoutePlan', N'StartedUTC') IS NULL
    ALTER TABLE dbo.optimoRoutePlan ADD StartedUTC DATETIME2(3) NULL;
GO
IF COL_LENGTH(N'dbo.optimoRoutePlan', N'FinishedUTC') IS NULL
    ALTER TABLE dbo.optimoRoutePlan ADD FinishedUTC DATETIME2(3) NULL;
GO
IF COL_LENGTH(N'dbo.optimoRoutePlan', N'UpdatedUTC') IS NULL
    ALTER TABLE dbo.optimoRoutePlan ADD UpdatedUTC DATETIME2(3) NOT NULL
        CONSTRAINT DF_optimoRoutePlan_UpdatedUTC DEFAULT SYSUTCDATETIME();
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes
               WHERE object_id = OBJECT_ID(N'dbo.optimoRoutePlan') AND name = N'IX_optimoRoutePlan_PlanStatus')
    CREATE NONCLUSTERED INDEX IX_optimoRoutePlan_PlanStatus
        ON dbo.optimoRoutePlan (PlanStatus);
GO

-- Marks a date NotPlanned, which queues it for planning (§8). The date's
-- previous plan no longer covers it: its planning id and error go.
CREATE OR ALTER PROCEDURE dbo.spOptimoRoutePlanUpsert
    @PlanDate DATE
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    DECLARE @now DATETIME2(3) = SYSUTCDATETIME();
    BEGIN TRANSACTION;
    UPDATE dbo.optimoRoutePlan WITH (UPDLOCK, SERIALIZABLE)
       SET PlanStatus = N'NotPlanned', PlanningId = NULL, ErrorText = NULL, QueuedUTC = @now, UpdatedUTC = @now
     WHERE PlanDate = @PlanDate;
    IF @@ROWCOUNT = 0
        INSERT INTO dbo.optimoRoutePlan (PlanDate, PlanStatus, QueuedUTC, UpdatedUTC)
        VALUES (@PlanDate, N'NotPlanned', @now, @now);
    COMMIT TRANSACTION;
END;
GO

-- Every NotPlanned date, earliest first (§8).
CREATE OR ALTER PROCEDURE dbo.spOptimoRoutePlanGetQueue
AS
BEGIN
    SET NOCOUNT ON;
    SELECT PlanDate FROM dbo.optimoRoutePlan WHERE PlanStatus = N'NotPlanned' ORDER BY PlanDate;
END;
GO

-- Writes a date's status only while the date is still in @OnlyIfStatus
-- (§8.4); NULL writes unconditionally and creates a missing row. Returns
-- whether it wrote.
CREATE OR ALTER PROCEDURE dbo.spOptimoRoutePlanSetStatus
    @PlanDate     DATE,
    @Status       NVARCHAR(100),
    @OnlyIfStatus NVARCHAR(100)  = NULL,
    @PlanningId   BIGINT         = NULL,
    @ErrorText    NVARCHAR(1000) = NULL
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    DECLARE @now DATETIME2(3) = SYSUTCDATETIME();
    DECLARE @written INT;
    DECLARE @final BIT = CASE WHEN @Status IN (N'NotPlanned', N'Planning') THEN 0 ELSE 1 END;
    BEGIN TRANSACTION;
    UPDATE dbo.optimoRoutePlan WITH (UPDLOCK, SERIALIZABLE)
       SET StartedUTC  = CASE WHEN @Status = N'Planning' AND PlanStatus <> N'Planning' THEN @now ELSE StartedUTC END,
           FinishedUTC = CASE WHEN @final = 1 THEN @now ELSE FinishedUTC END,
           PlanStatus  = @Status,
           PlanningId  = COALESCE(@PlanningId, PlanningId),
           ErrorText   = LEFT(@ErrorText, 1000),
           UpdatedUTC  = @now
     WHERE PlanDate = @PlanDate
       AND (@OnlyIfStatus IS NULL OR PlanStatus = @OnlyIfStatus);
    SET @written = @@ROWCOUNT;
    IF @written = 0 AND @OnlyIfStatus IS NULL
    BEGIN
        INSERT INTO dbo.optimoRoutePlan (PlanDate, PlanStatus, PlanningId, ErrorText, StartedUTC, FinishedUTC, UpdatedUTC)
        VALUES (@PlanDate, @Status, @PlanningId, LEFT(@ErrorText, 1000),
                CASE WHEN @Status = N'Planning' THEN @now END,
                CASE WHEN @final = 1 THEN @now END, @now);
        SET @written = 1;
    END;
    COMMIT TRANSACTION;
    SELECT CAST(CASE WHEN @written > 0 THEN 1 ELSE 0 END AS BIT) AS written;
END;
GO

-- One date's row.
CREATE OR ALTER PROCEDURE dbo.spOptimoRoutePlanGet
    @PlanDate DATE
AS
BEGIN
    SET NOCOUNT ON;
    SELECT PlanDate, PlanStatus, PlanningId, ErrorText, QueuedUTC, StartedUTC, FinishedUTC, UpdatedUTC
      FROM dbo.optimoRoutePlan WHERE PlanDate = @PlanDate;
END;
GO

-- The status poll's queue: the dates in Planning.
CREATE OR ALTER PROCEDURE dbo.spOptimoRoutePlanGetPlanningQueue
AS
BEGIN
    SET NOCOUNT ON;
    SELECT PlanDate, PlanStatus, PlanningId, ErrorText, QueuedUTC, StartedUTC, FinishedUTC, UpdatedUTC
      FROM dbo.optimoRoutePlan WHERE PlanStatus = N'Planning' ORDER BY PlanDate;
END;
GO

-- The routes-refresh queue: the PlanningCompleted dates, whose routes are to
-- be read back.
CREATE OR ALTER PROCEDURE dbo.spOptimoRouteGetRoutesRefreshQueue
AS
BEGIN
    SET NOCOUNT ON;
    SELECT PlanDate FROM dbo.optimoRoutePlan WHERE PlanStatus = N'PlanningCompleted' ORDER BY PlanDate;
END;
GO

-- Records an order whose OptimoRoute copy was just written (@State Active) or
-- deleted (@State Deleted), and marks for replanning the order's date when it
-- is active and the date it had when it was active there before and is not
-- now: creating, changing, moving or deleting an order marks its date (§8).
-- The read-back columns stay while the order stays active on its date.
CREATE OR ALTER PROCEDURE dbo.spOptimoRouteUpsertOrder
    @OrderNo       NVARCHAR(100),
    @State         NVARCHAR(20),
    @AppointmentId UNIQUEIDENTIFIER = NULL,
    @WorkOrderId   UNIQUEIDENTIFIER = NULL,
    @JobId         UNIQUEIDENTIFIER = NULL,
    @Version       BIGINT           = NULL,
    @OrderDate     DATE             = NULL,
    @Duration      INT              = NULL,
    @TimeFrom      NVARCHAR(5)      = NULL,
    @TimeTo        NVARCHAR(5)      = NULL,
    @Address       NVARCHAR(400)    = NULL,
    @AssignedTo    NVARCHAR(100)    = NULL,
    @ErrorText     NVARCHAR(1000)   = NULL,
    @OptimoId      NVARCHAR(100)    = NULL
AS
BEGIN
    SET NOCOUNT ON;
    -- The check comes before XACT_ABORT ON: THROW honours it, and with it ON
    -- a refused call would roll back its caller's transaction too. NOT IN
    -- alone lets a NULL through.
    SET XACT_ABORT OFF;
    IF @State IS NULL OR @State NOT IN (N'Active', N'Deleted')
        THROW 51040, N'spOptimoRouteUpsertOrder: @State must be Active or Deleted.', 1;
    SET XACT_ABORT ON;
    DECLARE @now DATETIME2(3) = SYSUTCDATETIME();
    DECLARE @found BIT = 0, @prevState NVARCHAR(20), @prevDate DATE;
    BEGIN TRANSACTION;
    SELECT @found = 1, @prevState = state, @prevDate = orderDate
      FROM dbo.optimoRouteOrder WITH (UPDLOCK, SERIALIZABLE)
     WHERE orderNo = @OrderNo;
    DECLARE @keep BIT = CASE WHEN @State = N'Active' AND @prevState = N'Active' AND @prevDate = @OrderDate THEN 1 ELSE 0 END;
    IF @found = 1
        UPDATE dbo.optimoRouteOrder
           SET appointmentId = @AppointmentId, workOrderId = @WorkOrderId, jobId = @JobId, version = @Version,
               orderDate = @OrderDate, duration = @Duration, timeFrom = @TimeFrom, timeTo = @TimeTo,
               address = @Address, assignedTo = @AssignedTo, state = @State, errorText = LEFT(@ErrorText, 1000),
               optimoId = COALESCE(@OptimoId, optimoId),
               scheduledUTC = CASE WHEN @keep = 1 THEN scheduledUTC END,
               driverSerial = CASE WHEN @keep = 1 THEN driverSerial END,
               driverName   = CASE WHEN @keep = 1 THEN driverName END,
               routesUTC    = CASE WHEN @keep = 1 THEN routesUTC END,
               refreshedUTC = CASE WHEN @keep = 1 THEN refreshedUTC END,
               updatedUTC = @now
         WHERE orderNo = @OrderNo;
    ELSE
        INSERT INTO dbo.optimoRouteOrder
            (orderNo, appointmentId, workOrderId, jobId, version, orderDate, duration, timeFrom, timeTo, address,
             assignedTo, state, errorText, optimoId, createdUTC, updatedUTC)
        VALUES (@OrderNo, @AppointmentId, @WorkOrderId, @JobId, @Version, @OrderDate, @Duration, @TimeFrom, @TimeTo,
                @Address, @AssignedTo, @State, LEFT(@ErrorText, 1000), @OptimoId, @now, @now);
    IF @State = N'Active' AND @OrderDate IS NOT NULL
        EXEC dbo.spOptimoRoutePlanUpsert @PlanDate = @OrderDate;
    IF @prevState = N'Active' AND @prevDate IS NOT NULL
       AND (@State <> N'Active' OR @OrderDate IS NULL OR @prevDate <> @OrderDate)
        EXEC dbo.spOptimoRoutePlanUpsert @PlanDate = @prevDate;
    COMMIT TRANSACTION;
END;
GO

-- Records that a version of an order's source was not written (refused by
-- OptimoRoute, or not an order at all): what OptimoRoute holds stays as
-- recorded, no date is marked. A new row holds no order (Deleted).
CREATE OR ALTER PROCEDURE dbo.spOptimoRouteRecordOrderFailure
    @OrderNo       NVARCHAR(100),
    @Version       BIGINT,
    @ErrorText     NVARCHAR(1000),
    @AppointmentId UNIQUEIDENTIFIER = NULL,
    @WorkOrderId   UNIQUEIDENTIFIER = NULL,
    @JobId         UNIQUEIDENTIFIER = NULL
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    DECLARE @now DATETIME2(3) = SYSUTCDATETIME();
    BEGIN TRANSACTION;
    UPDATE dbo.optimoRouteOrder WITH (UPDLOCK, SERIALIZABLE)
       SET appointmentId = COALESCE(@AppointmentId, appointmentId),
           workOrderId = COALESCE(@WorkOrderId, workOrderId),
           jobId = COALESCE(@JobId, jobId),
           version = @Version, errorText = LEFT(@ErrorText, 1000), updatedUTC = @now
     WHERE orderNo = @OrderNo;
    IF @@ROWCOUNT = 0
        INSERT INTO dbo.optimoRouteOrder
            (orderNo, appointmentId, workOrderId, jobId, version, state, errorText, createdUTC, updatedUTC)
        VALUES (@OrderNo, @AppointmentId, @WorkOrderId, @JobId, @Version, N'Deleted', LEFT(@ErrorText, 1000), @now, @now);
    COMMIT TRANSACTION;
END;
GO

-- One order's row.
CREATE OR ALTER PROCEDURE dbo.spOptimoRouteGetOrder
    @OrderNo NVARCHAR(100)
AS
BEGIN
    SET NOCOUNT ON;
    SELECT orderNo, appointmentId, workOrderId, jobId, version, orderDate, duration, timeFrom, timeTo, address,
           assignedTo, state, errorText, optimoId, scheduledUTC, driverSerial, driverName, routesUTC,
           refreshedUTC, createdUTC, updatedUTC
      FROM dbo.optimoRouteOrder WHERE orderNo = @OrderNo;
END;
GO

-- The routes read-back, first half: no order of the date is scheduled, and
-- every one was read back at @RoutesUTC. spOptimoRouteSetOrderSchedule then
-- stores each scheduled order; the adapter runs both in one transaction.
CREATE OR ALTER PROCEDURE dbo.spOptimoRouteClearSchedules
    @PlanDate  DATE,
    @RoutesUTC DATETIME2(3)
AS
BEGIN
    SET NOCOUNT ON;
    UPDATE dbo.optimoRouteOrder
       SET scheduledUTC = NULL, driverSerial = NULL, driverName = NULL, routesUTC = @RoutesUTC
     WHERE orderDate = @PlanDate;
END;
GO

-- The routes read-back, second half: one order's scheduled time and driver,
-- while the order is still on the date read.
CREATE OR ALTER PROCEDURE dbo.spOptimoRouteSetOrderSchedule
    @OrderNo      NVARCHAR(100),
    @PlanDate     DATE,
    @ScheduledUTC DATETIME2(3)  = NULL,
    @DriverSerial NVARCHAR(100) = NULL,
    @DriverName   NVARCHAR(200) = NULL
AS
BEGIN
    SET NOCOUNT ON;
    UPDATE dbo.optimoRouteOrder
       SET scheduledUTC = @ScheduledUTC, driverSerial = @DriverSerial, driverName = @DriverName
     WHERE orderNo = @OrderNo AND orderDate = @PlanDate;
END;
GO

-- The order-refresh queue: active orders on a RoutesCompleted date that the
-- latest routes left unscheduled and that were not refreshed since.
CREATE OR ALTER PROCEDURE dbo.spOptimoRouteGetOrderRefreshQueue
    @Top INT = 500
AS
BEGIN
    SET NOCOUNT ON;
    SELECT TOP (@Top)
           o.orderNo, o.appointmentId, o.workOrderId, o.jobId, o.version, o.orderDate, o.duration, o.timeFrom,
           o.timeTo, o.address, o.assignedTo, o.state, o.errorText, o.optimoId, o.scheduledUTC, o.driverSerial,
           o.driverName, o.routesUTC, o.refreshedUTC, o.createdUTC, o.updatedUTC
      FROM dbo.optimoRouteOrder o
      JOIN dbo.optimoRoutePlan p ON p.PlanDate = o.orderDate
     WHERE o.state = N'Active' AND p.PlanStatus = N'RoutesCompleted' AND o.routesUTC IS NOT NULL
       AND o.scheduledUTC IS NULL AND (o.refreshedUTC IS NULL OR o.refreshedUTC < o.routesUTC)
     ORDER BY o.orderNo;
END;
GO

-- Records what the order refresh found: the order (stamp), or nothing (the
-- order is recorded deleted with no version, so its source's queue writes it
-- again).
CREATE OR ALTER PROCEDURE dbo.spOptimoRouteSetOrderRefreshed
    @OrderNo      NVARCHAR(100),
    @Found        BIT,
    @RefreshedUTC DATETIME2(3),
    @OptimoId     NVARCHAR(100) = NULL
AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @now DATETIME2(3) = SYSUTCDATETIME();
    IF @Found = 1
        UPDATE dbo.optimoRouteOrder
           SET refreshedUTC = @RefreshedUTC, optimoId = COALESCE(@OptimoId, optimoId), updatedUTC = @now
         WHERE orderNo = @OrderNo;
    ELSE
        UPDATE dbo.optimoRouteOrder
           SET state = N'Deleted', version = NULL, errorText = N'not found in OptimoRoute',
               scheduledUTC = NULL, driverSerial = NULL, driverName = NULL, refreshedUTC = @RefreshedUTC,
               optimoId = COALESCE(@OptimoId, optimoId), updatedUTC = @now
         WHERE orderNo = @OrderNo;
END;
GO

-- The appointment queue (§5.2): appointments whose order is missing or made
-- from another version, limited to those starting at or after @FromUTC unless
-- their order is active; and active orders whose appointment is gone from the
-- mirror (gone = 1). Each comes with its job's address and its order.
-- @AfterAppointmentId pages the queue: only the rows after it, NULL from the
-- start. A handled appointment can stay queued (no address: retried every
-- run), so a caller reads on after the last id of the page before, not from
-- the start again; uniqueidentifier compares in the order it sorts.
CREATE OR ALTER PROCEDURE dbo.spOptimoRouteGetAppointmentQueue
    @FromUTC            DATETIME2(3),
    @Top                INT              = 500,
    @AfterAppointmentId UNIQUEIDENTIFIER = NULL
AS
BEGIN
    SET NOCOUNT ON;
    SELECT TOP (@Top) q.*
      FROM (
        SELECT a.appointmentId, a.jobId, a.startDate, a.endDate, a.status, a.version, a.assignedId,
               a.description, a.notes, CAST(0 AS BIT) AS gone,
               CAST(CASE WHEN j.jobId IS NULL THEN 0 ELSE 1 END AS BIT) AS jobFound, j.jobNumber,
               j.addressLine1, j.addressLine2, j.suburb, j.state AS jobState, j.postcode,
               o.orderNo, o.version AS orderVersion, o.orderDate, o.state AS orderState,
               o.errorText AS orderErrorText, o.optimoId AS orderOptimoId
          FROM dbo.primeAppointments a
          LEFT JOIN dbo.primeJobs j ON j.jobId = a.jobId
          LEFT JOIN dbo.optimoRouteOrder o ON o.appointmentId = a.appointmentId
         WHERE (o.orderNo IS NULL OR o.version IS NULL OR o.version <> COALESCE(a.version, 0))
           AND (a.startDate >= @FromUTC OR o.state = N'Active')
        UNION ALL
        SELECT o.appointmentId, o.jobId, NULL, NULL, NULL, NULL, NULL, NULL, NULL, CAST(1 AS BIT),
               CAST(0 AS BIT), NULL, NULL, NULL, NULL, NULL, NULL,
               o.orderNo, o.version, o.orderDate, o.state, o.errorText, o.optimoId
          FROM dbo.optimoRouteOrder o
         WHERE o.appointmentId IS NOT NULL AND o.state = N'Active'
           AND NOT EXISTS (SELECT 1 FROM dbo.primeAppointments a WHERE a.appointmentId = o.appointmentId)
      ) AS q
     WHERE @AfterAppointmentId IS NULL OR q.appointmentId > @AfterAppointmentId
     ORDER BY q.appointmentId;
END;
GO

-- The work-order queue: the same over primeWorkOrders, whose dates are in
-- the attributes JSON the caller reads; paged by @AfterWorkOrderId.
CREATE OR ALTER PROCEDURE dbo.spOptimoRouteGetWorkOrderQueue
    @Top              INT              = 500,
    @AfterWorkOrderId UNIQUEIDENTIFIER = NULL
AS
BEGIN
    SET NOCOUNT ON;
    SELECT TOP (@Top) q.*
      FROM (
        SELECT w.workOrderId, w.jobId, w.status, w.version, w.attributes, CAST(0 AS BIT) AS gone,
               CAST(CASE WHEN j.jobId IS NULL THEN 0 ELSE 1 END AS BIT) AS jobFound, j.jobNumber,
               j.addressLine1, j.addressLine2, j.suburb, j.state AS jobState, j.postcode,
               o.orderNo, o.version AS orderVersion, o.orderDate, o.state AS orderState,
               o.errorText AS orderErrorText, o.optimoId AS orderOptimoId
          FROM dbo.primeWorkOrders w
          LEFT JOIN dbo.primeJobs j ON j.jobId = w.jobId
          LEFT JOIN dbo.optimoRouteOrder o ON o.workOrderId = w.workOrderId
         WHERE o.orderNo IS NULL OR o.version IS NULL OR o.version <> COALESCE(w.version, 0)
        UNION ALL
        SELECT o.workOrderId, o.jobId, NULL, NULL, NULL, CAST(1 AS BIT),
               CAST(0 AS BIT), NULL, NULL, NULL, NULL, NULL, NULL,
               o.orderNo, o.version, o.orderDate, o.state, o.errorText, o.optimoId
          FROM dbo.optimoRouteOrder o
         WHERE o.workOrderId IS NOT NULL AND o.state = N'Active'
           AND NOT EXISTS (SELECT 1 FROM dbo.primeWorkOrders w WHERE w.workOrderId = o.workOrderId)
      ) AS q
     WHERE @AfterWorkOrderId IS NULL OR q.workOrderId > @AfterWorkOrderId
     ORDER BY q.workOrderId;
END;
GO

-- The work-order mirror's writer: inserts or updates a work order unless the
-- stored version is newer. Returns whether it wrote.
CREATE OR ALTER PROCEDURE dbo.spPrimeSaveWorkOrder
    @WorkOrderId UNIQUEIDENTIFIER,
    @JobId       UNIQUEIDENTIFIER = NULL,
    @Status      NVARCHAR(50)     = NULL,
    @Version     BIGINT           = NULL,
    @CreatedAt   DATETIME2(3)     = NULL,
    @UpdatedAt   DATETIME2(3)     = NULL,
    @Attributes  NVARCHAR(MAX)    = NULL
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    DECLARE @now DATETIME2(3) = SYSUTCDATETIME();
    DECLARE @saved INT = 0;
    BEGIN TRANSACTION;
    IF EXISTS (SELECT 1 FROM dbo.primeWorkOrders WITH (UPDLOCK, SERIALIZABLE) WHERE workOrderId = @WorkOrderId)
    BEGIN
        UPDATE dbo.primeWorkOrders
           SET jobId = @JobId, status = @Status, version = @Version, createdAt = @CreatedAt,
               updatedAt = @UpdatedAt, attributes = @Attributes, syncedUTC = @now
         WHERE workOrderId = @WorkOrderId
           AND (version IS NULL OR @Version IS NULL OR version <= @Version);
        SET @saved = @@ROWCOUNT;
    END
    ELSE
    BEGIN
        INSERT INTO dbo.primeWorkOrders (workOrderId, jobId, status, version, createdAt, updatedAt, attributes, syncedUTC)
        VALUES (@WorkOrderId, @JobId, @Status, @Version, @CreatedAt, @UpdatedAt, @Attributes, @now);
        SET @saved = 1;
    END;
    COMMIT TRANSACTION;
    SELECT CAST(CASE WHEN @saved > 0 THEN 1 ELSE 0 END AS BIT) AS saved;
END;
GO
