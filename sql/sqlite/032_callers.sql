-- What the spec's other callers need (§7, §11); sql/README.md ("Callers
-- outside primeflow") gives the reading. The SQLite adapter runs
-- spMakesafeUpsertPhoneCallFromPrimeJob's defaults in Go.

-- Values a procedure reads because its callers do not pass them
-- (MakesafeSMSRecipient, written by primectl migrate from MAKESAFE_SMS_TO).
CREATE TABLE primeflowSettings (
    name       TEXT PRIMARY KEY,
    value      TEXT NULL,
    updatedUTC TEXT NOT NULL
);

-- isMakeSafe is derived from the allocation's own allocationType: "Make
-- Safe" without regard to case, spaces, hyphens or underscores (the rule of
-- prime.Allocation.IsMakeSafe; lower() folds ASCII letters only).
ALTER TABLE primeAllocations DROP COLUMN isMakeSafe;
ALTER TABLE primeAllocations ADD COLUMN isMakeSafe INTEGER GENERATED ALWAYS AS (
    CASE WHEN lower(replace(replace(replace(allocationType, ' ', ''), '-', ''), '_', '')) = 'makesafe' THEN 1 ELSE 0 END
) VIRTUAL;

-- The rungs still to fire.
CREATE INDEX IX_makesafeAllocationCheck_due ON makesafeAllocationCheck (DueUTC) WHERE FiredUTC IS NULL;
