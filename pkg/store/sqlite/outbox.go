package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
)

// The statements every outbox message runs, prepared once (see prepare).
var (
	insertOutboxSQL = prepare(`INSERT INTO primeflowOutbox (subject, msgId, headers, data, createdUTC)
		VALUES (?, ?, ?, ?, ?)`)
	// setOutboxPublishedSQL takes the ids as one JSON array.
	setOutboxPublishedSQL = prepare(`UPDATE primeflowOutbox SET publishedUTC = ? WHERE id IN (SELECT value FROM json_each(?))`)
)

// InsertOutbox stores messages to publish after the commit.
func (s *Store) InsertOutbox(ctx context.Context, msgs []store.OutboxMessage) ([]store.OutboxMessage, error) {
	out := make([]store.OutboxMessage, len(msgs))
	now := time.Now().UTC()
	err := s.inTx(ctx, func(tx *Store) error {
		for i, m := range msgs {
			var header any
			if len(m.Header) > 0 {
				b, err := json.Marshal(m.Header)
				if err != nil {
					return err
				}
				header = string(b)
			}
			m.CreatedUTC = now
			id, err := insertRow(ctx, tx.w(), insertOutboxSQL, m.Subject, m.MsgID, header, string(m.Data), formatTime(now))
			if err != nil {
				return err
			}
			m.ID = id
			out[i] = m
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: insert outbox: %w", err)
	}
	return out, nil
}

// GetOutboxUnpublished returns messages still to publish after afterID,
// oldest first.
func (s *Store) GetOutboxUnpublished(ctx context.Context, afterID int64, createdBefore time.Time, limit int) ([]store.OutboxMessage, error) {
	return queryAll(ctx, s.r(), "get outbox", `SELECT id, subject, msgId, headers, data, createdUTC FROM primeflowOutbox
		WHERE publishedUTC IS NULL AND id > ? AND createdUTC < ? ORDER BY id LIMIT ?`, func(sc sqlrows.Scanner) (store.OutboxMessage, error) {
		var m store.OutboxMessage
		var header, data string
		if err := sc.Scan(&m.ID, &m.Subject, &m.MsgID, scanString{&header}, &data, scanTime{&m.CreatedUTC}); err != nil {
			return m, err
		}
		if header != "" {
			if err := json.Unmarshal([]byte(header), &m.Header); err != nil {
				return m, fmt.Errorf("outbox %d headers: %w", m.ID, err)
			}
		}
		m.Data = []byte(data)
		return m, nil
	}, afterID, formatTime(createdBefore), limit)
}

// SetOutboxPublished records that messages were published.
func (s *Store) SetOutboxPublished(ctx context.Context, ids []int64, at time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return err
	}
	if _, err := s.w().ExecContext(ctx, setOutboxPublishedSQL, formatTime(at), string(list)); err != nil {
		return fmt.Errorf("sqlite: set outbox published: %w", err)
	}
	return nil
}

// PurgeOutbox deletes messages published before the given time.
func (s *Store) PurgeOutbox(ctx context.Context, publishedBefore time.Time) (int, error) {
	res, err := s.w().ExecContext(ctx, `DELETE FROM primeflowOutbox WHERE publishedUTC IS NOT NULL AND publishedUTC < ?`, formatTime(publishedBefore))
	if err != nil {
		return 0, fmt.Errorf("sqlite: purge outbox: %w", err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}
