-- The webhook log and the numeric job reference map (spec §3, §4.1).
IF OBJECT_ID(N'dbo.ethPrimeWebhookLog', N'U') IS NULL
CREATE TABLE dbo.ethPrimeWebhookLog (
    id              BIGINT IDENTITY(1,1) NOT NULL CONSTRAINT PK_ethPrimeWebhookLog PRIMARY KEY,
    receivedUTC     DATETIME2(3)     NOT NULL CONSTRAINT DF_ethPrimeWebhookLog_receivedUTC DEFAULT SYSUTCDATETIME(),
    eventAction     NVARCHAR(100)    NULL,
    jobId           UNIQUEIDENTIFIER NULL,
    payload         NVARCHAR(MAX)    NOT NULL,
    headers         NVARCHAR(MAX)    NULL,
    remoteIP        NVARCHAR(64)     NULL,
    isAuthenticated BIT              NOT NULL CONSTRAINT DF_ethPrimeWebhookLog_isAuthenticated DEFAULT 0,
    processedUTC    DATETIME2(3)     NULL,
    processAttempts INT              NOT NULL CONSTRAINT DF_ethPrimeWebhookLog_processAttempts DEFAULT 0,
    processStatus   NVARCHAR(500)    NULL,
    -- primeflow additions (sql/README.md)
    publishedUTC    DATETIME2(3)     NULL,
    replayCount     INT              NOT NULL CONSTRAINT DF_ethPrimeWebhookLog_replayCount DEFAULT 0
);
GO
