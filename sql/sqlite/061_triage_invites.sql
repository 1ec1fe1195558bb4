-- The triage invite sender (spec §3.1): ethTriageInviteQueue (011) becomes a
-- send queue like smsQueue (030), with the same claim, outcomes and states.
-- sql/README.md ("Triage invites") gives the reading. The queue's insert
-- (pkg/store/sqlite) sets the new columns; rows queued before them are due
-- at once, or Sent when they were.
ALTER TABLE ethTriageInviteQueue ADD COLUMN state TEXT NOT NULL DEFAULT 'Queued';
ALTER TABLE ethTriageInviteQueue ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ethTriageInviteQueue ADD COLUMN nextAttemptUTC TEXT NULL;
ALTER TABLE ethTriageInviteQueue ADD COLUMN claimedUntilUTC TEXT NULL;
ALTER TABLE ethTriageInviteQueue ADD COLUMN lastError TEXT NULL;
ALTER TABLE ethTriageInviteQueue ADD COLUMN failedUTC TEXT NULL;
ALTER TABLE ethTriageInviteQueue ADD COLUMN updatedUTC TEXT NULL;
UPDATE ethTriageInviteQueue
SET state = CASE WHEN sentUTC IS NULL THEN 'Queued' ELSE 'Sent' END,
    nextAttemptUTC = queuedUTC, updatedUTC = COALESCE(sentUTC, queuedUTC);
-- The claim reads only the invites still to send.
CREATE INDEX IX_ethTriageInviteQueue_unsent ON ethTriageInviteQueue (id) WHERE state IN ('Queued', 'Sending');
