-- Mail refused unread as not Prime's (not from MAIL_ALLOWED_SENDERS, or not
-- authenticated for its sender) has a receipt outcome of its own, Rejected:
-- junk needs nobody, where a Failed receipt waits for a person (primectl
-- status). The receipts an intake before this wrote Failed for such mail,
-- their lastError the refusal, become Rejected. The column takes the new
-- value as it is (sql/README.md, "The email path").
UPDATE PrimeEmailJobRegistered SET outcome = 'Rejected'
WHERE outcome = 'Failed' AND lastError LIKE 'refused unread:%';
