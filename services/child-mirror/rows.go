package childmirror

import (
	"encoding/json"
	"strings"

	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/store"
)

// The rows of Prime's records: the main attributes as columns, the raw
// attributes JSON as it came, GUIDs lower-case.

func appointmentRow(a prime.Appointment) store.Appointment {
	return store.Appointment{
		AppointmentID:     strings.ToLower(a.ID),
		JobID:             strings.ToLower(a.JobID),
		AppointmentTypeID: strings.ToLower(a.AppointmentTypeID),
		StartDate:         a.StartDate.Time,
		EndDate:           a.EndDate.Time,
		Status:            a.Status,
		Version:           a.Version,
		AssignedID:        strings.ToLower(a.AssignedID),
		Description:       a.Description,
		Notes:             a.Notes,
		CreatedAt:         a.CreatedAt.Time,
		UpdatedAt:         a.UpdatedAt.Time,
		Attributes:        string(a.Raw),
	}
}

func siteFormRows(jobID string, forms []prime.SiteForm) []store.SiteForm {
	out := make([]store.SiteForm, len(forms))
	for i, f := range forms {
		out[i] = store.SiteForm{
			SiteFormID: strings.ToLower(f.ID),
			JobID:      jobID,
			ObjectType: f.ObjectType,
			ObjectID:   strings.ToLower(f.ObjectID),
			Name:       f.Name,
			Status:     f.Status,
			CreatedAt:  f.CreatedAt.Time,
			UpdatedAt:  f.UpdatedAt.Time,
			Attributes: string(f.Raw),
		}
	}
	return out
}

// estimateRows are the rows of a job's estimates. Each category keeps its
// own JSON as Prime sent it (without its items, which are rows of their
// own) and each item its JSON; sortOrder is the place in Prime's list.
func estimateRows(jobID string, estimates []prime.Estimate) []store.Estimate {
	out := make([]store.Estimate, len(estimates))
	for i, e := range estimates {
		rawCats := rawCategories(e.Raw)
		row := store.Estimate{
			EstimateID: strings.ToLower(e.ID),
			JobID:      jobID,
			Status:     e.Status,
			Total:      string(e.Total),
			CreatedAt:  e.CreatedAt.Time,
			UpdatedAt:  e.UpdatedAt.Time,
			Attributes: string(e.Raw),
		}
		for ci, c := range e.Categories {
			var raw rawCategory
			if ci < len(rawCats) {
				raw = rawCats[ci]
			}
			cat := store.EstimateCategory{
				CategoryID: strings.ToLower(c.ID), EstimateID: row.EstimateID, JobID: jobID,
				Name: c.Name, SortOrder: ci, Attributes: raw.attributes,
			}
			for ii, it := range c.Items {
				item := store.EstimateItem{
					ItemID: strings.ToLower(it.ID), CategoryID: cat.CategoryID, EstimateID: row.EstimateID,
					JobID: jobID, Description: it.Description, Quantity: string(it.Quantity),
					UnitPrice: string(it.UnitPrice), Total: string(it.Total), SortOrder: ii,
				}
				if ii < len(raw.items) {
					item.Attributes = string(raw.items[ii])
				}
				cat.Items = append(cat.Items, item)
			}
			row.Categories = append(row.Categories, cat)
		}
		out[i] = row
	}
	return out
}

// rawCategory is one category of an estimate's raw attributes: its JSON
// without "items", and its items' JSON.
type rawCategory struct {
	attributes string
	items      []json.RawMessage
}

// rawCategories reads the categories out of an estimate's raw attributes,
// in order; anything it cannot read gives none (the typed fields still fill
// the columns).
func rawCategories(attrs json.RawMessage) []rawCategory {
	var doc struct {
		Categories []map[string]json.RawMessage `json:"categories"`
	}
	if json.Unmarshal(attrs, &doc) != nil {
		return nil
	}
	out := make([]rawCategory, len(doc.Categories))
	for i, c := range doc.Categories {
		var items []json.RawMessage
		if raw, ok := c["items"]; ok {
			if json.Unmarshal(raw, &items) != nil {
				items = nil // not a list: no raw items
			}
			delete(c, "items")
		}
		b, err := json.Marshal(c)
		if err != nil {
			continue
		}
		out[i] = rawCategory{attributes: string(b), items: items}
	}
	return out
}

func contactRow(c prime.Contact) store.Contact {
	return store.Contact{
		ContactID:  strings.ToLower(c.ID),
		Name:       c.Name,
		FirstName:  c.FirstName,
		LastName:   c.LastName,
		Email:      c.Email,
		Mobile:     c.Mobile,
		Phone:      c.Phone,
		Attributes: string(c.Raw),
	}
}

func relationshipRows(jobID string, rels []prime.ContactRelationship) []store.ContactRelationship {
	out := make([]store.ContactRelationship, len(rels))
	for i, r := range rels {
		out[i] = store.ContactRelationship{
			ContactRelationshipID: strings.ToLower(r.ID),
			JobID:                 jobID,
			ContactID:             strings.ToLower(r.ContactID),
			RelationshipType:      r.Type,
			Attributes:            string(r.Raw),
		}
	}
	return out
}

func statusHistoryRows(jobID string, hs []prime.StatusHistory) []store.JobStatusHistory {
	out := make([]store.JobStatusHistory, len(hs))
	for i, h := range hs {
		out[i] = store.JobStatusHistory{
			StatusHistoryID: strings.ToLower(h.ID),
			JobID:           jobID,
			StatusID:        strings.ToLower(h.StatusID),
			CreatedAt:       h.CreatedAt.Time,
			Attributes:      string(h.Raw),
		}
	}
	return out
}
