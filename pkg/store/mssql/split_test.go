package mssql

import (
	"strings"
	"testing"

	"github.com/matryer/is"
)

func TestSplitBatches(t *testing.T) {
	type want struct {
		sql   string // trimmed
		count int
		line  int
	}
	for _, tc := range []struct {
		name   string
		script string
		want   []want
	}{
		{"one batch, no GO", "SELECT 1;", []want{{"SELECT 1;", 1, 1}}},
		{"GO ends a batch", "SELECT 1;\nGO\nSELECT 2;\nGO\n", []want{{"SELECT 1;", 1, 1}, {"SELECT 2;", 1, 3}}},
		{"lower case and spaces", "SELECT 1;\n  go  \nSELECT 2;\n\tGo\t\n", []want{{"SELECT 1;", 1, 1}, {"SELECT 2;", 1, 3}}},
		{"trailing comment", "SELECT 1;\nGO -- done\nSELECT 2;", []want{{"SELECT 1;", 1, 1}, {"SELECT 2;", 1, 3}}},
		{"repeat count", "INSERT INTO t DEFAULT VALUES;\nGO 3\n", []want{{"INSERT INTO t DEFAULT VALUES;", 3, 1}}},
		{"CRLF line ends", "SELECT 1;\r\nGO\r\nSELECT 2;\r\n", []want{{"SELECT 1;", 1, 1}, {"SELECT 2;", 1, 3}}},
		{"blank batches dropped", "GO\n\nGO\nSELECT 1;", []want{{"SELECT 1;", 1, 4}}},
		{"GO in a line comment", "SELECT 1; -- GO\n-- GO\nSELECT 2;", []want{{"SELECT 1; -- GO\n-- GO\nSELECT 2;", 1, 1}}},
		{"GO in a block comment", "/*\nGO\n*/\nSELECT 1;\nGO\nSELECT 2;", []want{{"/*\nGO\n*/\nSELECT 1;", 1, 1}, {"SELECT 2;", 1, 6}}},
		{"nested block comments", "/* outer /* inner */\nGO\n*/ SELECT 1;", []want{{"/* outer /* inner */\nGO\n*/ SELECT 1;", 1, 1}}},
		{"GO in a string", "SELECT N'a\nGO\nb';\nGO\nSELECT 2;", []want{{"SELECT N'a\nGO\nb';", 1, 1}, {"SELECT 2;", 1, 5}}},
		{"doubled quotes stay in the string", "SELECT 'it''s\nGO\n';", []want{{"SELECT 'it''s\nGO\n';", 1, 1}}},
		{"GO in a bracketed identifier", "SELECT 1 AS [a]]\nGO\n];", []want{{"SELECT 1 AS [a]]\nGO\n];", 1, 1}}},
		{"GO in a double-quoted identifier", "SELECT 1 AS \"a\nGO\n\";", []want{{"SELECT 1 AS \"a\nGO\n\";", 1, 1}}},
		{"apostrophe in a line comment", "-- it's fine\nSELECT 1;\nGO\nSELECT 2;", []want{{"-- it's fine\nSELECT 1;", 1, 1}, {"SELECT 2;", 1, 4}}},
		{"GOTO is not GO", "GOTO done;\ndone:\nSELECT 1;", []want{{"GOTO done;\ndone:\nSELECT 1;", 1, 1}}},
		{"GO with text before it is code", "SELECT 1 GO\nSELECT 2;", []want{{"SELECT 1 GO\nSELECT 2;", 1, 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			got, err := splitBatches(tc.script)
			is.NoErr(err)                    // the script splits
			is.Equal(len(got), len(tc.want)) // the number of batches
			for i, w := range tc.want {
				is.Equal(strings.TrimSpace(got[i].sql), w.sql) // the batch's text
				is.Equal(got[i].count, w.count)                // how many times it runs
				is.Equal(got[i].line, w.line)                  // where it starts
			}
		})
	}
}

func TestSplitBatchesKeepsLinesForServerErrors(t *testing.T) {
	is := is.New(t)
	got, err := splitBatches("SELECT 1;\nGO\n\n-- why\nSELECT 2;\n")
	is.NoErr(err)
	is.Equal(len(got), 2)
	is.Equal(got[1].line, 3)                      // the batch starts right after GO
	is.Equal(got[1].sql, "\n-- why\nSELECT 2;\n") // blank lines and comments kept, so server line 3 is script line 5
}

func TestSplitBatchesErrors(t *testing.T) {
	for _, tc := range []struct {
		name, script, want string
	}{
		{"GO 0", "SELECT 1;\nGO 0", "line 2: GO takes a count of 1 or more"},
		{"GO with a word", "SELECT 1;\nGO away", "line 2: GO takes a count"},
		{"GO with two counts", "SELECT 1;\nGO 1 2", "line 2: GO takes at most a count"},
		{"open block comment", "SELECT 1;\n/* never\nGO\n", "line 2: a block comment never ends"},
		{"open string", "SELECT 'abc;\nGO\n", "line 1: a string never ends"},
		{"open identifier", "SELECT [abc;\nGO\n", "line 1: a quoted identifier never ends"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			_, err := splitBatches(tc.script)
			is.True(err != nil)                             // the script is refused
			is.True(strings.Contains(err.Error(), tc.want)) // and the error says where and why
		})
	}
}

func TestParseScriptDirective(t *testing.T) {
	is := is.New(t)
	sc, err := parseScript("009_rcsi.sql", "-- Needs to run outside a transaction.\n"+noTxDirective+"\nALTER DATABASE CURRENT SET READ_COMMITTED_SNAPSHOT ON;\nGO\n")
	is.NoErr(err)
	is.True(sc.noTx)             // the directive takes the script out of a transaction
	is.Equal(len(sc.batches), 1) // one batch
	sc, err = parseScript("010_x.sql", "SELECT 1;")
	is.NoErr(err)
	is.True(!sc.noTx) // scripts run in a transaction by default
}

func TestLoadScripts(t *testing.T) {
	is := is.New(t)
	scripts, err := loadScripts()
	is.NoErr(err)                                    // every embedded script splits
	is.True(len(scripts) > 0)                        // there are scripts
	is.Equal(scripts[0].name, "001_webhook_log.sql") // named by base name, in order
	for i, sc := range scripts {
		is.True(len(sc.batches) > 0) // each script has batches
		is.True(!sc.noTx)            // today's scripts all run in a transaction
		if i > 0 {
			is.True(scripts[i-1].name < sc.name) // name order
		}
	}
}
