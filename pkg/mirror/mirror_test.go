package mirror_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/mirror"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/matryer/is"
)

func TestAllocation(t *testing.T) {
	at := time.Date(2026, 3, 10, 1, 2, 3, 0, time.UTC)
	raw := json.RawMessage(`{"allocationType":"make-safe"}`)
	for _, tc := range []struct {
		name string
		in   prime.Allocation
		want store.Allocation
	}{
		{"a Make Safe, GUIDs lower-cased", prime.Allocation{ID: "A1B2C3D4-0000-4000-8000-00000000000A", JobID: "0B6A3C52-3E0F-4A57-9A39-2F1D7C1E4B10",
			UserID: "5E6F7A8B-1C2D-4E3F-9A0B-1C2D3E4F5A6B", AssignedContactID: "6A1B2C3D-4E5F-4A6B-8C7D-9E0F1A2B3C41", Type: "make-safe",
			AllocationNumber: "A-7", Label: "Roof", StatusID: "8E7D6C5B-4A39-4281-9F0E-D1C2B3A4F5E6", Version: 3,
			CreatedAt: prime.Time{Time: at}, UpdatedAt: prime.Time{Time: at.Add(time.Hour)}, Raw: raw},
			store.Allocation{AllocationID: "a1b2c3d4-0000-4000-8000-00000000000a", JobID: "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10",
				AssignedID: "5e6f7a8b-1c2d-4e3f-9a0b-1c2d3e4f5a6b", AssignedContactID: "6a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c41",
				AllocationType: "make-safe", AllocationNumber: "A-7", Label: "Roof", AllocationStatusID: "8e7d6c5b-4a39-4281-9f0e-d1c2b3a4f5e6",
				Version: 3, CreatedAt: at, UpdatedAt: at.Add(time.Hour), Attributes: string(raw)}},
		{"another type, no job reported", prime.Allocation{ID: "a1", Type: "Plumbing"},
			store.Allocation{AllocationID: "a1", AllocationType: "Plumbing"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			is.Equal(mirror.Allocation(tc.in), tc.want) // the row as every stage writes it
		})
	}
}

func TestJob(t *testing.T) {
	is := is.New(t)
	j, err := prime.FromResource[prime.Job]("0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10",
		[]byte(`{"jobNumber":"J012345","statusId":"s","createdAt":"2025-02-07 04:14:33","version":4,"authorisedTotalIncludingTax":"700.80","address":{"suburb":"Carlton","postcode":"3053"},"extra":true}`))
	is.NoErr(err)
	r := mirror.Job(j)
	is.Equal(r.JobID, j.ID)
	is.Equal(r.JobNumber, "J012345")
	is.True(r.CreatedAt.Equal(time.Date(2025, 2, 7, 4, 14, 33, 0, time.UTC))) // Prime's time, read as UTC
	is.Equal(r.Version, int64(4))
	is.Equal(r.AuthorisedTotalIncludingTax, "700.80") // the decimal as text
	is.Equal(r.Suburb, "Carlton")                     // the address flattened into columns
	is.Equal(r.Postcode, "3053")
	is.True(r.IncidentDate.IsZero())      // a missing time is NULL
	is.Equal(r.Attributes, string(j.Raw)) // the raw attributes, unknown ones too
}
