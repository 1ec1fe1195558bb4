package sqlite

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
)

// ReplaceJobEstimates sweeps the job's estimates, categories and items and
// writes estimates in their place, in one transaction (§5.4).
func (s *Store) ReplaceJobEstimates(ctx context.Context, jobID string, estimates []store.Estimate) error {
	if jobID == "" {
		return errors.New("sqlite: replace job estimates: no job id")
	}
	now := formatTime(time.Now())
	job := mirrorGUID(jobID)
	err := s.inTx(ctx, func(tx *Store) error {
		for _, table := range []string{"primeEstimateItems", "primeEstimateCategories", "primeEstimates"} {
			if _, err := tx.tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE jobId = ?`, job); err != nil {
				return err
			}
		}
		for _, e := range estimates {
			if e.EstimateID == "" {
				return errors.New("an estimate has no id")
			}
			// An estimate that moved from another job leaves that job's rows.
			for _, table := range []string{"primeEstimateItems", "primeEstimateCategories", "primeEstimates"} {
				if _, err := tx.tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE estimateId = ?`, mirrorGUID(e.EstimateID)); err != nil {
					return err
				}
			}
			if _, err := tx.tx.ExecContext(ctx, `INSERT INTO primeEstimates
				(estimateId, jobId, status, total, createdAt, updatedAt, attributes, syncedUTC)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
				mirrorGUID(e.EstimateID), job, nullString(e.Status), nullString(e.Total), nullTime(e.CreatedAt),
				nullTime(e.UpdatedAt), nullString(e.Attributes), now); err != nil {
				return err
			}
			for _, c := range e.Categories {
				if c.CategoryID == "" {
					return fmt.Errorf("a category of estimate %s has no id", e.EstimateID)
				}
				if _, err := tx.tx.ExecContext(ctx, `INSERT INTO primeEstimateCategories
					(categoryId, estimateId, jobId, name, sortOrder, attributes, syncedUTC)
					VALUES (?, ?, ?, ?, ?, ?, ?)`,
					mirrorGUID(c.CategoryID), mirrorGUID(e.EstimateID), job, nullString(c.Name), c.SortOrder,
					nullString(c.Attributes), now); err != nil {
					return err
				}
				for _, it := range c.Items {
					if it.ItemID == "" {
						return fmt.Errorf("an item of estimate %s has no id", e.EstimateID)
					}
					if _, err := tx.tx.ExecContext(ctx, `INSERT INTO primeEstimateItems
						(itemId, categoryId, estimateId, jobId, description, quantity, unitPrice, total,
						 sortOrder, attributes, syncedUTC)
						VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
						mirrorGUID(it.ItemID), mirrorGUID(c.CategoryID), mirrorGUID(e.EstimateID), job, nullString(it.Description),
						nullString(it.Quantity), nullString(it.UnitPrice), nullString(it.Total), it.SortOrder,
						nullString(it.Attributes), now); err != nil {
						return err
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: replace job estimates: %w", err)
	}
	return nil
}

// ListJobEstimates reads the job's estimates with their categories and items.
func (s *Store) ListJobEstimates(ctx context.Context, jobID string) ([]store.Estimate, error) {
	var out []store.Estimate
	// One read transaction, so the three reads see one state of the sweep.
	err := s.readSnapshot(ctx, func(q sqlrows.Querier) error {
		job := mirrorGUID(jobID)
		rows, err := q.QueryContext(ctx, `SELECT estimateId, jobId, status, total, createdAt, updatedAt, attributes, syncedUTC
			FROM primeEstimates WHERE jobId = ? ORDER BY createdAt, estimateId`, job)
		if err != nil {
			return err
		}
		byID := map[string]int{}
		for rows.Next() {
			var e store.Estimate
			if err := rows.Scan(&e.EstimateID, scanString{&e.JobID}, scanString{&e.Status}, scanString{&e.Total},
				scanTime{&e.CreatedAt}, scanTime{&e.UpdatedAt}, scanString{&e.Attributes}, scanTime{&e.SyncedUTC}); err != nil {
				rows.Close()
				return err
			}
			byID[e.EstimateID] = len(out)
			out = append(out, e)
		}
		if err := finishRows(rows); err != nil {
			return err
		}

		rows, err = q.QueryContext(ctx, `SELECT categoryId, estimateId, jobId, name, sortOrder, attributes, syncedUTC
			FROM primeEstimateCategories WHERE jobId = ? ORDER BY estimateId, sortOrder, categoryId`, job)
		if err != nil {
			return err
		}
		type at struct{ est, cat int }
		cats := map[string]at{}
		for rows.Next() {
			var c store.EstimateCategory
			var sort int64
			if err := rows.Scan(&c.CategoryID, scanString{&c.EstimateID}, scanString{&c.JobID}, scanString{&c.Name},
				scanNullInt64{&sort}, scanString{&c.Attributes}, scanTime{&c.SyncedUTC}); err != nil {
				rows.Close()
				return err
			}
			c.SortOrder = int(sort)
			i, ok := byID[c.EstimateID]
			if !ok {
				continue
			}
			cats[c.CategoryID] = at{i, len(out[i].Categories)}
			out[i].Categories = append(out[i].Categories, c)
		}
		if err := finishRows(rows); err != nil {
			return err
		}

		rows, err = q.QueryContext(ctx, `SELECT itemId, categoryId, estimateId, jobId, description, quantity, unitPrice,
			total, sortOrder, attributes, syncedUTC
			FROM primeEstimateItems WHERE jobId = ? ORDER BY categoryId, sortOrder, itemId`, job)
		if err != nil {
			return err
		}
		for rows.Next() {
			var it store.EstimateItem
			var sort int64
			if err := rows.Scan(&it.ItemID, scanString{&it.CategoryID}, scanString{&it.EstimateID}, scanString{&it.JobID},
				scanString{&it.Description}, scanString{&it.Quantity}, scanString{&it.UnitPrice}, scanString{&it.Total},
				scanNullInt64{&sort}, scanString{&it.Attributes}, scanTime{&it.SyncedUTC}); err != nil {
				rows.Close()
				return err
			}
			it.SortOrder = int(sort)
			if p, ok := cats[it.CategoryID]; ok {
				out[p.est].Categories[p.cat].Items = append(out[p.est].Categories[p.cat].Items, it)
			}
		}
		return finishRows(rows)
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: list job estimates: %w", err)
	}
	return out, nil
}

// finishRows closes rows and reports the error that ended their iteration.
func finishRows(rows interface {
	Err() error
	Close() error
}) error {
	return errors.Join(rows.Err(), rows.Close())
}

// readSnapshot runs fn with one read transaction, so several reads see one state
// of the database; on a Store already in a transaction it reads there.
func (s *Store) readSnapshot(ctx context.Context, fn func(q sqlrows.Querier) error) error {
	if s.tx != nil {
		return fn(s.tx)
	}
	tx, err := s.read.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // read only: nothing to commit
	return fn(tx)
}
