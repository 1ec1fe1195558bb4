package ingest

import (
	"context"
	"errors"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
)

// maxBatch bounds how many webhooks share one commit.
const maxBatch = 256

// committer is the group commit: webhooks that arrive while a commit is under
// way wait for the next one and share it, so each 200 still follows a
// durable commit of its own row but the database syncs once per batch. After
// each commit it hands the batch to the publisher, and it records the rows
// JetStream has acknowledged in the next commit's transaction, so that
// bookkeeping costs no sync of its own.
type committer struct {
	store   logStore
	pub     *publisher
	reqs    chan insertReq // unbuffered: a request is taken only by a running committer
	stopped chan struct{}  // closed when run returns
	observe func(batch int)
}

func newCommitter(st logStore, pub *publisher, observe func(batch int)) *committer {
	return &committer{store: st, pub: pub, reqs: make(chan insertReq), stopped: make(chan struct{}), observe: observe}
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

// run commits batches until ctx ends, then answers what is still queued and
// records what was published. When no webhooks come, it records published
// rows every idle interval.
func (c *committer) run(ctx context.Context, idle time.Duration) {
	defer close(c.stopped)
	tick := time.NewTicker(idle)
	defer tick.Stop()
	batch := make([]insertReq, 0, maxBatch)
	for {
		select {
		case <-ctx.Done():
			c.refuse()
			c.recordPublished(context.WithoutCancel(ctx))
			return
		case <-tick.C:
			c.recordPublished(ctx)
			continue
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
	published := c.pub.takeAcked()
	var ids []int64
	err := c.store.InTx(ctx, func(tx store.Store) error {
		var err error
		if ids, err = tx.InsertWebhookLogs(ctx, rows); err != nil {
			return err
		}
		return tx.SetWebhookLogPublished(ctx, published, time.Now())
	})
	if err != nil {
		c.pub.putBackAcked(published)
		if len(batch) > 1 {
			// One row must not fail its neighbours: commit them one by one.
			for _, req := range batch {
				c.commit(ctx, []insertReq{req})
			}
			return
		}
	}
	for i, req := range batch {
		if err != nil {
			req.done <- insertRes{err: err}
		} else {
			req.done <- insertRes{id: ids[i]}
		}
	}
	if err == nil {
		pubs := make([]publication, len(batch))
		for i, row := range rows {
			pubs[i] = publication{id: ids[i], action: row.EventAction, payload: row.Payload}
		}
		c.pub.publishAsync(pubs)
	}
}

// recordPublished records the rows acknowledged since the last commit.
func (c *committer) recordPublished(ctx context.Context) {
	ids := c.pub.takeAcked()
	if len(ids) == 0 {
		return
	}
	if err := c.store.SetWebhookLogPublished(ctx, ids, time.Now()); err != nil {
		c.pub.putBackAcked(ids)
		c.pub.log.Warn("recording published rows failed; will retry", "rows", len(ids), "err", err)
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
