package mssql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/ethosbuilding/primeflow/pkg/store"
)

// The rows spPrimeflowReplaceJobEstimates reads, one JSON array each.
type (
	estimateJSON struct {
		EstimateID *string `json:"estimateId"`
		Status     *string `json:"status"`
		Total      *string `json:"total"`
		CreatedAt  *string `json:"createdAt"`
		UpdatedAt  *string `json:"updatedAt"`
		Attributes *string `json:"attributes"`
	}
	categoryJSON struct {
		CategoryID *string `json:"categoryId"`
		EstimateID *string `json:"estimateId"`
		Name       *string `json:"name"`
		SortOrder  int     `json:"sortOrder"`
		Attributes *string `json:"attributes"`
	}
	itemJSON struct {
		ItemID      *string `json:"itemId"`
		CategoryID  *string `json:"categoryId"`
		EstimateID  *string `json:"estimateId"`
		Description *string `json:"description"`
		Quantity    *string `json:"quantity"`
		UnitPrice   *string `json:"unitPrice"`
		Total       *string `json:"total"`
		SortOrder   int     `json:"sortOrder"`
		Attributes  *string `json:"attributes"`
	}
)

// requiredGUID is a row key for the procedures' JSON: a GUID, never empty.
func requiredGUID(what, s string) (*string, error) {
	id, err := jsonGUID(what, s)
	if err == nil && id == nil {
		err = errors.New("mssql: a row has no " + what)
	}
	return id, err
}

// estimateRows flattens estimates into the procedure's three arrays.
func estimateRows(estimates []store.Estimate) (es []estimateJSON, cs []categoryJSON, is []itemJSON, err error) {
	es, cs, is = []estimateJSON{}, []categoryJSON{}, []itemJSON{}
	for _, e := range estimates {
		eid, err := requiredGUID("estimate id", e.EstimateID)
		if err != nil {
			return nil, nil, nil, err
		}
		es = append(es, estimateJSON{EstimateID: eid, Status: jsonText(e.Status), Total: jsonText(e.Total),
			CreatedAt: jsonTime(e.CreatedAt), UpdatedAt: jsonTime(e.UpdatedAt), Attributes: jsonText(e.Attributes)})
		for _, c := range e.Categories {
			cid, err := requiredGUID("category id", c.CategoryID)
			if err != nil {
				return nil, nil, nil, err
			}
			cs = append(cs, categoryJSON{CategoryID: cid, EstimateID: eid, Name: jsonText(c.Name),
				SortOrder: c.SortOrder, Attributes: jsonText(c.Attributes)})
			for _, it := range c.Items {
				iid, err := requiredGUID("item id", it.ItemID)
				if err != nil {
					return nil, nil, nil, err
				}
				is = append(is, itemJSON{ItemID: iid, CategoryID: cid, EstimateID: eid,
					Description: jsonText(it.Description), Quantity: jsonText(it.Quantity),
					UnitPrice: jsonText(it.UnitPrice), Total: jsonText(it.Total), SortOrder: it.SortOrder,
					Attributes: jsonText(it.Attributes)})
			}
		}
	}
	return es, cs, is, nil
}

// ReplaceJobEstimates sweeps the job's estimates, categories and items and
// writes estimates in their place, in one transaction
// (spPrimeflowReplaceJobEstimates, §5.4).
func (s *Store) ReplaceJobEstimates(ctx context.Context, jobID string, estimates []store.Estimate) error {
	job, err := parseGUID(jobID)
	if err != nil {
		return err
	}
	es, cs, is, err := estimateRows(estimates)
	if err != nil {
		return err
	}
	args := []any{sql.Named("JobId", job)}
	for _, p := range []struct {
		name string
		rows any
	}{{"Estimates", es}, {"Categories", cs}, {"Items", is}} {
		list, err := jsonParam(p.rows)
		if err != nil {
			return err
		}
		args = append(args, sql.Named(p.name, list))
	}
	if _, err := s.q().ExecContext(ctx, procReplaceJobEstimates, args...); err != nil {
		return fmt.Errorf("mssql: replace job estimates: %w", err)
	}
	return nil
}

// ListJobEstimates reads the job's estimates with their categories and items
// (spPrimeflowListJobEstimates: three result sets).
func (s *Store) ListJobEstimates(ctx context.Context, jobID string) ([]store.Estimate, error) {
	job, ok := keyGUID(jobID)
	if !ok {
		return nil, nil
	}
	rows, err := s.q().QueryContext(ctx, procListJobEstimates, sql.Named("JobId", job))
	if err != nil {
		return nil, fmt.Errorf("mssql: list job estimates: %w", err)
	}
	defer rows.Close()
	out, err := readEstimates(rows)
	if err != nil {
		return nil, fmt.Errorf("mssql: list job estimates: %w", err)
	}
	return out, nil
}

func readEstimates(rows *sql.Rows) ([]store.Estimate, error) {
	var out []store.Estimate
	byID := map[string]int{}
	for rows.Next() {
		var e store.Estimate
		if err := rows.Scan(scanGUID{&e.EstimateID}, scanGUID{&e.JobID}, scanString{&e.Status}, scanDecimal{&e.Total},
			scanTime{&e.CreatedAt}, scanTime{&e.UpdatedAt}, scanString{&e.Attributes}, scanTime{&e.SyncedUTC}); err != nil {
			return nil, err
		}
		byID[e.EstimateID] = len(out)
		out = append(out, e)
	}
	if !rows.NextResultSet() {
		return nil, errors.Join(rows.Err(), errors.New("no categories result set"))
	}
	type at struct{ est, cat int }
	cats := map[string]at{}
	for rows.Next() {
		var c store.EstimateCategory
		if err := rows.Scan(scanGUID{&c.CategoryID}, scanGUID{&c.EstimateID}, scanGUID{&c.JobID}, scanString{&c.Name},
			scanInt{&c.SortOrder}, scanString{&c.Attributes}, scanTime{&c.SyncedUTC}); err != nil {
			return nil, err
		}
		i, ok := byID[c.EstimateID]
		if !ok {
			continue
		}
		cats[c.CategoryID] = at{i, len(out[i].Categories)}
		out[i].Categories = append(out[i].Categories, c)
	}
	if !rows.NextResultSet() {
		return nil, errors.Join(rows.Err(), errors.New("no items result set"))
	}
	for rows.Next() {
		var it store.EstimateItem
		if err := rows.Scan(scanGUID{&it.ItemID}, scanGUID{&it.CategoryID}, scanGUID{&it.EstimateID}, scanGUID{&it.JobID},
			scanString{&it.Description}, scanDecimal{&it.Quantity}, scanDecimal{&it.UnitPrice}, scanDecimal{&it.Total},
			scanInt{&it.SortOrder}, scanString{&it.Attributes}, scanTime{&it.SyncedUTC}); err != nil {
			return nil, err
		}
		if p, ok := cats[it.CategoryID]; ok {
			out[p.est].Categories[p.cat].Items = append(out[p.est].Categories[p.cat].Items, it)
		}
	}
	return out, rows.Err()
}
