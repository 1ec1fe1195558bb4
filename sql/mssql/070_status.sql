-- primectl status and bin/primeflow's page (store.Overview): the figures an
-- operator looks at first, read in one call. It only reads; its result sets
-- come in the order below, each described in sql/README.md ("Status").

-- spPrimeflowStatusOverview: ten result sets.
--   1. one row: the webhook log's rows queued under @MaxAttempts, capped and
--      processed, those still to publish; the outbox's unpublished messages
--      and when the oldest was written; jobs whose new-job pipeline failed
--      and has not completed; triage invites not sent (nor dismissed by a
--      person: 082); orders whose last write OptimoRoute refused; triage invites Failed; new-job emails whose
--      receipt is Failed; jobs with an ethSyncQueue item queued at or after
--      @SyncQueuedSince (0 when it is NULL); when the oldest SMS, and the
--      oldest triage invite, not sent yet (Queued or Sending) was queued;
--      new-job emails whose receipt is Rejected (refused unread as not
--      Prime's: counted, needing nobody).
--   2. the oldest queued log row (0 or 1 row).
--   3. each eventAction's newest unprocessed row with a failed attempt.
--   4. smsQueue's messages by State.
--   5. the newest error an SMS not Sent, nor Dismissed by a person, holds
--      (0 or 1 row).
--   6. the newest failing first sight (0 or 1 row).
--   7. optimoRoutePlan's dates by PlanStatus, with the earliest.
--   8. the newest refused order (0 or 1 row).
--   9. the newest plan date with an ErrorText (0 or 1 row).
--  10. the newest Failed email receipt (0 or 1 row), as
--      spPrimeflowEmailJobRegisteredGet returns one.
CREATE OR ALTER PROCEDURE dbo.spPrimeflowStatusOverview
    @MaxAttempts INT = 5,
    @SyncQueuedSince DATETIME2(3) = NULL
AS
BEGIN
    SET NOCOUNT ON;

    SELECT
        (SELECT COUNT_BIG(*) FROM dbo.ethPrimeWebhookLog WHERE processedUTC IS NULL AND processAttempts < @MaxAttempts) AS unprocessed,
        (SELECT COUNT_BIG(*) FROM dbo.ethPrimeWebhookLog WHERE processedUTC IS NULL AND processAttempts >= @MaxAttempts) AS capped,
        (SELECT COUNT_BIG(*) FROM dbo.ethPrimeWebhookLog WHERE processedUTC IS NOT NULL) AS processed,
        (SELECT COUNT_BIG(*) FROM dbo.ethPrimeWebhookLog WHERE publishedUTC IS NULL) AS unpublished,
        (SELECT COUNT_BIG(*) FROM dbo.primeflowOutbox WHERE publishedUTC IS NULL) AS outboxUnpublished,
        (SELECT MIN(createdUTC) FROM dbo.primeflowOutbox WHERE publishedUTC IS NULL) AS outboxOldestUTC,
        (SELECT COUNT_BIG(*) FROM dbo.primeflowJobFirstSeen WHERE pipelineCompletedUTC IS NULL AND pipelineAttempts > 0) AS firstSeenFailing,
        (SELECT COUNT_BIG(*) FROM dbo.ethTriageInviteQueue WHERE sentUTC IS NULL AND state <> N'Dismissed') AS invitesPending,
        (SELECT COUNT_BIG(*) FROM dbo.optimoRouteOrder WHERE errorText IS NOT NULL) AS ordersFailing,
        (SELECT COUNT_BIG(*) FROM dbo.ethTriageInviteQueue WHERE sentUTC IS NULL AND state = N'Failed') AS invitesFailed,
        (SELECT COUNT_BIG(*) FROM dbo.PrimeEmailJobRegistered WHERE outcome = N'Failed') AS emailsFailed,
        (SELECT COUNT_BIG(DISTINCT jobId) FROM dbo.ethSyncQueue WHERE queuedUTC >= @SyncQueuedSince) AS syncQueueRecentJobs,
        (SELECT MIN(QueuedUTC) FROM dbo.smsQueue WHERE State IN (N'Queued', N'Sending')) AS smsOldestWaitingUTC,
        (SELECT MIN(queuedUTC) FROM dbo.ethTriageInviteQueue
         WHERE state IN (N'Queued', N'Sending') AND sentUTC IS NULL) AS invitesOldestWaitingUTC,
        (SELECT COUNT_BIG(*) FROM dbo.PrimeEmailJobRegistered WHERE outcome = N'Rejected') AS emailsRejected;

    SELECT TOP (1) id, receivedUTC, eventAction, processAttempts
    FROM dbo.ethPrimeWebhookLog
    WHERE processedUTC IS NULL AND processAttempts < @MaxAttempts
    ORDER BY id;

    SELECT l.id, l.receivedUTC, l.eventAction, l.processAttempts, l.processStatus
    FROM dbo.ethPrimeWebhookLog AS l
    WHERE l.id IN (SELECT MAX(f.id) FROM dbo.ethPrimeWebhookLog AS f
                   WHERE f.processedUTC IS NULL AND f.processAttempts > 0
                   GROUP BY f.eventAction)
    ORDER BY l.eventAction;

    SELECT State, COUNT_BIG(*) AS messages
    FROM dbo.smsQueue
    GROUP BY State;

    SELECT TOP (1) LastError, UpdatedUTC
    FROM dbo.smsQueue
    WHERE LastError IS NOT NULL AND State NOT IN (N'Sent', N'Dismissed')
    ORDER BY UpdatedUTC DESC, ID DESC;

    SELECT TOP (1) jobId, pipelineStatus
    FROM dbo.primeflowJobFirstSeen
    WHERE pipelineCompletedUTC IS NULL AND pipelineAttempts > 0
    ORDER BY firstSeenUTC DESC;

    SELECT PlanStatus, COUNT_BIG(*) AS dates, MIN(PlanDate) AS earliest
    FROM dbo.optimoRoutePlan
    GROUP BY PlanStatus
    ORDER BY PlanStatus;

    SELECT TOP (1) orderNo, errorText
    FROM dbo.optimoRouteOrder
    WHERE errorText IS NOT NULL
    ORDER BY updatedUTC DESC, orderNo;

    SELECT TOP (1) PlanDate, ErrorText
    FROM dbo.optimoRoutePlan
    WHERE ErrorText IS NOT NULL
    ORDER BY UpdatedUTC DESC, PlanDate;

    SELECT TOP (1) id, internetMessageId, subject, receivedDateTime, fromAddress, bodyPreview, JobID, JobIDKind,
           NumericReference, JobNumber, primeJobId, outcome, lastError, attempts, movedUTC, movedTo,
           registeredUTC, updatedUTC, CAST(0 AS BIT) AS inserted
    FROM dbo.PrimeEmailJobRegistered
    WHERE outcome = N'Failed'
    ORDER BY updatedUTC DESC, id DESC;
END;
GO
