package prime_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/matryer/is"
)

func TestParseTime(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Time
		wantErr bool
	}{
		{"2025-02-07 04:14:33", time.Date(2025, 2, 7, 4, 14, 33, 0, time.UTC), false},
		{" 2025-02-07 04:14:33 ", time.Date(2025, 2, 7, 4, 14, 33, 0, time.UTC), false},
		{"2025-02-07T04:14:33+11:00", time.Date(2025, 2, 6, 17, 14, 33, 0, time.UTC), false},
		{"2025-02-07T04:14:33", time.Date(2025, 2, 7, 4, 14, 33, 0, time.UTC), false},
		{"2025-02-07", time.Date(2025, 2, 7, 0, 0, 0, 0, time.UTC), false},
		{"07/02/2025", time.Time{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			is := is.New(t)
			got, err := prime.ParseTime(tt.in)
			is.Equal(err != nil, tt.wantErr)   // error only for what is not a timestamp
			is.Equal(got, tt.want)             // read as UTC
			is.Equal(got.Location(), time.UTC) // in the UTC location
		})
	}
}

func TestTimeAndAmountJSON(t *testing.T) {
	is := is.New(t)
	var v struct {
		A, B, C prime.Time
		X, Y, Z prime.Amount
	}
	err := json.Unmarshal([]byte(`{"A":"2025-02-07 04:14:33","B":null,"C":"","X":"700.80","Y":12.5,"Z":null}`), &v)
	is.NoErr(err)                                                     // tolerant of null, "" and numbers
	is.Equal(v.A.Time, time.Date(2025, 2, 7, 4, 14, 33, 0, time.UTC)) // Prime's format
	is.True(v.B.IsZero() && v.C.IsZero())                             // null and "" are missing
	is.Equal(v.X, prime.Amount("700.80"))                             // string amount kept as written
	is.Equal(v.Y, prime.Amount("12.5"))                               // a number becomes text
	is.Equal(v.Z, prime.Amount(""))                                   // null is empty

	out, err := json.Marshal(struct{ A, B prime.Time }{v.A, v.B})
	is.NoErr(err)
	is.Equal(string(out), `{"A":"2025-02-07 04:14:33","B":null}`) // written back the way Prime writes it

	is.True(json.Unmarshal([]byte(`{"A":"yesterday"}`), &v) != nil) // not a timestamp is an error
}

func TestIsMakeSafe(t *testing.T) {
	for _, tt := range []struct {
		typ  string
		want bool
	}{
		{"Make Safe", true}, {"make safe", true}, {"MakeSafe", true}, {"make-safe", true},
		{"Assessment Report", false}, {"", false}, {"Make Safe Report", false},
	} {
		t.Run(tt.typ, func(t *testing.T) {
			is := is.New(t)
			is.Equal(prime.Allocation{Type: tt.typ}.IsMakeSafe(), tt.want) // the one Make Safe rule
		})
	}
}

func TestDecodingIsTolerant(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, primesim.Options{})
	// Unknown attributes, missing ones, nulls and a number where a string was expected.
	is.NoErr(e.sim.Put(primesim.KindJobs, primesim.Record{ID: "job-sparse", NumericReference: 77, Attributes: json.RawMessage(
		`{"jobNumber":"J000077","statusId":null,"address":null,"authorisedTotalIncludingTax":700.8,"brandNewField":{"a":[1,2]}}`)}))
	is.NoErr(e.sim.Put(primesim.KindContacts, primesim.Record{ID: "contact-empty", Attributes: json.RawMessage(`null`)}))
	c := e.client(t, nil)

	j, err := c.GetJob(context.Background(), "77")
	is.NoErr(err)                                                  // decoded despite the odd shape
	is.Equal(j.JobNumber, "J000077")                               // known attributes read
	is.Equal(j.StatusID, "")                                       // null left empty
	is.Equal(j.AuthorisedTotalIncludingTax, prime.Amount("700.8")) // number accepted as amount
	is.True(j.CreatedAt.IsZero())                                  // missing time is zero

	ct, err := c.GetContact(context.Background(), "contact-empty")
	is.NoErr(err)                    // null attributes are an empty record
	is.Equal(ct.ID, "contact-empty") // with its id
	is.Equal(string(ct.Raw), "{}")   // and empty raw attributes
}
