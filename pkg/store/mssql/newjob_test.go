package mssql

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/matryer/is"
)

// A caller of spEthProcessNewPrimeJob that passes no hand-off (the spec's
// one-parameter call) gets the one the new-job pipeline builds in Go: its
// subject, Nats-Msg-Id and body, and the same completed status.
func TestProcessNewPrimeJobDefaultHandOff(t *testing.T) {
	is := is.New(t)
	var body string
	for _, sc := range loaded(t) {
		for _, b := range sc.batches {
			if regexp.MustCompile(`(?i)CREATE\s+OR\s+ALTER\s+PROCEDURE\s+dbo\.spEthProcessNewPrimeJob\b`).MatchString(b.sql) {
				body = b.sql
			}
		}
	}
	is.True(body != "") // the procedure is in the scripts
	const job = "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10"
	// value evaluates a T-SQL concatenation of N'…' literals and @job.
	value := func(name string) string {
		m := regexp.MustCompile(`@` + name + `\s*=\s*((?:N'(?:[^']|'')*'|@job)(?:\s*\+\s*(?:N'(?:[^']|'')*'|@job))*)`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no default for @%s", name)
		}
		var out strings.Builder
		for _, part := range regexp.MustCompile(`N'((?:[^']|'')*)'|@job`).FindAllStringSubmatch(m[1], -1) {
			if part[0] == "@job" {
				out.WriteString(job)
			} else {
				out.WriteString(strings.ReplaceAll(part[1], "''", "'"))
			}
		}
		return out.String()
	}
	is.Equal(value("HandOffSubject"), events.SubjectMakesafeDetect)   // the subject
	is.Equal(value("HandOffMsgId"), events.FirstSeenDetectMsgID(job)) // the message id
	want, err := json.Marshal(events.MakesafeDetect{JobID: job, QueueChecks: true, Source: events.SourceFirstSeen})
	is.NoErr(err)
	is.Equal(value("HandOffData"), string(want)) // the body, byte for byte

	m := regexp.MustCompile(`CONCAT\(N'([^']*)',\s*@queued,\s*N'([^']*)'\)`).FindStringSubmatch(body)
	is.True(m != nil)
	is.Equal(m[1]+strconv.Itoa(4)+m[2], store.NewJobCompletedStatus(4)) // the status the SQLite adapter writes
}
