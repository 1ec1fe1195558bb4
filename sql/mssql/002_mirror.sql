-- The Prime mirror (spec §4.2, §5): one table a Prime entity, named as in the live
-- database. Each row keeps its main attributes as columns and Prime's raw
-- attributes JSON in attributes; syncedUTC is when primeflow last wrote it.
-- Tables are created only when absent: where the live database already has
-- them, compare their columns with these before relying on primeflow's writes.

-- Jobs (§5.1). The main attributes as columns, the raw attributes JSON in attributes.
IF OBJECT_ID(N'dbo.primeJobs', N'U') IS NULL
CREATE TABLE dbo.primeJobs (
    jobId                        UNIQUEIDENTIFIER NOT NULL CONSTRAINT PK_primeJobs PRIMARY KEY,
    jobNumber                    NVARCHAR(50) NULL,
    statusId                     UNIQUEIDENTIFIER NULL,
    clientId                     UNIQUEIDENTIFIER NULL,
    assignedId                   UNIQUEIDENTIFIER NULL,
    estimatorId                  UNIQUEIDENTIFIER NULL,
    caseManagerId                UNIQUEIDENTIFIER NULL,
    supervisorId                 UNIQUEIDENTIFIER NULL,
    divisionId                   UNIQUEIDENTIFIER NULL,
    region                       NVARCHAR(100) NULL,
    description                  NVARCHAR(MAX) NULL,
    incidentDate                 DATETIME2(3) NULL,
    createdAt                    DATETIME2(3) NULL,
    updatedAt                    DATETIME2(3) NULL,
    version                      BIGINT NULL,
    primeUrl                     NVARCHAR(400) NULL,
    authorisedTotalIncludingTax  DECIMAL(19,4) NULL,
    addressLine1                 NVARCHAR(200) NULL,
    addressLine2                 NVARCHAR(200) NULL,
    suburb                       NVARCHAR(100) NULL,
    state                        NVARCHAR(50) NULL,
    postcode                     NVARCHAR(20) NULL,
    primaryContactId             UNIQUEIDENTIFIER NULL,
    attributes                   NVARCHAR(MAX) NULL,
    syncedUTC                    DATETIME2(3) NOT NULL
);
GO

-- Appointments (§5.2); OptimoRoute plans from these rows.
IF OBJECT_ID(N'dbo.primeAppointments', N'U') IS NULL
CREATE TABLE dbo.primeAppointments (
    appointmentId                UNIQUEIDENTIFIER NOT NULL CONSTRAINT PK_primeAppointments PRIMARY KEY,
    jobId                        UNIQUEIDENTIFIER NULL,
    appointmentTypeId            UNIQUEIDENTIFIER NULL,
    startDate                    DATETIME2(3) NULL,
    endDate                      DATETIME2(3) NULL,
    status                       NVARCHAR(50) NULL,
    version                      BIGINT NULL,
    assignedId                   UNIQUEIDENTIFIER NULL,
    description                  NVARCHAR(MAX) NULL,
    notes                        NVARCHAR(MAX) NULL,
    createdAt                    DATETIME2(3) NULL,
    updatedAt                    DATETIME2(3) NULL,
    attributes                   NVARCHAR(MAX) NULL,
    syncedUTC                    DATETIME2(3) NOT NULL
);
GO
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_primeAppointments_jobId' AND object_id = OBJECT_ID(N'dbo.primeAppointments'))
CREATE INDEX IX_primeAppointments_jobId ON dbo.primeAppointments (jobId);
GO

-- Appointment types.
IF OBJECT_ID(N'dbo.primeAppointmentType', N'U') IS NULL
CREATE TABLE dbo.primeAppointmentType (
    appointmentTypeId            UNIQUEIDENTIFIER NOT NULL CONSTRAINT PK_primeAppointmentType PRIMARY KEY,
    name                         NVARCHAR(200) NULL,
    attributes                   NVARCHAR(MAX) NULL,
    syncedUTC                    DATETIME2(3) NOT NULL
);
GO

-- Job statuses.
IF OBJECT_ID(N'dbo.primeStatuses', N'U') IS NULL
CREATE TABLE dbo.primeStatuses (
    statusId                     UNIQUEIDENTIFIER NOT NULL CONSTRAINT PK_primeStatuses PRIMARY KEY,
    name                         NVARCHAR(200) NULL,
    attributes                   NVARCHAR(MAX) NULL,
    syncedUTC                    DATETIME2(3) NOT NULL
);
GO

-- Prime users.
IF OBJECT_ID(N'dbo.primeUsers', N'U') IS NULL
CREATE TABLE dbo.primeUsers (
    userId                       UNIQUEIDENTIFIER NOT NULL CONSTRAINT PK_primeUsers PRIMARY KEY,
    name                         NVARCHAR(200) NULL,
    email                        NVARCHAR(320) NULL,
    attributes                   NVARCHAR(MAX) NULL,
    syncedUTC                    DATETIME2(3) NOT NULL
);
GO

-- Contacts (§5.2 contact sync).
IF OBJECT_ID(N'dbo.primeContacts', N'U') IS NULL
CREATE TABLE dbo.primeContacts (
    contactId                    UNIQUEIDENTIFIER NOT NULL CONSTRAINT PK_primeContacts PRIMARY KEY,
    name                         NVARCHAR(200) NULL,
    firstName                    NVARCHAR(100) NULL,
    lastName                     NVARCHAR(100) NULL,
    email                        NVARCHAR(320) NULL,
    mobile                       NVARCHAR(50) NULL,
    phone                        NVARCHAR(50) NULL,
    attributes                   NVARCHAR(MAX) NULL,
    syncedUTC                    DATETIME2(3) NOT NULL
);
GO

-- Which contacts belong to which job.
IF OBJECT_ID(N'dbo.primeContactRelationships', N'U') IS NULL
CREATE TABLE dbo.primeContactRelationships (
    contactRelationshipId        UNIQUEIDENTIFIER NOT NULL CONSTRAINT PK_primeContactRelationships PRIMARY KEY,
    jobId                        UNIQUEIDENTIFIER NULL,
    contactId                    UNIQUEIDENTIFIER NULL,
    relationshipType             NVARCHAR(100) NULL,
    attributes                   NVARCHAR(MAX) NULL,
    syncedUTC                    DATETIME2(3) NOT NULL
);
GO
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_primeContactRelationships_jobId' AND object_id = OBJECT_ID(N'dbo.primeContactRelationships'))
CREATE INDEX IX_primeContactRelationships_jobId ON dbo.primeContactRelationships (jobId);
GO

-- Status changes of a job.
IF OBJECT_ID(N'dbo.primeJobStatusHistory', N'U') IS NULL
CREATE TABLE dbo.primeJobStatusHistory (
    statusHistoryId              UNIQUEIDENTIFIER NOT NULL CONSTRAINT PK_primeJobStatusHistory PRIMARY KEY,
    jobId                        UNIQUEIDENTIFIER NULL,
    statusId                     UNIQUEIDENTIFIER NULL,
    createdAt                    DATETIME2(3) NULL,
    attributes                   NVARCHAR(MAX) NULL,
    syncedUTC                    DATETIME2(3) NOT NULL
);
GO
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_primeJobStatusHistory_jobId' AND object_id = OBJECT_ID(N'dbo.primeJobStatusHistory'))
CREATE INDEX IX_primeJobStatusHistory_jobId ON dbo.primeJobStatusHistory (jobId);
GO

-- Allocations (§5.5); a Make Safe allocation is what make-safe detection looks for.
IF OBJECT_ID(N'dbo.primeAllocations', N'U') IS NULL
CREATE TABLE dbo.primeAllocations (
    allocationId                 UNIQUEIDENTIFIER NOT NULL CONSTRAINT PK_primeAllocations PRIMARY KEY,
    jobId                        UNIQUEIDENTIFIER NULL,
    assignedId                   UNIQUEIDENTIFIER NULL,
    assignedContactId            UNIQUEIDENTIFIER NULL,
    allocationType               NVARCHAR(100) NULL,
    allocationNumber             NVARCHAR(50) NULL,
    label                        NVARCHAR(200) NULL,
    allocationStatusId           UNIQUEIDENTIFIER NULL,
    version                      BIGINT NULL,
    createdAt                    DATETIME2(3) NULL,
    updatedAt                    DATETIME2(3) NULL,
    attributes                   NVARCHAR(MAX) NULL,
    syncedUTC                    DATETIME2(3) NOT NULL
);
GO
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_primeAllocations_jobId' AND object_id = OBJECT_ID(N'dbo.primeAllocations'))
CREATE INDEX IX_primeAllocations_jobId ON dbo.primeAllocations (jobId);
GO

-- Site forms of a job (objectType Job, §5.3).
IF OBJECT_ID(N'dbo.primeSiteForms', N'U') IS NULL
CREATE TABLE dbo.primeSiteForms (
    siteFormId                   UNIQUEIDENTIFIER NOT NULL CONSTRAINT PK_primeSiteForms PRIMARY KEY,
    jobId                        UNIQUEIDENTIFIER NULL,
    objectType                   NVARCHAR(50) NULL,
    objectId                     UNIQUEIDENTIFIER NULL,
    name                         NVARCHAR(200) NULL,
    status                       NVARCHAR(50) NULL,
    createdAt                    DATETIME2(3) NULL,
    updatedAt                    DATETIME2(3) NULL,
    attributes                   NVARCHAR(MAX) NULL,
    syncedUTC                    DATETIME2(3) NOT NULL
);
GO
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_primeSiteForms_jobId' AND object_id = OBJECT_ID(N'dbo.primeSiteForms'))
CREATE INDEX IX_primeSiteForms_jobId ON dbo.primeSiteForms (jobId);
GO

-- Estimates (§5.4), swept per job: delete and reinsert.
IF OBJECT_ID(N'dbo.primeEstimates', N'U') IS NULL
CREATE TABLE dbo.primeEstimates (
    estimateId                   UNIQUEIDENTIFIER NOT NULL CONSTRAINT PK_primeEstimates PRIMARY KEY,
    jobId                        UNIQUEIDENTIFIER NULL,
    status                       NVARCHAR(50) NULL,
    total                        DECIMAL(19,4) NULL,
    createdAt                    DATETIME2(3) NULL,
    updatedAt                    DATETIME2(3) NULL,
    attributes                   NVARCHAR(MAX) NULL,
    syncedUTC                    DATETIME2(3) NOT NULL
);
GO
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_primeEstimates_jobId' AND object_id = OBJECT_ID(N'dbo.primeEstimates'))
CREATE INDEX IX_primeEstimates_jobId ON dbo.primeEstimates (jobId);
GO

-- Categories of an estimate.
IF OBJECT_ID(N'dbo.primeEstimateCategories', N'U') IS NULL
CREATE TABLE dbo.primeEstimateCategories (
    categoryId                   UNIQUEIDENTIFIER NOT NULL CONSTRAINT PK_primeEstimateCategories PRIMARY KEY,
    estimateId                   UNIQUEIDENTIFIER NULL,
    jobId                        UNIQUEIDENTIFIER NULL,
    name                         NVARCHAR(200) NULL,
    sortOrder                    INT NULL,
    attributes                   NVARCHAR(MAX) NULL,
    syncedUTC                    DATETIME2(3) NOT NULL
);
GO
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_primeEstimateCategories_estimateId' AND object_id = OBJECT_ID(N'dbo.primeEstimateCategories'))
CREATE INDEX IX_primeEstimateCategories_estimateId ON dbo.primeEstimateCategories (estimateId);
GO
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_primeEstimateCategories_jobId' AND object_id = OBJECT_ID(N'dbo.primeEstimateCategories'))
CREATE INDEX IX_primeEstimateCategories_jobId ON dbo.primeEstimateCategories (jobId);
GO

-- Line items of an estimate category.
IF OBJECT_ID(N'dbo.primeEstimateItems', N'U') IS NULL
CREATE TABLE dbo.primeEstimateItems (
    itemId                       UNIQUEIDENTIFIER NOT NULL CONSTRAINT PK_primeEstimateItems PRIMARY KEY,
    categoryId                   UNIQUEIDENTIFIER NULL,
    estimateId                   UNIQUEIDENTIFIER NULL,
    jobId                        UNIQUEIDENTIFIER NULL,
    description                  NVARCHAR(MAX) NULL,
    quantity                     DECIMAL(19,4) NULL,
    unitPrice                    DECIMAL(19,4) NULL,
    total                        DECIMAL(19,4) NULL,
    sortOrder                    INT NULL,
    attributes                   NVARCHAR(MAX) NULL,
    syncedUTC                    DATETIME2(3) NOT NULL
);
GO
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_primeEstimateItems_categoryId' AND object_id = OBJECT_ID(N'dbo.primeEstimateItems'))
CREATE INDEX IX_primeEstimateItems_categoryId ON dbo.primeEstimateItems (categoryId);
GO
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_primeEstimateItems_jobId' AND object_id = OBJECT_ID(N'dbo.primeEstimateItems'))
CREATE INDEX IX_primeEstimateItems_jobId ON dbo.primeEstimateItems (jobId);
GO

-- Work orders (OptimoRoute work-order queue).
IF OBJECT_ID(N'dbo.primeWorkOrders', N'U') IS NULL
CREATE TABLE dbo.primeWorkOrders (
    workOrderId                  UNIQUEIDENTIFIER NOT NULL CONSTRAINT PK_primeWorkOrders PRIMARY KEY,
    jobId                        UNIQUEIDENTIFIER NULL,
    status                       NVARCHAR(50) NULL,
    version                      BIGINT NULL,
    createdAt                    DATETIME2(3) NULL,
    updatedAt                    DATETIME2(3) NULL,
    attributes                   NVARCHAR(MAX) NULL,
    syncedUTC                    DATETIME2(3) NOT NULL
);
GO
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_primeWorkOrders_jobId' AND object_id = OBJECT_ID(N'dbo.primeWorkOrders'))
CREATE INDEX IX_primeWorkOrders_jobId ON dbo.primeWorkOrders (jobId);
GO

-- Attachments.
IF OBJECT_ID(N'dbo.primeAttachment', N'U') IS NULL
CREATE TABLE dbo.primeAttachment (
    attachmentId                 UNIQUEIDENTIFIER NOT NULL CONSTRAINT PK_primeAttachment PRIMARY KEY,
    jobId                        UNIQUEIDENTIFIER NULL,
    attributes                   NVARCHAR(MAX) NULL,
    syncedUTC                    DATETIME2(3) NOT NULL
);
GO
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_primeAttachment_jobId' AND object_id = OBJECT_ID(N'dbo.primeAttachment'))
CREATE INDEX IX_primeAttachment_jobId ON dbo.primeAttachment (jobId);
GO

-- Notifications.
IF OBJECT_ID(N'dbo.primeNotifications', N'U') IS NULL
CREATE TABLE dbo.primeNotifications (
    notificationId               UNIQUEIDENTIFIER NOT NULL CONSTRAINT PK_primeNotifications PRIMARY KEY,
    jobId                        UNIQUEIDENTIFIER NULL,
    attributes                   NVARCHAR(MAX) NULL,
    syncedUTC                    DATETIME2(3) NOT NULL
);
GO
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_primeNotifications_jobId' AND object_id = OBJECT_ID(N'dbo.primeNotifications'))
CREATE INDEX IX_primeNotifications_jobId ON dbo.primeNotifications (jobId);
GO

-- Schedules.
IF OBJECT_ID(N'dbo.primeSchedule', N'U') IS NULL
CREATE TABLE dbo.primeSchedule (
    scheduleId                   UNIQUEIDENTIFIER NOT NULL CONSTRAINT PK_primeSchedule PRIMARY KEY,
    jobId                        UNIQUEIDENTIFIER NULL,
    attributes                   NVARCHAR(MAX) NULL,
    syncedUTC                    DATETIME2(3) NOT NULL
);
GO
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_primeSchedule_jobId' AND object_id = OBJECT_ID(N'dbo.primeSchedule'))
CREATE INDEX IX_primeSchedule_jobId ON dbo.primeSchedule (jobId);
GO

-- Schedule items.
IF OBJECT_ID(N'dbo.primeScheduleItem', N'U') IS NULL
CREATE TABLE dbo.primeScheduleItem (
    scheduleItemId               UNIQUEIDENTIFIER NOT NULL CONSTRAINT PK_primeScheduleItem PRIMARY KEY,
    scheduleId                   UNIQUEIDENTIFIER NULL,
    attributes                   NVARCHAR(MAX) NULL,
    syncedUTC                    DATETIME2(3) NOT NULL
);
GO
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_primeScheduleItem_scheduleId' AND object_id = OBJECT_ID(N'dbo.primeScheduleItem'))
CREATE INDEX IX_primeScheduleItem_scheduleId ON dbo.primeScheduleItem (scheduleId);
GO

-- Filter tags.
IF OBJECT_ID(N'dbo.primeFilterTags', N'U') IS NULL
CREATE TABLE dbo.primeFilterTags (
    filterTagId                  UNIQUEIDENTIFIER NOT NULL CONSTRAINT PK_primeFilterTags PRIMARY KEY,
    name                         NVARCHAR(200) NULL,
    attributes                   NVARCHAR(MAX) NULL,
    syncedUTC                    DATETIME2(3) NOT NULL
);
GO

-- Perils.
IF OBJECT_ID(N'dbo.primePerils', N'U') IS NULL
CREATE TABLE dbo.primePerils (
    perilId                      UNIQUEIDENTIFIER NOT NULL CONSTRAINT PK_primePerils PRIMARY KEY,
    name                         NVARCHAR(200) NULL,
    attributes                   NVARCHAR(MAX) NULL,
    syncedUTC                    DATETIME2(3) NOT NULL
);
GO
