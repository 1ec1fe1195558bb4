package database_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/database"
	"github.com/matryer/is"
)

func TestOpen(t *testing.T) {
	ctx := context.Background()
	t.Run("empty is SQLite under the data dir", func(t *testing.T) {
		is := is.New(t)
		dir := t.TempDir()
		s, err := database.Open(ctx, "", dir)
		is.NoErr(err)
		defer s.Close()
		is.NoErr(s.Ping(ctx))
		matches, _ := filepath.Glob(filepath.Join(dir, database.DefaultFile))
		is.Equal(len(matches), 1) // the file is under DATA_DIR
	})
	t.Run("sqlite:<path>", func(t *testing.T) {
		is := is.New(t)
		s, err := database.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "x.db"), "unused")
		is.NoErr(err)
		s.Close()
	})
	t.Run("OpenExisting refuses a file that is not there", func(t *testing.T) {
		is := is.New(t)
		dir := t.TempDir()
		_, err := database.OpenExisting(ctx, "", dir)
		is.True(err != nil)                                                              // refused
		is.True(strings.Contains(err.Error(), filepath.Join(dir, database.DefaultFile))) // naming the path
		matches, _ := filepath.Glob(filepath.Join(dir, "*"))
		is.Equal(len(matches), 0) // and nothing was created
		s, err := database.Open(ctx, "", dir)
		is.NoErr(err)
		s.Close()
		s, err = database.OpenExisting(ctx, "", dir) // once a service made it, it opens
		is.NoErr(err)
		s.Close()
	})
	t.Run("a scheme it does not know", func(t *testing.T) {
		is := is.New(t)
		_, err := database.Open(ctx, "postgres://user:secret@host/db", "")
		is.True(err != nil)                                  // refused
		is.True(!strings.Contains(err.Error(), "secret"))    // without echoing the password
		is.True(strings.Contains(err.Error(), `"postgres"`)) // naming the scheme
	})
	t.Run("a connection string of Key=Value pairs", func(t *testing.T) {
		is := is.New(t)
		_, err := database.Open(ctx, "Server=mssql;User Id=primeflow;Password=s3cret:x;Database=primeflow;", "")
		is.True(err != nil)                               // refused
		is.True(!strings.Contains(err.Error(), "s3cret")) // without echoing the password, which comes before its first colon
		is.True(!strings.Contains(err.Error(), "Password"))
		is.True(strings.Contains(err.Error(), "not a URL"))
	})
	t.Run("sqlite: without a path", func(t *testing.T) {
		is := is.New(t)
		_, err := database.Open(ctx, "sqlite:", "")
		is.True(err != nil)
	})
}

func TestWithPassword(t *testing.T) {
	for _, tc := range []struct{ url, password, want, err string }{
		{"sqlserver://primeflow_ingest@mssql:1433?database=primeflow", "p@ss:w/rd", "sqlserver://primeflow_ingest:p%40ss%3Aw%2Frd@mssql:1433?database=primeflow", ""},
		{"sqlserver://u:old@mssql", "", "sqlserver://u:old@mssql", ""},
		{"", "", "", ""},
		{"sqlserver://u:old@mssql", "new", "", "holds a password too"},
		{"sqlserver://mssql", "new", "", "names no user"},
		{"sqlite:/tmp/x.db", "new", "", "not a sqlserver:// URL"},
		{"sqlserver://u:old@mssql", "new", "", "DATABASE_PASSWORD: is set but DATABASE_URL holds a password too"},
	} {
		t.Run(tc.url+" "+tc.password, func(t *testing.T) {
			is := is.New(t)
			got, err := database.WithPassword(tc.url, tc.password)
			if tc.err != "" {
				is.True(err != nil && strings.Contains(err.Error(), tc.err)) // refused, saying why
				is.True(!strings.Contains(err.Error(), tc.password))         // never with the password
				return
			}
			is.NoErr(err)
			is.Equal(got, tc.want) // the password in the URL, escaped
		})
	}
}

// WithPasswordOf names the variables it is given.
func TestWithPasswordOf(t *testing.T) {
	is := is.New(t)
	got, err := database.WithPasswordOf("LIVE_DATABASE_URL", "LIVE_DATABASE_PASSWORD", "sqlserver://reader@live:1433?database=prod", "pw")
	is.NoErr(err)
	is.Equal(got, "sqlserver://reader:pw@live:1433?database=prod")
	_, err = database.WithPasswordOf("LIVE_DATABASE_URL", "LIVE_DATABASE_PASSWORD", "sqlite:/x.db", "pw")
	is.True(err != nil && strings.Contains(err.Error(), "LIVE_DATABASE_PASSWORD: is set but LIVE_DATABASE_URL is not a sqlserver:// URL"))
}

// TestTransient: what a service waits out at start (a database another
// program holds, a server that does not answer) and what it does not (a
// path that cannot be, whose error, like a network error's, holds an errno).
func TestTransient(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "primeflow.db")
	s, err := database.Open(ctx, "sqlite:"+path, "")
	is.NoErr(err)
	is.NoErr(s.Close())
	other, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate&_pragma=busy_timeout(100)")
	is.NoErr(err)
	defer other.Close()
	tx, err := other.BeginTx(ctx, nil)
	is.NoErr(err)
	defer tx.Rollback()
	locked, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate&_pragma=busy_timeout(100)")
	is.NoErr(err)
	defer locked.Close()
	_, busy := locked.BeginTx(ctx, nil)
	is.True(busy != nil)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	is.NoErr(err)
	addr := ln.Addr().String()
	ln.Close()
	_, refused := net.Dial("tcp", addr)
	is.True(refused != nil)

	_, notADir := database.Open(ctx, "sqlite:"+filepath.Join(path, "x.db"), "")
	is.True(notADir != nil)

	is.True(database.Transient(fmt.Errorf("sqlite: migrate: %w", busy))) // a database held by another program
	is.True(database.Transient(fmt.Errorf("mssql: %w", refused)))        // a server not answering
	is.True(!database.Transient(notADir))                                // a path that cannot be
	is.True(!database.Transient(errors.New("login failed for user")))    // anything else
}
