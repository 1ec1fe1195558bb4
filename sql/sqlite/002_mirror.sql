-- The Prime mirror (spec §4.2, §5): one table a Prime entity, named as in the live
-- database. Each row keeps its main attributes as columns and Prime's raw
-- attributes JSON in attributes; syncedUTC is when primeflow last wrote it.
-- Generated together with sql/mssql/002_mirror.sql: the two list the same columns.

-- Jobs (§5.1). The main attributes as columns, the raw attributes JSON in attributes.
CREATE TABLE primeJobs (
    jobId                        TEXT PRIMARY KEY,
    jobNumber                    TEXT,
    statusId                     TEXT,
    clientId                     TEXT,
    assignedId                   TEXT,
    estimatorId                  TEXT,
    caseManagerId                TEXT,
    supervisorId                 TEXT,
    divisionId                   TEXT,
    region                       TEXT,
    description                  TEXT,
    incidentDate                 TEXT,
    createdAt                    TEXT,
    updatedAt                    TEXT,
    version                      INTEGER,
    primeUrl                     TEXT,
    authorisedTotalIncludingTax  TEXT,
    addressLine1                 TEXT,
    addressLine2                 TEXT,
    suburb                       TEXT,
    state                        TEXT,
    postcode                     TEXT,
    primaryContactId             TEXT,
    attributes                   TEXT,
    syncedUTC                    TEXT NOT NULL
);

-- Appointments (§5.2); OptimoRoute plans from these rows.
CREATE TABLE primeAppointments (
    appointmentId                TEXT PRIMARY KEY,
    jobId                        TEXT,
    appointmentTypeId            TEXT,
    startDate                    TEXT,
    endDate                      TEXT,
    status                       TEXT,
    version                      INTEGER,
    assignedId                   TEXT,
    description                  TEXT,
    notes                        TEXT,
    createdAt                    TEXT,
    updatedAt                    TEXT,
    attributes                   TEXT,
    syncedUTC                    TEXT NOT NULL
);
CREATE INDEX IX_primeAppointments_jobId ON primeAppointments (jobId);

-- Appointment types.
CREATE TABLE primeAppointmentType (
    appointmentTypeId            TEXT PRIMARY KEY,
    name                         TEXT,
    attributes                   TEXT,
    syncedUTC                    TEXT NOT NULL
);

-- Job statuses.
CREATE TABLE primeStatuses (
    statusId                     TEXT PRIMARY KEY,
    name                         TEXT,
    attributes                   TEXT,
    syncedUTC                    TEXT NOT NULL
);

-- Prime users.
CREATE TABLE primeUsers (
    userId                       TEXT PRIMARY KEY,
    name                         TEXT,
    email                        TEXT,
    attributes                   TEXT,
    syncedUTC                    TEXT NOT NULL
);

-- Contacts (§5.2 contact sync).
CREATE TABLE primeContacts (
    contactId                    TEXT PRIMARY KEY,
    name                         TEXT,
    firstName                    TEXT,
    lastName                     TEXT,
    email                        TEXT,
    mobile                       TEXT,
    phone                        TEXT,
    attributes                   TEXT,
    syncedUTC                    TEXT NOT NULL
);

-- Which contacts belong to which job.
CREATE TABLE primeContactRelationships (
    contactRelationshipId        TEXT PRIMARY KEY,
    jobId                        TEXT,
    contactId                    TEXT,
    relationshipType             TEXT,
    attributes                   TEXT,
    syncedUTC                    TEXT NOT NULL
);
CREATE INDEX IX_primeContactRelationships_jobId ON primeContactRelationships (jobId);

-- Status changes of a job.
CREATE TABLE primeJobStatusHistory (
    statusHistoryId              TEXT PRIMARY KEY,
    jobId                        TEXT,
    statusId                     TEXT,
    createdAt                    TEXT,
    attributes                   TEXT,
    syncedUTC                    TEXT NOT NULL
);
CREATE INDEX IX_primeJobStatusHistory_jobId ON primeJobStatusHistory (jobId);

-- Allocations (§5.5); a Make Safe allocation is what make-safe detection looks for.
CREATE TABLE primeAllocations (
    allocationId                 TEXT PRIMARY KEY,
    jobId                        TEXT,
    assignedId                   TEXT,
    assignedContactId            TEXT,
    allocationType               TEXT,
    allocationNumber             TEXT,
    label                        TEXT,
    allocationStatusId           TEXT,
    version                      INTEGER,
    createdAt                    TEXT,
    updatedAt                    TEXT,
    attributes                   TEXT,
    syncedUTC                    TEXT NOT NULL
);
CREATE INDEX IX_primeAllocations_jobId ON primeAllocations (jobId);

-- Site forms of a job (objectType Job, §5.3).
CREATE TABLE primeSiteForms (
    siteFormId                   TEXT PRIMARY KEY,
    jobId                        TEXT,
    objectType                   TEXT,
    objectId                     TEXT,
    name                         TEXT,
    status                       TEXT,
    createdAt                    TEXT,
    updatedAt                    TEXT,
    attributes                   TEXT,
    syncedUTC                    TEXT NOT NULL
);
CREATE INDEX IX_primeSiteForms_jobId ON primeSiteForms (jobId);

-- Estimates (§5.4), swept per job: delete and reinsert.
CREATE TABLE primeEstimates (
    estimateId                   TEXT PRIMARY KEY,
    jobId                        TEXT,
    status                       TEXT,
    total                        TEXT,
    createdAt                    TEXT,
    updatedAt                    TEXT,
    attributes                   TEXT,
    syncedUTC                    TEXT NOT NULL
);
CREATE INDEX IX_primeEstimates_jobId ON primeEstimates (jobId);

-- Categories of an estimate.
CREATE TABLE primeEstimateCategories (
    categoryId                   TEXT PRIMARY KEY,
    estimateId                   TEXT,
    jobId                        TEXT,
    name                         TEXT,
    sortOrder                    INTEGER,
    attributes                   TEXT,
    syncedUTC                    TEXT NOT NULL
);
CREATE INDEX IX_primeEstimateCategories_estimateId ON primeEstimateCategories (estimateId);
CREATE INDEX IX_primeEstimateCategories_jobId ON primeEstimateCategories (jobId);

-- Line items of an estimate category.
CREATE TABLE primeEstimateItems (
    itemId                       TEXT PRIMARY KEY,
    categoryId                   TEXT,
    estimateId                   TEXT,
    jobId                        TEXT,
    description                  TEXT,
    quantity                     TEXT,
    unitPrice                    TEXT,
    total                        TEXT,
    sortOrder                    INTEGER,
    attributes                   TEXT,
    syncedUTC                    TEXT NOT NULL
);
CREATE INDEX IX_primeEstimateItems_categoryId ON primeEstimateItems (categoryId);
CREATE INDEX IX_primeEstimateItems_jobId ON primeEstimateItems (jobId);

-- Work orders (OptimoRoute work-order queue).
CREATE TABLE primeWorkOrders (
    workOrderId                  TEXT PRIMARY KEY,
    jobId                        TEXT,
    status                       TEXT,
    version                      INTEGER,
    createdAt                    TEXT,
    updatedAt                    TEXT,
    attributes                   TEXT,
    syncedUTC                    TEXT NOT NULL
);
CREATE INDEX IX_primeWorkOrders_jobId ON primeWorkOrders (jobId);

-- Attachments.
CREATE TABLE primeAttachment (
    attachmentId                 TEXT PRIMARY KEY,
    jobId                        TEXT,
    attributes                   TEXT,
    syncedUTC                    TEXT NOT NULL
);
CREATE INDEX IX_primeAttachment_jobId ON primeAttachment (jobId);

-- Notifications.
CREATE TABLE primeNotifications (
    notificationId               TEXT PRIMARY KEY,
    jobId                        TEXT,
    attributes                   TEXT,
    syncedUTC                    TEXT NOT NULL
);
CREATE INDEX IX_primeNotifications_jobId ON primeNotifications (jobId);

-- Schedules.
CREATE TABLE primeSchedule (
    scheduleId                   TEXT PRIMARY KEY,
    jobId                        TEXT,
    attributes                   TEXT,
    syncedUTC                    TEXT NOT NULL
);
CREATE INDEX IX_primeSchedule_jobId ON primeSchedule (jobId);

-- Schedule items.
CREATE TABLE primeScheduleItem (
    scheduleItemId               TEXT PRIMARY KEY,
    scheduleId                   TEXT,
    attributes                   TEXT,
    syncedUTC                    TEXT NOT NULL
);
CREATE INDEX IX_primeScheduleItem_scheduleId ON primeScheduleItem (scheduleId);

-- Filter tags.
CREATE TABLE primeFilterTags (
    filterTagId                  TEXT PRIMARY KEY,
    name                         TEXT,
    attributes                   TEXT,
    syncedUTC                    TEXT NOT NULL
);

-- Perils.
CREATE TABLE primePerils (
    perilId                      TEXT PRIMARY KEY,
    name                         TEXT,
    attributes                   TEXT,
    syncedUTC                    TEXT NOT NULL
);
