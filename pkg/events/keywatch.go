package events

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// KeyWatch tells a process when a key of a KV bucket may have changed,
// without a consumer: a subscription to the key's subject sees every
// publish to it — a put, a delete, a purge, and a write the stream refuses
// (a create of a key that exists, an update at a stale revision) — so the
// process reads the key from the stream, which says what it holds. It does
// not see what the server writes itself (a TTL's expiry marker), nor what
// was published while its connection was down: a watcher reads again on a
// clock of its own too (pkg/lock: the holder's expiry; pkg/primebudget: its
// heartbeat).
//
// A consumer would see those, but no role may make one on a bucket: a user
// allowed to create a consumer on its key could have the server deliver the
// key, which it writes, to any subject (nats-server checks no deliver
// subject against its maker's permissions; pkg/natsauth).
type KeyWatch struct {
	sub *nats.Subscription
	c   chan struct{}

	mu      sync.Mutex
	rereads int // the re-reads left since the last publish
	timer   *time.Timer
	stopped bool
}

// rereadPauses space the reads that follow a publish the first read found
// no trace of: a publish can reach a subscriber before the stream's leader
// has stored it.
var rereadPauses = []time.Duration{20 * time.Millisecond, 100 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second}

// WatchKey watches key of bucket on nc. It subscribes before the caller's
// first read, so no write after that read goes unseen, and takes that read
// as following a publish (Unchanged): a write the server had taken but not
// yet stored when it subscribed is read a moment later.
func WatchKey(nc *nats.Conn, bucket, key string) (*KeyWatch, error) {
	w := &KeyWatch{c: make(chan struct{}, 1), rereads: len(rereadPauses)}
	sub, err := nc.Subscribe("$KV."+bucket+"."+key, func(*nats.Msg) { w.published() })
	if err != nil {
		return nil, err
	}
	w.sub = sub
	return w, nil
}

// C receives when the key may have changed: a publish to it was seen, or a
// re-read Unchanged asked for is due.
func (w *KeyWatch) C() <-chan struct{} { return w.c }

// Unchanged says the read that followed a wake found the key as it was
// before: after a publish, C receives again a little later, a few times,
// until a read finds the change (or the publish was a write the stream
// refused, which changes nothing).
func (w *KeyWatch) Unchanged() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped || w.rereads == 0 {
		return
	}
	pause := rereadPauses[len(rereadPauses)-w.rereads]
	w.rereads--
	if w.timer != nil {
		w.timer.Stop()
	}
	w.timer = time.AfterFunc(pause, w.wake)
}

// Stop ends the watch.
func (w *KeyWatch) Stop() {
	w.mu.Lock()
	w.stopped = true
	if w.timer != nil {
		w.timer.Stop()
	}
	w.mu.Unlock()
	_ = w.sub.Unsubscribe() // a connection closed meanwhile has no subscription left to end
}

func (w *KeyWatch) published() {
	w.mu.Lock()
	w.rereads = len(rereadPauses)
	w.mu.Unlock()
	w.wake()
}

func (w *KeyWatch) wake() {
	select {
	case w.c <- struct{}{}:
	default:
	}
}
