package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"

	"github.com/ethosbuilding/primeflow/pkg/store/migration"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
)

// Plan plans a migration of the database at path to sql/sqlite, reading it
// without changing it: which scripts are applied, pending or changed, and
// each table and index the scripts create, absent, the same or different
// (SQLite's equivalent of migrate --plan on SQL Server; the file is
// primeflow's own, so everything in it counts as primeflow's). A missing
// file plans every script. settings get the values the database holds.
func Plan(ctx context.Context, file string, settings []migration.Setting) (migration.Plan, error) {
	scripts, err := loadScripts()
	if err != nil {
		return migration.Plan{}, err
	}
	var history []migration.Applied
	catalog := migration.Catalog{}
	current := map[string]string{}
	if _, err := os.Stat(file); err == nil {
		db, err := sql.Open("sqlite", "file:"+file+"?"+url.Values{"mode": {"ro"}, "_pragma": {"busy_timeout(10000)"}}.Encode())
		if err != nil {
			return migration.Plan{}, fmt.Errorf("sqlite: %w", err)
		}
		defer db.Close()
		if history, catalog, current, err = readCatalog(ctx, db); err != nil {
			return migration.Plan{}, err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return migration.Plan{}, fmt.Errorf("sqlite: %w", err)
	}
	plan, err := migration.Decide(migration.Status(scripts, history, false), catalog, false, nil)
	plan.Backend = "SQLite"
	for _, s := range settings {
		s.Current, s.Found = current[s.Name]
		plan.Settings = append(plan.Settings, s)
	}
	return plan, err
}

// Migrate brings the database at path up to date (making it if need be, as
// Open does), writes the settings that differ, and returns the plan it
// acted on.
func Migrate(ctx context.Context, path string, settings []migration.Setting) (migration.Plan, error) {
	plan, err := Plan(ctx, path, settings)
	if err != nil {
		return plan, err
	}
	s, err := Open(ctx, path)
	if err != nil {
		return plan, err
	}
	defer s.Close()
	for _, set := range plan.Settings {
		if set.Want == "" || (set.Found && set.Current == set.Want) {
			continue
		}
		if err := s.SetSetting(ctx, set.Name, set.Want); err != nil {
			return plan, err
		}
	}
	return plan, nil
}

// readCatalog reads the history, the tables with their columns and indexes,
// and the settings of a SQLite database.
func readCatalog(ctx context.Context, db *sql.DB) ([]migration.Applied, migration.Catalog, map[string]string, error) {
	catalog := migration.Catalog{}
	settings := map[string]string{}
	tables, err := sqlrows.All(ctx, db, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\_%' ESCAPE '\'`, sqlrows.Text)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("sqlite: catalog: %w", err)
	}
	has := map[string]bool{}
	for _, t := range tables {
		has[t] = true
		cols, err := sqlrows.All(ctx, db, `SELECT name, type, hidden FROM pragma_table_xinfo(?) ORDER BY cid`, func(sc sqlrows.Scanner) (migration.Column, error) {
			var c migration.Column
			var hidden int
			err := sc.Scan(&c.Name, &c.Type, &hidden)
			c.Type = migration.NormaliseType(c.Type)
			if hidden == 2 || hidden == 3 { // a generated column
				c.Type = migration.Computed
			}
			return c, err
		}, t)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("sqlite: catalog %s: %w", t, err)
		}
		catalog[migration.Key(migration.Table, t)] = migration.Live{Kind: migration.Table, Name: t, Columns: cols}
	}
	idx, err := sqlrows.All(ctx, db, `SELECT tbl_name, name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL`,
		func(sc sqlrows.Scanner) ([2]string, error) {
			var r [2]string
			err := sc.Scan(&r[0], &r[1])
			return r, err
		})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("sqlite: catalog indexes: %w", err)
	}
	for _, r := range idx {
		k := migration.Key(migration.Table, r[0])
		l := catalog[k]
		l.Indexes = append(l.Indexes, r[1])
		catalog[k] = l
	}
	var history []migration.Applied
	if has["primeflowSchemaMigrations"] {
		checksum := "NULL"
		for _, c := range catalog[migration.Key(migration.Table, "primeflowSchemaMigrations")].Columns {
			if c.Name == "checksum" {
				checksum = "checksum"
			}
		}
		history, err = sqlrows.All(ctx, db, `SELECT name, appliedUTC, `+checksum+` FROM primeflowSchemaMigrations`,
			func(sc sqlrows.Scanner) (migration.Applied, error) {
				var a migration.Applied
				err := sc.Scan(&a.Name, scanTime{&a.AppliedUTC}, scanString{&a.Checksum})
				a.Name = path.Base(a.Name) // rows written before checksums were kept name the path (migrate)
				return a, err
			})
		if err != nil {
			return nil, nil, nil, fmt.Errorf("sqlite: migration history: %w", err)
		}
	}
	if has["primeflowSettings"] {
		rows, err := sqlrows.All(ctx, db, `SELECT name, value FROM primeflowSettings`, func(sc sqlrows.Scanner) ([2]string, error) {
			var r [2]string
			err := sc.Scan(&r[0], scanString{&r[1]})
			return r, err
		})
		if err != nil {
			return nil, nil, nil, fmt.Errorf("sqlite: settings: %w", err)
		}
		for _, r := range rows {
			settings[r[0]] = r[1]
		}
	}
	return history, catalog, settings, nil
}
