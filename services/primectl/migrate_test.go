package primectl_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlite"
	"github.com/matryer/is"
)

// migrate --plan on SQLite: what the scripts touch, object by object, and
// the setting it would write; then migrate writes it.
func TestMigratePlanAndSettingOnSQLite(t *testing.T) {
	is := is.New(t)
	dir := t.TempDir()
	w := &world{t: t, env: map[string]string{"DATA_DIR": dir, "MAKESAFE_SMS_TO": " +61400000000 "}}

	out, _, err := w.run("", "migrate", "--plan")
	is.NoErr(err)
	flat := strings.Join(strings.Fields(out), " ") // the table's columns aligned any way
	for _, want := range []string{
		"SQLite scripts:", "001_webhook_log.sql pending", "032_callers.sql pending",
		"table primeAllocations absent - create (002_mirror.sql)",
		"MakesafeSMSRecipient (none) set to +61400000000 (MAKESAFE_SMS_TO)",
		"(--plan: nothing was changed)",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("the plan lacks %q:\n%s", want, out)
		}
	}
	_, err = os.Stat(filepath.Join(dir, "primeflow.db"))
	is.True(os.IsNotExist(err)) // a plan makes no database

	out, _, err = w.run("", "migrate")
	is.NoErr(err)
	is.True(strings.Contains(out, "SQLite schema is up to date")) // applied
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "primeflow.db"))
	is.NoErr(err)
	defer st.Close()
	v, found, err := st.GetSetting(context.Background(), store.SettingMakesafeSMSRecipient)
	is.NoErr(err)
	is.True(found)
	is.Equal(v, "+61400000000") // MAKESAFE_SMS_TO, trimmed

	out, _, err = w.run("", "migrate", "--plan")
	is.NoErr(err)
	is.True(strings.Contains(out, "0 to create, 0 to alter, 0 to adopt (captured first), 0 refused")) // nothing left
	is.True(strings.Contains(out, "the same as MAKESAFE_SMS_TO"))                                     // the setting holds
}

func TestMigrateRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"--adopt on SQLite", map[string]string{"DATA_DIR": dir}, []string{"--adopt", "spX"}, "--adopt is for SQL Server"},
		{"a recipient too long", map[string]string{"DATA_DIR": dir, "MAKESAFE_SMS_TO": strings.Repeat("9", 51)}, nil, "MAKESAFE_SMS_TO: at most 50"},
		{"another URL", map[string]string{"DATABASE_URL": "postgres://x"}, nil, "want sqlite:<path> or sqlserver://"},
		{"a SQL Server that does not answer", map[string]string{"DATABASE_URL": "sqlserver://sa:s3cret-pass@127.0.0.1:1?database=x&dial+timeout=2",
			"MAKESAFE_SMS_TO": "+61400000000"}, []string{"--plan"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			w := &world{t: t, env: tc.env}
			_, _, err := w.run("", append([]string{"migrate"}, tc.args...)...)
			is.True(err != nil) // refused
			if tc.want != "" {
				is.True(strings.Contains(err.Error(), tc.want)) // saying why
			}
			is.True(!strings.Contains(err.Error(), "s3cret")) // never the password
		})
	}
}
