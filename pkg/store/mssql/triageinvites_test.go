package mssql

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/store"
	schema "github.com/ethosbuilding/primeflow/sql"
	"github.com/matryer/is"
)

// The spec's insert of a triage invite (§5.1 step 6: "skips any job that
// already has an invite pending", 011's procedure, which the live processor
// still runs through the cutover) and primeflow's own run against the
// schema the scripts make, on both backends: each checks, under UPDLOCK and
// HOLDLOCK, for a row of the job that every unique index of
// ethTriageInviteQueue would hold, so where it would collide it skips
// instead of failing the event (a failure there retries and caps it, and the
// invite is lost).
func TestEveryInviteInsertFitsTheUniqueIndexes(t *testing.T) {
	is := is.New(t)
	inserts := inviteInserts(code(readAll(t, schema.MSSQL, "mssql")))
	is.True(len(inserts) >= 2) // 011's, the spec's, and primeflow's
	is.True(slices.ContainsFunc(inserts, func(g inviteGuard) bool {
		return slices.Equal(g.conds, []string{"sentutc is null"})
	})) // the spec's rule is among them
	for _, backend := range []struct{ name, text string }{
		{"SQL Server", readAll(t, schema.MSSQL, "mssql")},
		{"SQLite", readAll(t, schema.SQLite, "sqlite")},
	} {
		t.Run(backend.name, func(t *testing.T) {
			is := is.New(t)
			unique := inviteUniqueIndexes(code(backend.text))
			is.True(len(unique) > 0) // at most one pending invite a job is still the database's
			for name, filter := range unique {
				for _, g := range inserts {
					for _, c := range g.conds {
						if !slices.Contains(filter, c) {
							t.Errorf("%s (WHERE %s) holds rows the insert %q does not see, as it looks only for %s: it fails where it should skip",
								name, strings.Join(filter, " AND "), g.stmt, c)
						}
					}
				}
			}
		})
	}
	for _, g := range inserts {
		hints := strings.ToUpper(g.hints)
		if !strings.Contains(hints, "UPDLOCK") || !(strings.Contains(hints, "HOLDLOCK") || strings.Contains(hints, "SERIALIZABLE")) {
			t.Errorf("%q checks the job's invites WITH (%s): a check then insert needs UPDLOCK and HOLDLOCK", g.stmt, g.hints)
		}
	}
}

// The scripts' minute between the job as an invite saw it and a later
// status change is store.ArrivalSlack, as SQLite's statements take it.
func TestTheArrivalSlackIsTheStore(t *testing.T) {
	is := is.New(t)
	uses := regexp.MustCompile(`(?i)DATEADD\s*\(\s*SECOND\s*,\s*(\d+)\s*,\s*\w+\.jobUpdatedAt\s*\)`).FindAllStringSubmatch(code(readAll(t, schema.MSSQL, "mssql")), -1)
	is.True(len(uses) >= 2) // the close and the open
	for _, u := range uses {
		is.Equal(u[1], strconv.Itoa(int(store.ArrivalSlack.Seconds()))) // in seconds
	}
}

// inviteGuard is an insert into ethTriageInviteQueue and the check it makes
// first: NOT EXISTS a row of the job with conds.
type inviteGuard struct {
	stmt  string
	hints string
	conds []string
}

// inviteInserts reads every INSERT INTO dbo.ethTriageInviteQueue of the
// scripts' code with the NOT EXISTS check on the table it makes.
func inviteInserts(c string) []inviteGuard {
	var out []inviteGuard
	check := regexp.MustCompile(`(?is)^SELECT\s+1\s+FROM\s+dbo\.ethTriageInviteQueue\s+AS\s+(\w+)\s+WITH\s*\(([^)]*)\)\s*WHERE\s+(.*)$`)
	for _, loc := range regexp.MustCompile(`(?i)\bINSERT\s+INTO\s+dbo\.ethTriageInviteQueue\b`).FindAllStringIndex(c, -1) {
		end := strings.IndexByte(c[loc[0]:], ';')
		stmt := c[loc[0] : loc[0]+end]
		for _, ne := range regexp.MustCompile(`(?i)\bNOT\s+EXISTS\s*\(`).FindAllStringIndex(stmt, -1) {
			open := ne[1] - 1
			m := check.FindStringSubmatch(strings.TrimSpace(stmt[open+1 : closing(stmt, open)]))
			if m == nil {
				continue
			}
			g := inviteGuard{stmt: strings.Join(strings.Fields(stmt), " "), hints: m[2]}
			for _, cond := range conjuncts(m[3], m[1]) {
				if !strings.Contains(cond, "jobid") {
					g.conds = append(g.conds, cond)
				}
			}
			out = append(out, g)
		}
	}
	return out
}

// inviteUniqueIndexes replays the scripts' CREATE UNIQUE INDEX and DROP
// INDEX on ethTriageInviteQueue in order and returns the unique indexes
// left, each with its filter's conditions.
func inviteUniqueIndexes(c string) map[string][]string {
	create := regexp.MustCompile(`(?is)\bCREATE\s+UNIQUE\s+(?:NONCLUSTERED\s+)?INDEX\s+(\w+)\s+ON\s+(?:dbo\.)?ethTriageInviteQueue\s*\(([^)]*)\)\s*(?:WHERE\s+([^;]+))?;`)
	drop := regexp.MustCompile(`(?is)\bDROP\s+INDEX\s+(\w+)`)
	type event struct {
		at     int
		name   string
		filter []string
		drop   bool
	}
	var evs []event
	for _, m := range create.FindAllStringSubmatchIndex(c, -1) {
		evs = append(evs, event{at: m[0], name: c[m[2]:m[3]], filter: conjuncts(submatch(c, m, 3), "")})
	}
	for _, m := range drop.FindAllStringSubmatchIndex(c, -1) {
		evs = append(evs, event{at: m[0], name: c[m[2]:m[3]], drop: true})
	}
	slices.SortFunc(evs, func(a, b event) int { return a.at - b.at })
	out := map[string][]string{}
	for _, e := range evs {
		if e.drop {
			delete(out, strings.ToLower(e.name))
		} else {
			out[strings.ToLower(e.name)] = e.filter
		}
	}
	return out
}

func submatch(s string, m []int, i int) string {
	if m[2*i] < 0 {
		return ""
	}
	return s[m[2*i]:m[2*i+1]]
}

// conjuncts splits a condition on its top-level ANDs, each in lower case
// with one space between words, brackets, outer parentheses and the alias
// (alias.column) taken off.
func conjuncts(cond, alias string) []string {
	var out []string
	for _, p := range regexp.MustCompile(`(?i)\s+AND\s+`).Split(strings.TrimSpace(cond), -1) {
		p = strings.NewReplacer("[", "", "]", "").Replace(p)
		for strings.HasPrefix(p, "(") && closing(p, 0) == len(p)-1 {
			p = strings.TrimSpace(p[1 : len(p)-1])
		}
		if alias != "" {
			p = regexp.MustCompile(`(?i)\b`+alias+`\.`).ReplaceAllString(p, "")
		}
		if p = strings.ToLower(strings.Join(strings.Fields(p), " ")); p != "" {
			out = append(out, p)
		}
	}
	return out
}
