package primectl

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/ethosbuilding/primeflow/pkg/database"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/migration"
	"github.com/ethosbuilding/primeflow/pkg/store/mssql"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlite"
)

// maxSMSRecipient is smsQueue.Recipient's length.
const maxSMSRecipient = 50

// migrate plans the database's schema against sql/ and, without --plan,
// applies it (§11: the live SQL Server is shared, so it refuses to alter a
// live object primeflow does not own unless --adopt names it, and captures
// what it adopts first). It writes the settings the spec's callers need
// (MAKESAFE_SMS_TO).
func (c *cli) migrate(ctx context.Context, args []string) error {
	fs := c.flags("migrate")
	planOnly := fs.Bool("plan", false, "say what a migration would do, object by object, and change nothing")
	adopt := fs.String("adopt", "", "comma-separated live objects primeflow does not own that the migration may alter (SQL Server)")
	captureDir := fs.String("capture", "capture", "where the definitions of adopted objects are written before they are altered")
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		fmt.Fprintf(c.stderr, "primectl migrate: unexpected argument %q\n", pos[0])
		return ErrUsage
	}
	to := strings.TrimSpace(c.cfg.MakesafeSMSTo)
	if utf8.RuneCountInString(to) > maxSMSRecipient {
		return fmt.Errorf("MAKESAFE_SMS_TO: at most %d characters (smsQueue.Recipient)", maxSMSRecipient)
	}
	settings := []migration.Setting{{Name: store.SettingMakesafeSMSRecipient, Want: to, From: "MAKESAFE_SMS_TO"}}
	var adopted []string
	for _, a := range strings.Split(*adopt, ",") {
		if a = strings.TrimSpace(a); a != "" {
			adopted = append(adopted, a)
		}
	}

	if path, ok := database.SQLitePath(c.cfg.DatabaseURL, c.cfg.DataDir); ok {
		if path == "" {
			return fmt.Errorf("DATABASE_URL %q: no file after sqlite:", c.cfg.DatabaseURL)
		}
		if len(adopted) > 0 {
			return errors.New("migrate: --adopt is for SQL Server: a SQLite file is primeflow's own")
		}
		if *planOnly {
			plan, err := sqlite.Plan(ctx, path, settings)
			if err != nil {
				return err
			}
			return c.printPlan(plan, true)
		}
		plan, err := sqlite.Migrate(ctx, path, settings)
		if err != nil {
			return err
		}
		if err := c.printPlan(plan, false); err != nil {
			return err
		}
		fmt.Fprintln(c.stdout, "SQLite schema is up to date (sql/sqlite applied; SQLite also migrates itself when a service opens it).")
		return nil
	}
	if !strings.HasPrefix(c.cfg.DatabaseURL, "sqlserver://") {
		return errors.New("DATABASE_URL: want sqlite:<path> or sqlserver://…")
	}
	db, err := sql.Open("sqlserver", c.cfg.DatabaseURL)
	if err != nil {
		return errors.New("DATABASE_URL: not a SQL Server DSN") // the DSN holds the password: never echo it
	}
	defer db.Close()
	if !*planOnly && to == "" {
		// The spec's two-parameter call names no recipient: without a
		// default its make-safe SMS would go nowhere.
		plan, err := mssql.Migrate(ctx, db, mssql.Options{PlanOnly: true, Settings: settings})
		if err != nil {
			return err
		}
		if !plan.Settings[0].Found || strings.TrimSpace(plan.Settings[0].Current) == "" {
			return errors.New("MAKESAFE_SMS_TO is required: the database holds no default make-safe SMS recipient, and the spec's callers of spMakesafeUpsertPhoneCallFromPrimeJob pass none")
		}
	}
	plan, err := mssql.Migrate(ctx, db, mssql.Options{PlanOnly: *planOnly, Adopt: adopted, CaptureDir: *captureDir, Settings: settings})
	var refused *migration.RefusedError
	if err == nil || errors.As(err, &refused) {
		if perr := c.printPlan(plan, *planOnly); perr != nil {
			return perr
		}
	}
	if err != nil {
		return err
	}
	if !*planOnly {
		if n := len(plan.Adopted()); n > 0 {
			fmt.Fprintf(c.stdout, "%d adopted objects' definitions were captured under %s first.\n", n, *captureDir)
		}
		fmt.Fprintln(c.stdout, "SQL Server schema is up to date (sql/mssql applied).")
	}
	return nil
}

// printPlan prints the plan, saying whether it was carried out.
func (c *cli) printPlan(plan migration.Plan, planOnly bool) error {
	if err := plan.Write(c.stdout); err != nil {
		return err
	}
	switch {
	case planOnly:
		fmt.Fprintln(c.stdout, "(--plan: nothing was changed)")
	case !plan.Runs():
		fmt.Fprintln(c.stdout, "Nothing to apply.")
	}
	return nil
}
