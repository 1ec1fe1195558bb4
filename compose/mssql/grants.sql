-- compose's db-grants, run by sqlcmd as sa once `primectl migrate` has made
-- the objects: what primeflow_ingest may do, one object at a time. Ingest
-- stores a webhook, publishes it, and its relay publishes the rows that were
-- not (pkg/store/mssql: spPrimeInsertWebhookLog,
-- spPrimeflowGetWebhookLogUnpublished, spPrimeflowSetWebhookLogPublished, and
-- spPrimeflowCountWebhookLog for its gauges); it reads which scripts are
-- applied at start-up. Nothing else: not the mirror, not the queues. The
-- procedures reach the table through ownership chaining (all of dbo). Every
-- statement can run again.

USE primeflow;
GO

GRANT EXECUTE ON OBJECT::dbo.spPrimeInsertWebhookLog TO primeflow_ingest;
GRANT EXECUTE ON OBJECT::dbo.spPrimeflowGetWebhookLogUnpublished TO primeflow_ingest;
GRANT EXECUTE ON OBJECT::dbo.spPrimeflowSetWebhookLogPublished TO primeflow_ingest;
GRANT EXECUTE ON OBJECT::dbo.spPrimeflowCountWebhookLog TO primeflow_ingest;
GRANT EXECUTE ON TYPE::dbo.primeflowIdList TO primeflow_ingest;
GRANT SELECT ON OBJECT::dbo.primeflowSchemaMigrations TO primeflow_ingest;
GO
