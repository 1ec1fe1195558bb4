-- A triage invite answers one status change (spec §5.1 step 6, §10.4 "make
-- every downstream insert de-duplicate"): the job's arrival in the
-- Initial-Contact-Made status as the mirror saw it, until the mirror sees
-- the job in another status. One open invite a job, sent or not, so a
-- duplicate or replayed change-job-status event invites nobody twice, and a
-- Failed invite no longer blocks the job's later return to the status.
-- sql/README.md ("Triage invites") gives the reading; the queue's insert and
-- claim are in pkg/store/sqlite.
ALTER TABLE ethTriageInviteQueue ADD COLUMN jobVersion INTEGER NULL;
ALTER TABLE ethTriageInviteQueue ADD COLUMN statusLeftUTC TEXT NULL;
-- The body posted, fixed by the first claim that can build it, so every
-- attempt under one Idempotency-Key posts the same bytes.
ALTER TABLE ethTriageInviteQueue ADD COLUMN payload TEXT NULL;
-- The invites already queued: one a later invite of its job followed, or
-- whose job the mirror no longer holds in its status, answered a change that
-- is over; the newest of a job still in its status stays open.
UPDATE ethTriageInviteQueue
SET statusLeftUTC = strftime('%Y-%m-%d %H:%M:%f', 'now')
WHERE EXISTS (SELECT 1 FROM ethTriageInviteQueue AS later
              WHERE later.jobId = ethTriageInviteQueue.jobId AND later.id > ethTriageInviteQueue.id)
   OR NOT EXISTS (SELECT 1 FROM primeJobs AS j
                  WHERE j.jobId = ethTriageInviteQueue.jobId AND j.statusId = ethTriageInviteQueue.statusId);
DROP INDEX UX_ethTriageInviteQueue_pending;
CREATE UNIQUE INDEX UX_ethTriageInviteQueue_open ON ethTriageInviteQueue (jobId) WHERE statusLeftUTC IS NULL;
