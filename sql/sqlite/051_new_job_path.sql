-- One new-job path (spec §7.1), the jobs-by-date backstop's watermark and
-- sightings, and what the coverage report reads (sql/README.md, "One new-job
-- path"). spEthProcessNewPrimeJob's steps run from the adapter
-- (pkg/store/sqlite/newjob.go).

-- Which path claimed a job's first sight: webhook, email, backstop,
-- appointment-sweep, manual; NULL for a caller that did not say.
ALTER TABLE primeflowJobFirstSeen ADD COLUMN via TEXT NULL;

-- The coverage report takes the jobs Prime created in its window.
CREATE INDEX IX_primeJobs_createdAt ON primeJobs (createdAt);

-- The jobs-by-date backstop's first sight of each job it listed.
CREATE TABLE primeflowBackstopSeen (
    jobId        TEXT PRIMARY KEY,
    firstSeenUTC TEXT NOT NULL
);

-- How far each scheduled sweep has got.
CREATE TABLE primeflowSweepWatermark (
    name         TEXT PRIMARY KEY,
    watermarkUTC TEXT NOT NULL,
    updatedUTC   TEXT NOT NULL
);
