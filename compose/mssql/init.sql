-- compose's db-init: the primeflow database and its logins, before
-- `primectl migrate` runs. Run by sqlcmd as sa, which takes the scripting
-- variables PRIMEFLOW_MIGRATE_PASSWORD, PRIMEFLOW_INGEST_PASSWORD,
-- PRIMEFLOW_MAILINTAKE_PASSWORD, PRIMEFLOW_PIPELINE_PASSWORD and
-- PRIMEFLOW_OPERATORS_PASSWORD from the
-- environment (compose/.env). Every batch can run again: a restart of the
-- stack re-applies the passwords and changes nothing else.
--
--   primeflow_migrate    owns the schema: `primectl migrate` creates the
--                        tables, types and procedures of sql/mssql.
--   primeflow_ingest     ingest: the procedures that store and publish
--                        webhooks, granted one by one once they exist
--                        (compose/mssql/grants.sql, run after migrate).
--   primeflow_mailintake mail-intake, which parses mail anyone can send: the
--                        email receipts' procedures only, granted one by one
--                        once they exist (grants.sql); no role, no table.
--   primeflow_pipeline   the other services: EXECUTE on the procedures and
--                        table types of dbo (granted on the schema, so
--                        procedures added by later migrations are covered),
--                        and read/write on the tables (sql/README.md,
--                        "Permissions").
--   primeflow_operators  operators' primectl: EXECUTE on dbo (replay resets
--                        rows through a procedure) and read, no table writes.

IF DB_ID(N'primeflow') IS NULL
    CREATE DATABASE primeflow;
GO

IF SUSER_ID(N'primeflow_migrate') IS NULL
    CREATE LOGIN primeflow_migrate WITH PASSWORD = N'$(PRIMEFLOW_MIGRATE_PASSWORD)', DEFAULT_DATABASE = primeflow;
ELSE
    ALTER LOGIN primeflow_migrate WITH PASSWORD = N'$(PRIMEFLOW_MIGRATE_PASSWORD)';
GO

IF SUSER_ID(N'primeflow_ingest') IS NULL
    CREATE LOGIN primeflow_ingest WITH PASSWORD = N'$(PRIMEFLOW_INGEST_PASSWORD)', DEFAULT_DATABASE = primeflow;
ELSE
    ALTER LOGIN primeflow_ingest WITH PASSWORD = N'$(PRIMEFLOW_INGEST_PASSWORD)';
GO

IF SUSER_ID(N'primeflow_mailintake') IS NULL
    CREATE LOGIN primeflow_mailintake WITH PASSWORD = N'$(PRIMEFLOW_MAILINTAKE_PASSWORD)', DEFAULT_DATABASE = primeflow;
ELSE
    ALTER LOGIN primeflow_mailintake WITH PASSWORD = N'$(PRIMEFLOW_MAILINTAKE_PASSWORD)';
GO

IF SUSER_ID(N'primeflow_pipeline') IS NULL
    CREATE LOGIN primeflow_pipeline WITH PASSWORD = N'$(PRIMEFLOW_PIPELINE_PASSWORD)', DEFAULT_DATABASE = primeflow;
ELSE
    ALTER LOGIN primeflow_pipeline WITH PASSWORD = N'$(PRIMEFLOW_PIPELINE_PASSWORD)';
GO

IF SUSER_ID(N'primeflow_operators') IS NULL
    CREATE LOGIN primeflow_operators WITH PASSWORD = N'$(PRIMEFLOW_OPERATORS_PASSWORD)', DEFAULT_DATABASE = primeflow;
ELSE
    ALTER LOGIN primeflow_operators WITH PASSWORD = N'$(PRIMEFLOW_OPERATORS_PASSWORD)';
GO

USE primeflow;
GO

IF USER_ID(N'primeflow_migrate') IS NULL
    CREATE USER primeflow_migrate FOR LOGIN primeflow_migrate;
IF USER_ID(N'primeflow_ingest') IS NULL
    CREATE USER primeflow_ingest FOR LOGIN primeflow_ingest;
IF USER_ID(N'primeflow_mailintake') IS NULL
    CREATE USER primeflow_mailintake FOR LOGIN primeflow_mailintake;
IF USER_ID(N'primeflow_pipeline') IS NULL
    CREATE USER primeflow_pipeline FOR LOGIN primeflow_pipeline;
IF USER_ID(N'primeflow_operators') IS NULL
    CREATE USER primeflow_operators FOR LOGIN primeflow_operators;
GO

IF IS_ROLEMEMBER(N'db_owner', N'primeflow_migrate') = 0
    ALTER ROLE db_owner ADD MEMBER primeflow_migrate;
IF IS_ROLEMEMBER(N'db_datareader', N'primeflow_pipeline') = 0
    ALTER ROLE db_datareader ADD MEMBER primeflow_pipeline;
IF IS_ROLEMEMBER(N'db_datawriter', N'primeflow_pipeline') = 0
    ALTER ROLE db_datawriter ADD MEMBER primeflow_pipeline;
GRANT EXECUTE ON SCHEMA::dbo TO primeflow_pipeline;
IF IS_ROLEMEMBER(N'db_datareader', N'primeflow_operators') = 0
    ALTER ROLE db_datareader ADD MEMBER primeflow_operators;
GRANT EXECUTE ON SCHEMA::dbo TO primeflow_operators;
GO
