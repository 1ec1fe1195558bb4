package ingest

import (
	"context"
	"errors"

	"github.com/ethosbuilding/primeflow/pkg/store"
)

// maxBatch bounds how many webhooks share one commit.
const maxBatch = 256

// committer is the group commit: webhooks that arrive while a commit is under
// way wait for the next one and share it, so each 200 still follows a
// durable commit of its own row but the database syncs once per batch.
type committer struct {
	store interface {
		InsertWebhookLogs(ctx context.Context, rows []store.NewWebhookLogRow) ([]int64, error)
	}
	reqs    chan insertReq // unbuffered: a request is taken only by a running committer
	stopped chan struct{}  // closed when run returns
	observe func(batch int)
}

func newCommitter(st interface {
	InsertWebhookLogs(ctx context.Context, rows []store.NewWebhookLogRow) ([]int64, error)
}, observe func(batch int)) *committer {
	return &committer{store: st, reqs: make(chan insertReq), stopped: make(chan struct{}), observe: observe}
}

type insertReq struct {
	row  store.NewWebhookLogRow
	done chan insertRes // buffered: the committer never blocks on a caller
}

type insertRes struct {
	id  int64
	err error
}

var errStopped = errors.New("ingest is shutting down")

// insert stores one row through the next batch and returns its id.
func (c *committer) insert(ctx context.Context, row store.NewWebhookLogRow) (int64, error) {
	req := insertReq{row: row, done: make(chan insertRes, 1)}
	select {
	case c.reqs <- req:
	case <-c.stopped:
		return 0, errStopped
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	res := <-req.done // the committer always answers a request it took
	return res.id, res.err
}

// run commits batches until ctx ends, then answers what is still queued.
func (c *committer) run(ctx context.Context) {
	defer close(c.stopped)
	batch := make([]insertReq, 0, maxBatch)
	for {
		select {
		case <-ctx.Done():
			c.refuse()
			return
		case req := <-c.reqs:
			batch = append(batch[:0], req)
		}
	fill:
		for len(batch) < maxBatch {
			select {
			case req := <-c.reqs:
				batch = append(batch, req)
			default:
				break fill
			}
		}
		c.commit(context.WithoutCancel(ctx), batch)
	}
}

func (c *committer) commit(ctx context.Context, batch []insertReq) {
	if c.observe != nil {
		c.observe(len(batch))
	}
	rows := make([]store.NewWebhookLogRow, len(batch))
	for i, req := range batch {
		rows[i] = req.row
	}
	ids, err := c.store.InsertWebhookLogs(ctx, rows)
	if err != nil && len(batch) > 1 {
		// One row must not fail its neighbours: commit them one by one.
		for _, req := range batch {
			c.commit(ctx, []insertReq{req})
		}
		return
	}
	for i, req := range batch {
		if err != nil {
			req.done <- insertRes{err: err}
		} else {
			req.done <- insertRes{id: ids[i]}
		}
	}
}

// refuse answers requests that were queued when the committer stopped.
func (c *committer) refuse() {
	for {
		select {
		case req := <-c.reqs:
			req.done <- insertRes{err: errStopped}
		default:
			return
		}
	}
}
