package store

import (
	"context"
	"time"
)

// OutboxMessage is a message a stage hands on, written in the same
// transaction as the stage's effect and published after the commit
// (primeflowOutbox). MsgID is its Nats-Msg-Id.
type OutboxMessage struct {
	ID           int64
	Subject      string
	MsgID        string
	Header       map[string]string
	Data         []byte
	CreatedUTC   time.Time
	PublishedUTC time.Time
}

// Outbox is the transactional outbox.
type Outbox interface {
	// InsertOutbox stores messages and returns them with their ids.
	InsertOutbox(ctx context.Context, msgs []OutboxMessage) ([]OutboxMessage, error)
	// GetOutboxUnpublished returns messages not yet published after afterID
	// (0: from the first) that were written before createdBefore, oldest
	// first: the sweeper pages on by id past the messages it skipped.
	GetOutboxUnpublished(ctx context.Context, afterID int64, createdBefore time.Time, limit int) ([]OutboxMessage, error)
	// SetOutboxPublished records that messages were published.
	SetOutboxPublished(ctx context.Context, ids []int64, at time.Time) error
	// PurgeOutbox deletes messages published before the given time and
	// returns how many it deleted.
	PurgeOutbox(ctx context.Context, publishedBefore time.Time) (int, error)
}
