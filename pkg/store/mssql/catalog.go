package mssql

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store/migration"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
)

// liveState is what a migration reads from the database before it plans:
// the history table, the dbo schema's catalog and the settings rows.
type liveState struct {
	history  []migration.Applied
	catalog  migration.Catalog
	settings map[string]string
}

// selectHistory reads the history table if there is one; the checksum
// column is read through dynamic SQL because a database migrated before it
// existed lacks it, and a batch naming it would not compile there.
const selectHistory = `IF OBJECT_ID(N'dbo.primeflowSchemaMigrations', N'U') IS NOT NULL
BEGIN
    IF COL_LENGTH(N'dbo.primeflowSchemaMigrations', N'checksum') IS NULL
        SELECT name, appliedUTC, CAST(NULL AS NVARCHAR(64)) AS checksum FROM dbo.primeflowSchemaMigrations;
    ELSE
        EXEC sys.sp_executesql N'SELECT name, appliedUTC, checksum FROM dbo.primeflowSchemaMigrations;';
END;`

// selectObjects lists the dbo schema's tables, modules and table types with
// each one's definition and ownership mark.
const selectObjects = `SELECT o.name, RTRIM(o.type) AS type, m.definition, CONVERT(NVARCHAR(4000), ep.value) AS owner
FROM sys.objects AS o
LEFT JOIN sys.sql_modules AS m ON m.object_id = o.object_id
LEFT JOIN sys.extended_properties AS ep
       ON ep.class = 1 AND ep.major_id = o.object_id AND ep.minor_id = 0 AND ep.name = N'` + migration.OwnerProperty + `'
WHERE o.schema_id = SCHEMA_ID(N'dbo') AND o.type IN ('U', 'P', 'FN', 'IF', 'TF', 'V', 'TR')
UNION ALL
SELECT t.name, 'TT', NULL, CONVERT(NVARCHAR(4000), ep.value)
FROM sys.table_types AS t
LEFT JOIN sys.extended_properties AS ep
       ON ep.class = 6 AND ep.major_id = t.user_type_id AND ep.minor_id = 0 AND ep.name = N'` + migration.OwnerProperty + `'
WHERE t.schema_id = SCHEMA_ID(N'dbo');`

// selectColumns lists the columns of the dbo schema's tables ('U') and
// table types ('TT'), in order.
const selectColumns = `SELECT 'U' AS parentType, o.name AS parent, c.column_id, c.name, ty.name AS type, c.max_length, c.precision,
       c.scale, c.is_nullable, c.is_identity, c.is_computed, cc.definition AS expression, dc.definition AS defaultValue
FROM sys.columns AS c
JOIN sys.objects AS o ON o.object_id = c.object_id
JOIN sys.types AS ty ON ty.user_type_id = c.user_type_id
LEFT JOIN sys.computed_columns AS cc ON cc.object_id = c.object_id AND cc.column_id = c.column_id
LEFT JOIN sys.default_constraints AS dc ON dc.parent_object_id = c.object_id AND dc.parent_column_id = c.column_id
WHERE o.schema_id = SCHEMA_ID(N'dbo') AND o.type = 'U'
UNION ALL
SELECT 'TT', tt.name, c.column_id, c.name, ty.name, c.max_length, c.precision,
       c.scale, c.is_nullable, c.is_identity, c.is_computed, NULL, NULL
FROM sys.table_types AS tt
JOIN sys.columns AS c ON c.object_id = tt.type_table_object_id
JOIN sys.types AS ty ON ty.user_type_id = c.user_type_id
WHERE tt.schema_id = SCHEMA_ID(N'dbo')
ORDER BY parentType, parent, column_id;`

// selectIndexes lists the named indexes of the dbo schema's tables.
const selectIndexes = `SELECT o.name, i.name
FROM sys.indexes AS i
JOIN sys.objects AS o ON o.object_id = i.object_id
WHERE o.schema_id = SCHEMA_ID(N'dbo') AND o.type = 'U' AND i.name IS NOT NULL;`

// selectSettings reads primeflowSettings if the table is there.
const selectSettings = `IF OBJECT_ID(N'dbo.primeflowSettings', N'U') IS NOT NULL
    SELECT name, value FROM dbo.primeflowSettings;`

// readState reads the history, the catalog and the settings.
func readState(ctx context.Context, q sqlrows.Querier) (liveState, error) {
	st := liveState{catalog: migration.Catalog{}, settings: map[string]string{}}
	var err error
	if st.history, err = readHistory(ctx, q); err != nil {
		return st, err
	}
	objs, err := sqlrows.All(ctx, q, selectObjects, func(sc sqlrows.Scanner) (migration.Live, error) {
		var l migration.Live
		var typ string
		if err := sc.Scan(&l.Name, &typ, scanString{&l.Definition}, scanString{&l.Owner}); err != nil {
			return l, err
		}
		l.Kind = kindOfType(typ)
		return l, nil
	})
	if err != nil {
		return st, fmt.Errorf("mssql: catalog: %w", err)
	}
	for _, l := range objs {
		st.catalog[migration.Key(l.Kind, l.Name)] = l
	}
	type colRow struct {
		parentType, parent string
		col                migration.Column
	}
	cols, err := sqlrows.All(ctx, q, selectColumns, func(sc sqlrows.Scanner) (colRow, error) {
		var r colRow
		var id, maxLen, prec, scale int64
		var typ string
		var computed bool
		err := sc.Scan(&r.parentType, &r.parent, &id, &r.col.Name, &typ, &maxLen, &prec, &scale, &r.col.Nullable,
			&r.col.Identity, &computed, scanString{&r.col.Expression}, scanString{&r.col.Default})
		r.col.Type = typeName(typ, int(maxLen), int(prec), int(scale))
		if computed {
			r.col.Type = migration.Computed
		}
		return r, err
	})
	if err != nil {
		return st, fmt.Errorf("mssql: catalog columns: %w", err)
	}
	for _, r := range cols {
		kind := migration.Table
		if r.parentType == "TT" {
			kind = migration.TableType
		}
		k := migration.Key(kind, r.parent)
		l := st.catalog[k]
		l.Columns = append(l.Columns, r.col)
		st.catalog[k] = l
	}
	idx, err := sqlrows.All(ctx, q, selectIndexes, func(sc sqlrows.Scanner) ([2]string, error) {
		var r [2]string
		err := sc.Scan(&r[0], &r[1])
		return r, err
	})
	if err != nil {
		return st, fmt.Errorf("mssql: catalog indexes: %w", err)
	}
	for _, r := range idx {
		k := migration.Key(migration.Table, r[0])
		l := st.catalog[k]
		l.Indexes = append(l.Indexes, r[1])
		st.catalog[k] = l
	}
	settings, err := sqlrows.All(ctx, q, selectSettings, func(sc sqlrows.Scanner) ([2]string, error) {
		var r [2]string
		err := sc.Scan(&r[0], scanString{&r[1]})
		return r, err
	})
	if err != nil {
		return st, fmt.Errorf("mssql: settings: %w", err)
	}
	for _, r := range settings {
		st.settings[r[0]] = r[1]
	}
	return st, nil
}

// kindOfType maps sys.objects.type (and 'TT' for a table type) to a Kind.
func kindOfType(t string) migration.Kind {
	switch t {
	case "U":
		return migration.Table
	case "P":
		return migration.Procedure
	case "FN", "IF", "TF":
		return migration.Function
	case "V":
		return migration.View
	case "TR":
		return migration.Trigger
	}
	return migration.TableType
}

// typeName writes a column's type the way the scripts declare it
// (migration.NormaliseType's form): lengths in characters, MAX for -1.
func typeName(name string, maxLen, prec, scale int) string {
	up := strings.ToUpper(name)
	switch up {
	case "NVARCHAR", "NCHAR":
		if maxLen < 0 {
			return up + "(MAX)"
		}
		return fmt.Sprintf("%s(%d)", up, maxLen/2)
	case "VARCHAR", "CHAR", "VARBINARY", "BINARY":
		if maxLen < 0 {
			return up + "(MAX)"
		}
		return fmt.Sprintf("%s(%d)", up, maxLen)
	case "DECIMAL", "NUMERIC":
		return fmt.Sprintf("%s(%d,%d)", up, prec, scale)
	case "DATETIME2", "TIME", "DATETIMEOFFSET":
		return fmt.Sprintf("%s(%d)", up, scale)
	}
	return up
}

// captureText is what a capture file holds for a live object: a module's
// definition as stored, or a table's or table type's columns and indexes as
// a CREATE statement.
func captureText(l migration.Live, at time.Time) string {
	head := fmt.Sprintf("-- %s dbo.%s as the database held it at %s, captured by primectl migrate before adopting it.\n",
		l.Kind, l.Name, at.UTC().Format(time.RFC3339))
	if l.Kind.IsModule() {
		return head + l.Definition + "\nGO\n"
	}
	var b strings.Builder
	b.WriteString(head)
	if l.Kind == migration.TableType {
		fmt.Fprintf(&b, "CREATE TYPE dbo.%s AS TABLE (\n", quoteName(l.Name))
	} else {
		fmt.Fprintf(&b, "CREATE TABLE dbo.%s (\n", quoteName(l.Name))
	}
	for i, c := range l.Columns {
		b.WriteString("    " + quoteName(c.Name) + " ")
		switch {
		case c.Type == migration.Computed:
			b.WriteString("AS " + c.Expression)
		default:
			b.WriteString(c.Type)
			if c.Identity {
				b.WriteString(" IDENTITY")
			}
			if c.Nullable {
				b.WriteString(" NULL")
			} else {
				b.WriteString(" NOT NULL")
			}
			if c.Default != "" {
				b.WriteString(" DEFAULT " + c.Default)
			}
		}
		if i < len(l.Columns)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString(");\nGO\n")
	for _, ix := range l.Indexes {
		fmt.Fprintf(&b, "-- index %s\n", ix)
	}
	return b.String()
}

// quoteName brackets a name, as QUOTENAME does.
func quoteName(s string) string { return "[" + strings.ReplaceAll(s, "]", "]]") + "]" }
