-- compose's db-grants, run by sqlcmd as sa once `primectl migrate` has made
-- the objects: what primeflow_ingest and primeflow_mailintake may do, one
-- object at a time, and nothing more (neither is in a role, nor granted on
-- the schema; compose/compose_test.go checks both lists against the code).
--
-- Ingest stores a webhook, publishes it, and its relay publishes the rows
-- that were not (pkg/store/mssql: spPrimeInsertWebhookLog,
-- spPrimeflowGetWebhookLogUnpublished, spPrimeflowSetWebhookLogPublished, and
-- spPrimeflowCountWebhookLog for its gauges); it reads which scripts are
-- applied at start-up. Nothing else: not the mirror, not the queues.
--
-- The mail intake parses mail anyone can send to the mailbox: it records
-- each email's receipt (pkg/store/mssql, emailjobs.go:
-- spPrimeEmailJobRegisteredInsert, spPrimeflowEmailJobRegisteredUpdate,
-- spPrimeflowEmailJobRegisteredGet) and reads which scripts are applied,
-- and may do nothing else: not write smsQueue (whose texts makesafe sends
-- to any number), not read the mirror's customers.
--
-- The procedures reach the tables through ownership chaining (all of dbo).
-- Every statement can run again.

USE primeflow;
GO

GRANT EXECUTE ON OBJECT::dbo.spPrimeInsertWebhookLog TO primeflow_ingest;
GRANT EXECUTE ON OBJECT::dbo.spPrimeflowGetWebhookLogUnpublished TO primeflow_ingest;
GRANT EXECUTE ON OBJECT::dbo.spPrimeflowSetWebhookLogPublished TO primeflow_ingest;
GRANT EXECUTE ON OBJECT::dbo.spPrimeflowCountWebhookLog TO primeflow_ingest;
GRANT EXECUTE ON TYPE::dbo.primeflowIdList TO primeflow_ingest;
GRANT SELECT ON OBJECT::dbo.primeflowSchemaMigrations TO primeflow_ingest;
GO

GRANT EXECUTE ON OBJECT::dbo.spPrimeEmailJobRegisteredInsert TO primeflow_mailintake;
GRANT EXECUTE ON OBJECT::dbo.spPrimeflowEmailJobRegisteredUpdate TO primeflow_mailintake;
GRANT EXECUTE ON OBJECT::dbo.spPrimeflowEmailJobRegisteredGet TO primeflow_mailintake;
GRANT SELECT ON OBJECT::dbo.primeflowSchemaMigrations TO primeflow_mailintake;
GO
