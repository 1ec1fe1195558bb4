package prime_test

import (
	"encoding/json"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/matryer/is"
)

func TestFromResource(t *testing.T) {
	is := is.New(t)
	attrs := json.RawMessage(`{"jobNumber":"J012345","statusId":"a1","createdAt":"2025-02-07 04:14:33","unknown":1}`)
	j, err := prime.FromResource[prime.Job]("0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10", attrs)
	is.NoErr(err)
	is.Equal(j.ID, "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10") // the id
	is.Equal(j.JobNumber, "J012345")                       // attributes decoded
	is.Equal(j.CreatedAt.Format(prime.TimeLayout), "2025-02-07 04:14:33")
	is.Equal(string(j.Raw), string(attrs)) // raw attributes kept
	_, err = prime.FromResource[prime.Appointment]("x", json.RawMessage(`{"version":"not a number"}`))
	is.True(err != nil) // a bad record is an error
}
