-- The dedupe keys of the messages primectl archive has deleted (080's
-- spPrimeflowArchiveDelete writes them in the delete's transaction): a key
-- stays used once its message is archived, so 030's spSmsQueueInsert and
-- 031's make-safe insert queue no second message under it (sql/README.md,
-- "Archive"). One row a key (136 bytes on SQLite, with its index);
-- SmsQueueID is the archived message's ID. Safe to run again.
IF OBJECT_ID(N'dbo.smsArchivedDedupeKey', N'U') IS NULL
CREATE TABLE dbo.smsArchivedDedupeKey (
    DedupeKey   NVARCHAR(200) NOT NULL CONSTRAINT PK_smsArchivedDedupeKey PRIMARY KEY,
    SmsQueueID  BIGINT        NOT NULL,
    ArchivedUTC DATETIME2(3)  NOT NULL
);
GO
