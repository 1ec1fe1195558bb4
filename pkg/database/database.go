// Package database opens the store that DATABASE_URL names.
package database

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/mssql"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlite"
	modernc "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// DefaultFile is the SQLite file under DATA_DIR when DATABASE_URL is empty.
const DefaultFile = "primeflow.db"

// Open opens "sqlite:<path>" or "sqlserver://…"; an empty url is SQLite at
// dataDir/primeflow.db.
func Open(ctx context.Context, url, dataDir string) (store.Store, error) {
	if path, ok := SQLitePath(url, dataDir); ok {
		if path == "" {
			return nil, fmt.Errorf("DATABASE_URL %q: no file after sqlite:", url)
		}
		return sqlite.Open(ctx, path)
	}
	if strings.HasPrefix(url, "sqlserver://") {
		return mssql.Open(ctx, url)
	}
	return nil, fmt.Errorf("DATABASE_URL: want sqlite:<path> or sqlserver://…, got %s", described(url))
}

// Check refuses a DATABASE_URL that names no store Open can open, and a
// DATABASE_PASSWORD that cannot go with it (WithPassword), without opening
// anything: each a config.Refusal.
func Check(url, password string) error {
	var bad error
	switch path, sqlite := SQLitePath(url, ""); {
	case sqlite && path == "":
		bad = config.Refuse("DATABASE_URL", "no file after sqlite:")
	case !sqlite && !strings.HasPrefix(url, "sqlserver://"):
		bad = config.Refuse("DATABASE_URL", "want sqlite:<path> or sqlserver://…, got %s", described(url))
	}
	_, err := WithPassword(url, password)
	return errors.Join(bad, err)
}

// WithPassword is url with password as its user's password, for a
// sqlserver:// URL whose password is given apart (DATABASE_PASSWORD, or
// DATABASE_PASSWORD_FILE from a mounted secret); a blank password leaves url
// as it is.
func WithPassword(url, password string) (string, error) {
	return WithPasswordOf("DATABASE_URL", "DATABASE_PASSWORD", url, password)
}

// WithPasswordOf is WithPassword for a URL and a password given as urlVar
// and passwordVar (primectl compare's live database: LIVE_DATABASE_URL,
// LIVE_DATABASE_PASSWORD), which its errors name.
func WithPasswordOf(urlVar, passwordVar, url, password string) (string, error) {
	if password == "" {
		return url, nil
	}
	if !strings.HasPrefix(url, "sqlserver://") {
		return "", config.Refuse(passwordVar, "is set but %s is not a sqlserver:// URL: SQLite has no password", urlVar)
	}
	u, err := neturl.Parse(url)
	if err != nil || u.User == nil || u.User.Username() == "" {
		return "", config.Refuse(passwordVar, "is set but %s names no user (sqlserver://user@host…)", urlVar)
	}
	if _, has := u.User.Password(); has {
		return "", config.Refuse(passwordVar, "is set but %s holds a password too: give it one way", urlVar)
	}
	u.User = neturl.UserPassword(u.User.Username(), password)
	return u.String(), nil
}

// Transient reports whether Open's error is a database that is not ready
// yet, which a service waits out at start: SQLite locked by another program
// for longer than its busy timeout (SQLITE_BUSY, SQLITE_LOCKED: a migration,
// a backup), or SQL Server not reachable (a network error: refused, timed
// out, its name not resolving while its container starts). Anything else —
// a path that cannot be opened, a login refused, a script missing — is the
// configuration's.
func Transient(err error) bool {
	var se *modernc.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff { // the primary code, without the extended bits
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return true
		}
		return false
	}
	var op *net.OpError
	var dns *net.DNSError
	return errors.As(err, &op) || errors.As(err, &dns)
}

// OpenExisting is Open for tools that read or change a database a service
// made (primectl): a SQLite file that does not exist is an error naming the
// path, not a new empty database that answers "0 rows".
func OpenExisting(ctx context.Context, url, dataDir string) (store.Store, error) {
	if path, ok := SQLitePath(url, dataDir); ok {
		if _, err := os.Stat(path); path != "" && errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no database at %s: run from the directory that holds the pipeline's data, or set DATA_DIR or DATABASE_URL", path)
		}
	}
	return Open(ctx, url, dataDir)
}

// SQLitePath is the file a SQLite url (or the empty one) names; ok is false
// for other stores.
func SQLitePath(url, dataDir string) (path string, ok bool) {
	switch {
	case url == "":
		return filepath.Join(dataDir, DefaultFile), true
	case strings.HasPrefix(url, "sqlite:"):
		return strings.TrimPrefix(url, "sqlite:"), true
	}
	return "", false
}

// described says what url is without what it holds: its scheme, quoted.
func described(url string) string {
	if s := scheme(url); s != "" {
		return fmt.Sprintf("a URL starting %q", s)
	}
	return "a value that is not a URL (not echoed: it may hold a password)"
}

// scheme is the scheme of a URL (what comes before its first ":", when
// that is a scheme: a letter, then letters, digits, "+", "-" or "."), which
// holds no secret; anything else, such as a connection string of
// Key=Value; pairs whose first colon comes after "Password=…", is not
// echoed at all.
func scheme(url string) string {
	i := strings.Index(url, ":")
	if i <= 0 {
		return ""
	}
	for j, r := range url[:i] {
		letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if !letter && (j == 0 || !(r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.')) {
			return ""
		}
	}
	return url[:i]
}
