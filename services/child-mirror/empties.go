package childmirror

import (
	"sync"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
)

// empties remembers, in this process, when Prime last answered nothing for
// a queued item within its grace (§7, §9): the item's next ask then takes
// only an answer newer than that one, and is not made at all once another
// path has mirrored the object since (drain.brought). A process that
// restarts forgets, and asks Prime once more than it needed to.
type empties struct {
	mu sync.Mutex
	at map[emptyKey]time.Time
}

// emptyKey is an item as it was queued: one queued again is another.
type emptyKey struct {
	id     int64
	queued int64
}

func keyOf(it store.SyncQueueItem) emptyKey { return emptyKey{it.ID, it.QueuedUTC.UnixNano()} }

// answered is when Prime last answered nothing for it; zero when it has not
// in this process.
func (e *empties) answered(it store.SyncQueueItem) time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.at[keyOf(it)]
}

// note records that Prime answered nothing for it at at, and forgets the
// items queued longer ago than grace: their grace is over.
func (e *empties) note(it store.SyncQueueItem, at time.Time, grace time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.at == nil {
		e.at = make(map[emptyKey]time.Time)
	}
	e.at[keyOf(it)] = at
	for k := range e.at {
		if at.Sub(time.Unix(0, k.queued)) > grace {
			delete(e.at, k)
		}
	}
}

// forget drops it: it has left the queue.
func (e *empties) forget(it store.SyncQueueItem) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.at, keyOf(it))
}
