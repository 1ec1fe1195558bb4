package mssql

import (
	"context"
	"database/sql"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/store"
	schema "github.com/ethosbuilding/primeflow/sql"
	"github.com/matryer/is"
)

// identifyBranch is one SELECT of spPrimeIdentifyGuid's probe or sweep.
type identifyBranch struct {
	order         int
	entity, table string // the name returned, the table read
	guard         string // the @ExpectedEntity literal it is guarded by; "" when none
	key           string // the column compared with @Id
}

// identifyProc returns spPrimeIdentifyGuid's text, comments removed, strings kept.
func identifyProc(t *testing.T) string {
	t.Helper()
	head := regexp.MustCompile(`(?i)CREATE\s+OR\s+ALTER\s+PROCEDURE\s+dbo\.spPrimeIdentifyGuid\b`)
	var found []string
	for _, sc := range loaded(t) {
		for _, b := range sc.batches {
			if head.MatchString(code(b.sql)) {
				found = append(found, regexp.MustCompile(`--[^\n]*`).ReplaceAllString(b.sql, ""))
			}
		}
	}
	if len(found) != 1 {
		t.Fatalf("spPrimeIdentifyGuid is defined %d times in sql/mssql", len(found))
	}
	return found[0]
}

// identifyBranches reads the SELECTs of one UNION ALL list.
func identifyBranches(text string) []identifyBranch {
	re := regexp.MustCompile(`(?i)SELECT\s+(\d+)\s*,\s*N'(\w+)'\s+FROM\s+dbo\.(\w+)\s+WHERE\s+(?:@ExpectedEntity\s*=\s*N'(\w+)'\s+AND\s+)?(\w+)\s*=\s*@Id\b`)
	var out []identifyBranch
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		n, _ := strconv.Atoi(m[1])
		out = append(out, identifyBranch{order: n, entity: m[2], table: m[3], guard: m[4], key: m[5]})
	}
	return out
}

// spPrimeIdentifyGuid probes exactly store.IdentifyTables (§4.2), in order,
// each by its key: first the expected table alone, each branch guarded by its
// own name and the statement recompiled so the other branches leave the
// plan; then, only when that found nothing, all of them.
func TestIdentifyProcListsTheTables(t *testing.T) {
	is := is.New(t)
	proc := identifyProc(t)
	cols := tables(readAll(t, schema.MSSQL, "mssql"))

	parts := regexp.MustCompile(`(?i)OPTION\s*\(\s*RECOMPILE\s*\)\s*;`).Split(proc, -1)
	is.Equal(len(parts), 2) // one statement is recompiled: the probe
	probeAt := regexp.MustCompile(`(?i)IF\s+@ExpectedEntity\s+IS\s+NOT\s+NULL\s+INSERT\s+INTO\s+@found\b`).FindStringIndex(parts[0])
	is.True(probeAt != nil) // the probe runs only when an entity is expected
	probe := identifyBranches(parts[0][probeAt[0]:])
	sweepAt := regexp.MustCompile(`(?i)IF\s+NOT\s+EXISTS\s*\(\s*SELECT\s+1\s+FROM\s+@found\s*\)\s*INSERT\s+INTO\s+@found\b`).FindStringIndex(parts[1])
	is.True(sweepAt != nil) // the sweep runs only when the probe found nothing
	sweep := identifyBranches(parts[1][sweepAt[0]:])
	is.True(regexp.MustCompile(`(?i)SELECT\s+entity\s+FROM\s+@found\s+ORDER\s+BY\s+probeOrder\s*;\s*END\b`).MatchString(parts[1])) // one result set, in probe order

	for _, tc := range []struct {
		name     string
		branches []identifyBranch
		guarded  bool
	}{
		{"probe", probe, true},
		{"sweep", sweep, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			is.Equal(len(tc.branches), len(store.IdentifyTables)) // a branch a table, no more
			for i, b := range tc.branches {
				if i >= len(store.IdentifyTables) {
					break
				}
				want := store.IdentifyTables[i]
				is.Equal(b.order, i+1)                         // numbered in probe order
				is.Equal(b.table, want.Table)                  // the table of store.IdentifyTables, in its order
				is.Equal(b.entity, b.table)                    // returns the name of the table it read
				is.Equal(b.key, want.Key)                      // compares the table's key with @Id
				is.True(slices.Contains(cols[b.table], b.key)) // a column of the table in sql/mssql
				if tc.guarded {
					is.Equal(b.guard, b.table) // runs only when that table is expected
				} else {
					is.Equal(b.guard, "") // runs whatever is expected
				}
			}
		})
	}
}

// The parameters §4.2 names: @Id, and @ExpectedEntity, which may be left out.
func TestIdentifyProcParameters(t *testing.T) {
	is := is.New(t)
	m, ok := modules(t, loaded(t))["spPrimeIdentifyGuid"]
	is.True(ok) // spelled as the spec spells it
	is.Equal(len(m.params), 2)
	is.Equal(m.params[0].name, "Id")
	is.Equal(m.params[0].typ, "UNIQUEIDENTIFIER")
	is.Equal(m.params[1].name, "ExpectedEntity")
	is.Equal(strings.ToUpper(m.params[1].def), "NULL") // optional: no entity expected
}

// The reader of the test above finds a branch that drifts.
func TestIdentifyBranchesReader(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []identifyBranch
	}{
		{"guarded", "SELECT 1, N'primeJobs' FROM dbo.primeJobs WHERE @ExpectedEntity = N'primeJobs' AND jobId = @Id",
			[]identifyBranch{{1, "primeJobs", "primeJobs", "primeJobs", "jobId"}}},
		{"wrong guard", "UNION ALL SELECT 2, N'primeUsers' FROM dbo.primeUsers WHERE @ExpectedEntity = N'primeJobs' AND userId = @Id",
			[]identifyBranch{{2, "primeUsers", "primeUsers", "primeJobs", "userId"}}},
		{"unguarded, wrong name", "SELECT 3, N'primeUser' FROM dbo.primeUsers WHERE userId = @Id",
			[]identifyBranch{{3, "primeUser", "primeUsers", "", "userId"}}},
		{"compares something else", "SELECT 4, N'primeUsers' FROM dbo.primeUsers WHERE userId = @Other", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			is.Equal(identifyBranches(tc.text), tc.want) // what the reader sees
		})
	}
}

// On SQL Server: a GUID in two tables is found in both by the sweep, and only
// in the expected one by the probe; a miss of the probe falls back to the sweep.
func TestIdentifyOnServer(t *testing.T) {
	s, db := server(t)
	ctx := context.Background()
	const id = "7d3f8e21-9c4b-4d1e-8f6a-5b2c9e0a1d34"
	for _, table := range []string{store.TableUsers, store.TablePerils} {
		key := ""
		for _, it := range store.IdentifyTables {
			if it.Table == table {
				key = it.Key
			}
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO dbo."+table+" ("+key+", syncedUTC) VALUES (@id, SYSUTCDATETIME())", sql.Named("id", mustGUID(t, id))); err != nil {
			t.Fatalf("insert into %s: %v", table, err)
		}
	}
	for _, tc := range []struct {
		name, expected string
		want           []string
	}{
		{"expected, found", store.TablePerils, []string{store.TablePerils}},
		{"expected elsewhere: the sweep", store.TableJobs, []string{store.TableUsers, store.TablePerils}},
		{"nothing expected: the sweep", "", []string{store.TableUsers, store.TablePerils}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			got, err := s.IdentifyGuid(ctx, strings.ToUpper(id), tc.expected)
			is.NoErr(err)
			is.Equal(got, tc.want) // the tables, in probe order
		})
	}
}

func mustGUID(t *testing.T, s string) any {
	t.Helper()
	g, err := parseGUID(s)
	if err != nil {
		t.Fatal(err)
	}
	return g
}
