package storetest

import (
	"context"
	"strings"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/matryer/is"
)

const (
	childRel1 = "d2d2d2d2-0000-4000-8000-000000000001"
	childRel2 = "d2d2d2d2-0000-4000-8000-000000000002"
	childRel3 = "d2d2d2d2-0000-4000-8000-000000000003"
)

func relIDs(rels []store.ContactRelationship) []string {
	out := make([]string, len(rels))
	for i, r := range rels {
		out[i] = r.ContactRelationshipID
	}
	return out
}

func testContacts(t *testing.T, open Opener) {
	ctx := context.Background()

	t.Run("contacts", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		_, found, err := s.GetContact(ctx, childContact)
		is.NoErr(err)
		is.True(!found) // nothing mirrored yet
		c := store.Contact{ContactID: strings.ToUpper(childContact), Name: "Olivia Nguyen", FirstName: "Olivia",
			LastName: "Nguyen", Email: "olivia@example.com.au", Mobile: "0412 345 678", Phone: "03 9123 4567",
			Attributes: `{"name":"Olivia Nguyen"}`}
		is.NoErr(s.SaveContact(ctx, c))
		got, found, err := s.GetContact(ctx, strings.ToUpper(childContact))
		is.NoErr(err)
		is.True(found)                               // found in any case
		is.Equal(got.ContactID, childContact)        // lower-case
		is.Equal(got.Name, "Olivia Nguyen")          // name
		is.Equal(got.FirstName, "Olivia")            // first name
		is.Equal(got.LastName, "Nguyen")             // last name
		is.Equal(got.Email, "olivia@example.com.au") // email
		is.Equal(got.Mobile, "0412 345 678")         // mobile
		is.Equal(got.Phone, "03 9123 4567")          // phone
		is.Equal(got.Attributes, c.Attributes)       // raw attributes
		is.True(!got.SyncedUTC.IsZero())             // stamped

		c.Mobile = "0499 999 999"
		is.NoErr(s.SaveContact(ctx, c))
		got, _, err = s.GetContact(ctx, childContact)
		is.NoErr(err)
		is.Equal(got.Mobile, "0499 999 999") // updated in place
	})

	t.Run("relationships", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		rel := func(id, typ string) store.ContactRelationship {
			return store.ContactRelationship{ContactRelationshipID: strings.ToUpper(id), ContactID: strings.ToUpper(childContact),
				RelationshipType: typ, Attributes: `{"relationshipType":"` + typ + `"}`}
		}
		is.NoErr(s.ReplaceJobContactRelationships(ctx, strings.ToUpper(childJob), []store.ContactRelationship{
			rel(childRel2, "Insured"), rel(childRel1, "Tenant")}))
		is.NoErr(s.ReplaceJobContactRelationships(ctx, childJob2, []store.ContactRelationship{rel(childRel3, "Insured")}))

		list, err := s.ListJobContactRelationships(ctx, childJob)
		is.NoErr(err)
		is.Equal(relIDs(list), []string{childRel1, childRel2})        // the job's, by id
		is.Equal(list[0].JobID, childJob)                             // stored with the job, lower-case
		is.Equal(list[0].ContactID, childContact)                     // the contact, lower-case
		is.Equal(list[0].RelationshipType, "Tenant")                  // type
		is.Equal(list[0].Attributes, `{"relationshipType":"Tenant"}`) // raw attributes
		is.True(!list[0].SyncedUTC.IsZero())                          // stamped

		is.NoErr(s.ReplaceJobContactRelationships(ctx, childJob, []store.ContactRelationship{rel(childRel2, "Owner")}))
		list, err = s.ListJobContactRelationships(ctx, childJob)
		is.NoErr(err)
		is.Equal(relIDs(list), []string{childRel2}) // one Prime no longer lists is removed
		is.Equal(list[0].RelationshipType, "Owner") // the other updated
		other, err := s.ListJobContactRelationships(ctx, childJob2)
		is.NoErr(err)
		is.Equal(relIDs(other), []string{childRel3}) // another job untouched
	})
}
