-- OptimoRoute (spec §5.2 step 5, §8): the orders primeflow made from
-- appointments and work orders, and the plan state of each date. The queues
-- and procedures over them are described in sql/README.md ("OptimoRoute").

-- One row an order: where it came from, the source version last handled,
-- what OptimoRoute holds, and what the routes of its date say of it.
CREATE TABLE optimoRouteOrder (
    orderNo       TEXT    PRIMARY KEY,
    appointmentId TEXT    NULL,
    workOrderId   TEXT    NULL,
    jobId         TEXT    NULL,
    version       INTEGER NULL,
    orderDate     TEXT    NULL,
    duration      INTEGER NULL,
    timeFrom      TEXT    NULL,
    timeTo        TEXT    NULL,
    address       TEXT    NULL,
    assignedTo    TEXT    NULL,
    state         TEXT    NOT NULL DEFAULT 'Active',
    errorText     TEXT    NULL,
    optimoId      TEXT    NULL,
    scheduledUTC  TEXT    NULL,
    driverSerial  TEXT    NULL,
    driverName    TEXT    NULL,
    routesUTC     TEXT    NULL,
    refreshedUTC  TEXT    NULL,
    createdUTC    TEXT    NOT NULL,
    updatedUTC    TEXT    NOT NULL
);
CREATE INDEX IX_optimoRouteOrder_appointmentId ON optimoRouteOrder (appointmentId) WHERE appointmentId IS NOT NULL;
CREATE INDEX IX_optimoRouteOrder_workOrderId ON optimoRouteOrder (workOrderId) WHERE workOrderId IS NOT NULL;
CREATE INDEX IX_optimoRouteOrder_orderDate ON optimoRouteOrder (orderDate);

-- One row a date (§8): NotPlanned queues it for planning.
CREATE TABLE optimoRoutePlan (
    PlanDate    TEXT    PRIMARY KEY,
    PlanStatus  TEXT    NOT NULL,
    PlanningId  INTEGER NULL,
    ErrorText   TEXT    NULL,
    QueuedUTC   TEXT    NULL,
    StartedUTC  TEXT    NULL,
    FinishedUTC TEXT    NULL,
    UpdatedUTC  TEXT    NOT NULL
);
CREATE INDEX IX_optimoRoutePlan_PlanStatus ON optimoRoutePlan (PlanStatus);
