package mssql

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
)

// The procedures behind the Outbox methods (sql/mssql/003_outbox.sql).
const (
	procOutboxInsert         = "dbo.spPrimeflowOutboxInsert"
	procOutboxGetUnpublished = "dbo.spPrimeflowOutboxGetUnpublished"
	procOutboxSetPublished   = "dbo.spPrimeflowOutboxSetPublished"
	procOutboxPurge          = "dbo.spPrimeflowOutboxPurge"
)

// InsertOutbox stores messages to publish after the commit
// (spPrimeflowOutboxInsert, one call a message, all in one transaction). A
// stage hands on one to a few messages, so a call each costs little. Every
// message of one call gets the same createdUTC, the caller's clock, which is
// the clock the sweeper's cut-off is read from.
func (s *Store) InsertOutbox(ctx context.Context, msgs []store.OutboxMessage) ([]store.OutboxMessage, error) {
	out := make([]store.OutboxMessage, len(msgs))
	if len(msgs) == 0 {
		return out, nil
	}
	now := time.Now().UTC().Truncate(time.Millisecond) // as DATETIME2(3) keeps it
	err := s.inTx(ctx, func(tx *Store) error {
		for i, m := range msgs {
			headers, err := outboxHeaders(m.Header)
			if err != nil {
				return err
			}
			m.CreatedUTC = now
			err = tx.q().QueryRowContext(ctx, procOutboxInsert,
				sql.Named("Subject", m.Subject),
				sql.Named("MsgId", m.MsgID),
				sql.Named("Headers", headers),
				sql.Named("Data", string(m.Data)),
				sql.Named("CreatedUTC", sqlTime(now)),
			).Scan(&m.ID)
			if err != nil {
				return err
			}
			out[i] = m
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("mssql: insert outbox: %w", err)
	}
	return out, nil
}

// outboxHeaders is a message's headers as the JSON the headers column holds;
// none is NULL.
func outboxHeaders(h map[string]string) (any, error) {
	if len(h) == 0 {
		return sqlString(""), nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("headers: %w", err)
	}
	return string(b), nil
}

// GetOutboxUnpublished returns messages still to publish after afterID
// that were written before createdBefore, oldest first; a limit of 0 or less
// returns none.
func (s *Store) GetOutboxUnpublished(ctx context.Context, afterID int64, createdBefore time.Time, limit int) ([]store.OutboxMessage, error) {
	if limit <= 0 {
		return nil, nil
	}
	return queryAll(ctx, s.q(), "get outbox", procOutboxGetUnpublished, func(sc sqlrows.Scanner) (store.OutboxMessage, error) {
		var m store.OutboxMessage
		var headers, data string
		if err := sc.Scan(&m.ID, &m.Subject, &m.MsgID, scanString{&headers}, &data, scanTime{&m.CreatedUTC}); err != nil {
			return m, err
		}
		if headers != "" {
			if err := json.Unmarshal([]byte(headers), &m.Header); err != nil {
				return m, fmt.Errorf("outbox %d headers: %w", m.ID, err)
			}
		}
		m.Data = []byte(data)
		return m, nil
	}, sql.Named("AfterId", afterID), sql.Named("CreatedBefore", sqlTime(createdBefore)), sql.Named("Top", limit))
}

// SetOutboxPublished records that messages were published.
func (s *Store) SetOutboxPublished(ctx context.Context, ids []int64, at time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := s.q().ExecContext(ctx, procOutboxSetPublished,
		sql.Named("IDs", idList(ids)), sql.Named("PublishedUTC", sqlTime(at)))
	if err != nil {
		return fmt.Errorf("mssql: set outbox published: %w", err)
	}
	return nil
}

// PurgeOutbox deletes messages published before publishedBefore and returns
// how many; unpublished messages are never deleted.
func (s *Store) PurgeOutbox(ctx context.Context, publishedBefore time.Time) (int, error) {
	var n int
	err := s.q().QueryRowContext(ctx, procOutboxPurge, sql.Named("PublishedBefore", sqlTime(publishedBefore))).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("mssql: purge outbox: %w", err)
	}
	return n, nil
}
