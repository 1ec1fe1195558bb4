package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/matryer/is"
)

// childGUID makes the GUID of an estimate's row: kind 'e' (estimate), 'c'
// (category) or 'd' (line item), then the estimate, category and item numbers.
func childGUID(kind byte, a, b, c int) string {
	return strings.Replace("f0000000-0000-4000-8000-0000000abcde", "abcde", string(kind)+string(rune('0'+a))+string(rune('0'+b))+string(rune('0'+c))+"0", 1)
}

// sampleEstimate is estimate n with cats categories of items items each.
func sampleEstimate(n, cats, items int, status string) store.Estimate {
	e := store.Estimate{
		EstimateID: strings.ToUpper(childGUID('e', n, 0, 0)), Status: status, Total: "2068.00",
		CreatedAt: at(n, 1), UpdatedAt: at(n, 2), Attributes: `{"status":"` + status + `"}`,
	}
	for c := range cats {
		cat := store.EstimateCategory{CategoryID: childGUID('c', n, c, 0), Name: "Category " + string(rune('A'+c)),
			SortOrder: c, Attributes: `{"name":"x"}`}
		for i := range items {
			cat.Items = append(cat.Items, store.EstimateItem{ItemID: childGUID('d', n, c, i),
				Description: "Line", Quantity: "12", UnitPrice: "47.33", Total: "568.00", SortOrder: i,
				Attributes: `{"description":"Line"}`})
		}
		e.Categories = append(e.Categories, cat)
	}
	return e
}

func testEstimates(t *testing.T, open Opener) {
	ctx := context.Background()

	t.Run("replace, read back, sweep", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		is.NoErr(s.ReplaceJobEstimates(ctx, strings.ToUpper(childJob), []store.Estimate{
			sampleEstimate(2, 2, 3, "Draft"), sampleEstimate(1, 1, 1, "Approved")}))
		is.NoErr(s.ReplaceJobEstimates(ctx, childJob2, []store.Estimate{sampleEstimate(3, 1, 1, "Draft")}))

		list, err := s.ListJobEstimates(ctx, childJob)
		is.NoErr(err)
		is.Equal(len(list), 2)                          // the job's two estimates
		e := list[0]                                    // oldest first: estimate 1
		is.Equal(e.EstimateID, childGUID('e', 1, 0, 0)) // lower-case id
		is.Equal(e.JobID, childJob)                     // stored with the job
		is.Equal(e.Status, "Approved")                  // status
		is.True(sameDecimal(e.Total, "2068.00"))        // total, as a number
		is.Equal(e.CreatedAt, at(1, 1))                 // createdAt
		is.Equal(e.UpdatedAt, at(1, 2))                 // updatedAt
		is.Equal(e.Attributes, `{"status":"Approved"}`) // raw attributes
		is.True(!e.SyncedUTC.IsZero())                  // stamped
		e = list[1]
		is.Equal(len(e.Categories), 2) // both categories of estimate 2
		c := e.Categories[1]
		is.Equal(c.CategoryID, childGUID('c', 2, 1, 0)) // in sort order
		is.Equal(c.EstimateID, e.EstimateID)            // with the estimate's id
		is.Equal(c.JobID, childJob)                     // and the job's
		is.Equal(c.Name, "Category B")                  // name
		is.Equal(c.SortOrder, 1)                        // sort order
		is.Equal(c.Attributes, `{"name":"x"}`)          // raw JSON
		is.Equal(len(c.Items), 3)                       // its items
		it := c.Items[2]
		is.Equal(it.ItemID, childGUID('d', 2, 1, 2))      // in sort order
		is.Equal(it.CategoryID, c.CategoryID)             // with the category's id
		is.Equal(it.EstimateID, e.EstimateID)             // the estimate's
		is.Equal(it.JobID, childJob)                      // and the job's
		is.Equal(it.Description, "Line")                  // description
		is.True(sameDecimal(it.Quantity, "12"))           // quantity
		is.True(sameDecimal(it.UnitPrice, "47.33"))       // unit price
		is.True(sameDecimal(it.Total, "568.00"))          // total
		is.Equal(it.SortOrder, 2)                         // sort order
		is.Equal(it.Attributes, `{"description":"Line"}`) // raw JSON

		// Prime no longer has estimate 1, and estimate 2 lost a category.
		is.NoErr(s.ReplaceJobEstimates(ctx, childJob, []store.Estimate{sampleEstimate(2, 1, 2, "Submitted")}))
		list, err = s.ListJobEstimates(ctx, childJob)
		is.NoErr(err)
		is.Equal(len(list), 1)                        // estimate 1 swept away
		is.Equal(list[0].Status, "Submitted")         // estimate 2 as Prime has it now
		is.Equal(len(list[0].Categories), 1)          // the lost category swept
		is.Equal(len(list[0].Categories[0].Items), 2) // with the lost item
		other, err := s.ListJobEstimates(ctx, childJob2)
		is.NoErr(err)
		is.Equal(len(other), 1) // another job untouched

		is.NoErr(s.ReplaceJobEstimates(ctx, childJob, nil))
		list, err = s.ListJobEstimates(ctx, childJob)
		is.NoErr(err)
		is.Equal(len(list), 0) // no estimates left
	})

	t.Run("one transaction", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		is.NoErr(s.ReplaceJobEstimates(ctx, childJob, []store.Estimate{sampleEstimate(1, 1, 1, "Draft")}))
		broken := sampleEstimate(2, 1, 1, "Draft")
		broken.Categories[0].Items[0].ItemID = ""
		err := s.ReplaceJobEstimates(ctx, childJob, []store.Estimate{sampleEstimate(3, 1, 1, "Draft"), broken})
		is.True(err != nil) // an item without an id fails the replace
		list, err := s.ListJobEstimates(ctx, childJob)
		is.NoErr(err)
		is.Equal(len(list), 1)                                // nothing of it was kept
		is.Equal(list[0].EstimateID, childGUID('e', 1, 0, 0)) // the old estimate still there

		boom := errors.New("boom")
		err = s.InTx(ctx, func(tx store.Store) error {
			if err := tx.ReplaceJobEstimates(ctx, childJob, nil); err != nil {
				return err
			}
			return boom
		})
		is.True(errors.Is(err, boom)) // the enclosing transaction failed
		list, err = s.ListJobEstimates(ctx, childJob)
		is.NoErr(err)
		is.Equal(len(list), 1) // and the sweep was rolled back with it
	})
}
