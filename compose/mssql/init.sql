-- compose's db-init: the primeflow database and its two logins, before
-- `primectl migrate` runs. Run by sqlcmd as sa, which takes the scripting
-- variables PRIMEFLOW_MIGRATE_PASSWORD and PRIMEFLOW_APP_PASSWORD from the
-- environment (compose/.env). Every batch can run again: a restart of the
-- stack re-applies the passwords and changes nothing else.
--
--   primeflow_migrate  owns the schema: `primectl migrate` creates the tables,
--                      types and procedures of sql/mssql.
--   primeflow_app      the services: EXECUTE on the procedures and table types
--                      of dbo (granted on the schema, so procedures added by
--                      later migrations are covered), and read/write on the
--                      tables (sql/README.md, "Permissions").

IF DB_ID(N'primeflow') IS NULL
    CREATE DATABASE primeflow;
GO

IF SUSER_ID(N'primeflow_migrate') IS NULL
    CREATE LOGIN primeflow_migrate WITH PASSWORD = N'$(PRIMEFLOW_MIGRATE_PASSWORD)', DEFAULT_DATABASE = primeflow;
ELSE
    ALTER LOGIN primeflow_migrate WITH PASSWORD = N'$(PRIMEFLOW_MIGRATE_PASSWORD)';
GO

IF SUSER_ID(N'primeflow_app') IS NULL
    CREATE LOGIN primeflow_app WITH PASSWORD = N'$(PRIMEFLOW_APP_PASSWORD)', DEFAULT_DATABASE = primeflow;
ELSE
    ALTER LOGIN primeflow_app WITH PASSWORD = N'$(PRIMEFLOW_APP_PASSWORD)';
GO

USE primeflow;
GO

IF USER_ID(N'primeflow_migrate') IS NULL
    CREATE USER primeflow_migrate FOR LOGIN primeflow_migrate;
IF USER_ID(N'primeflow_app') IS NULL
    CREATE USER primeflow_app FOR LOGIN primeflow_app;
GO

IF IS_ROLEMEMBER(N'db_owner', N'primeflow_migrate') = 0
    ALTER ROLE db_owner ADD MEMBER primeflow_migrate;
IF IS_ROLEMEMBER(N'db_datareader', N'primeflow_app') = 0
    ALTER ROLE db_datareader ADD MEMBER primeflow_app;
IF IS_ROLEMEMBER(N'db_datawriter', N'primeflow_app') = 0
    ALTER ROLE db_datawriter ADD MEMBER primeflow_app;
GRANT EXECUTE ON SCHEMA::dbo TO primeflow_app;
GO
