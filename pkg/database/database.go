// Package database opens the store that DATABASE_URL names.
package database

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/mssql"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlite"
)

// DefaultFile is the SQLite file under DATA_DIR when DATABASE_URL is empty.
const DefaultFile = "primeflow.db"

// Open opens "sqlite:<path>" or "sqlserver://…"; an empty url is SQLite at
// dataDir/primeflow.db.
func Open(ctx context.Context, url, dataDir string) (store.Store, error) {
	switch {
	case url == "":
		return sqlite.Open(ctx, filepath.Join(dataDir, DefaultFile))
	case strings.HasPrefix(url, "sqlite:"):
		path := strings.TrimPrefix(url, "sqlite:")
		if path == "" {
			return nil, fmt.Errorf("DATABASE_URL %q: no file after sqlite:", url)
		}
		return sqlite.Open(ctx, path)
	case strings.HasPrefix(url, "sqlserver://"):
		return mssql.Open(ctx, url)
	default:
		return nil, fmt.Errorf("DATABASE_URL: want sqlite:<path> or sqlserver://…, got a URL starting %q", scheme(url))
	}
}

// scheme is the part of a URL before "://" or ":", which holds no secret.
func scheme(url string) string {
	if i := strings.Index(url, ":"); i >= 0 {
		return url[:i]
	}
	return "?"
}
