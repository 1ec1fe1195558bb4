// Package sql holds the schema and stored-procedure scripts of both database
// backends: mssql/ for SQL Server (applied by `primectl migrate`) and sqlite/
// for the embedded default (applied when the store opens). Scripts run in
// name order, once each.
package sql

import "embed"

// MSSQL holds the SQL Server scripts. Each file is split into batches on lines
// that hold only GO, the way sqlcmd does.
//
//go:embed mssql/*.sql
var MSSQL embed.FS

// SQLite holds the SQLite scripts.
//
//go:embed sqlite/*.sql
var SQLite embed.FS
