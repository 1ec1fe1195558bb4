// Package lock provides task locks in the JetStream KV bucket "locks": one
// key a task, taken by create-if-absent with a per-key TTL, released by a
// revision-checked purge, waited for by watching the key with a
// subscription to its subject, no consumer (spec §8.3, §10.10).
//
// It replaces the spec's ethTask locks (spEthTaskLockInsert): a run that
// finds the lock taken waits for it instead of being dropped, a run that gave
// up waiting never touches the lock, and a crashed holder's lock expires by
// its TTL.
package lock

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Task keys in the locks bucket.
const (
	// KeyOptimoCreate serialises optimo-create runs (spec §8.1).
	KeyOptimoCreate = events.LockOptimoCreate
	// KeyOptimoPlan serialises optimo-plan runs (spec §8.2).
	KeyOptimoPlan = events.LockOptimoPlan
)

var (
	// ErrBusy is what Take returns, wrapped in a *BusyError that names the
	// holder, when the lock stayed taken for the whole wait budget. Giving up
	// leaves the lock untouched (§8.3).
	ErrBusy = errors.New("lock busy")
	// ErrLost means the lock is no longer this holder's: it expired or another
	// holder took it. It is the cause of a lost lock's Context, and Release
	// returns it when there was nothing of ours left to release.
	ErrLost = errors.New("lock lost")
	// ErrReleased is the cause of a released lock's Context, and what a second
	// Release returns.
	ErrReleased = errors.New("lock released")
)

// Config of the locks. Services embed it in their configuration.
type Config struct {
	// TTL is how long a lock lives unless renewed: a whole number of seconds,
	// at least 1s (JetStream keeps per-message TTLs in seconds).
	TTL time.Duration `env:"LOCK_TTL" envDefault:"12m"`
	// Wait is how long Take waits for a busy lock before it gives up with
	// ErrBusy (§8.3: 18 attempts 20 seconds apart).
	Wait time.Duration `env:"LOCK_WAIT" envDefault:"6m"`
	// Renew is how often a held lock is renewed; zero means TTL/3.
	Renew time.Duration `env:"LOCK_RENEW"`
	// prefix is the one the service reads these settings with
	// (OPTIMO_PLAN_), so that an error names the variable to fix (Named).
	prefix string
}

// Named is c read with the environment prefix prefix (the service's
// `envPrefix` tag), for its errors.
func (c Config) Named(prefix string) Config {
	c.prefix = prefix
	return c
}

// Validate refuses the settings the lock cannot work with, each naming its
// variable, with the prefix Named gave (config.Refusal). New calls it.
func (c Config) Validate() error {
	var errs []error
	if c.TTL < time.Second || c.TTL%time.Second != 0 {
		errs = append(errs, config.Refuse(c.prefix+"LOCK_TTL", "must be a whole number of seconds, at least 1s"))
	}
	if c.Renew < 0 || (c.Renew >= c.TTL && c.TTL > 0) {
		errs = append(errs, config.Refuse(c.prefix+"LOCK_RENEW", "must be shorter than %sLOCK_TTL (%s); 0 renews every third of it", c.prefix, c.TTL))
	}
	return errors.Join(append(errs, config.Positive(c.prefix+"LOCK_WAIT", c.Wait))...)
}

func (c Config) renewEvery() time.Duration {
	if c.Renew > 0 {
		return c.Renew
	}
	return c.TTL / 3
}

// Holder is the value of a taken lock, so that `nats kv get locks <key>`
// shows who holds it.
type Holder struct {
	// ID is random, one a Take: it tells this lock from every other.
	ID        string    `json:"id"`
	Host      string    `json:"host"`
	PID       int       `json:"pid"`
	TakenAt   time.Time `json:"takenAt"`
	RenewedAt time.Time `json:"renewedAt,omitzero"`
}

// String names the holder for logs and errors.
func (h Holder) String() string {
	if h.ID == "" {
		return "an unknown holder"
	}
	if h.Host == "" {
		return h.ID
	}
	return fmt.Sprintf("%s (%s pid %d, taken %s)", h.ID, h.Host, h.PID, h.TakenAt.Format(time.RFC3339))
}

func (h Holder) encode() ([]byte, error) {
	b, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("encode lock holder: %w", err)
	}
	return b, nil
}

// decodeHolder reads a lock's value. A value that is not ours (someone ran
// `nats kv put locks optimo-plan maintenance`) is shown as its text.
func decodeHolder(value []byte) Holder {
	var h Holder
	if err := json.Unmarshal(value, &h); err != nil || h.ID == "" {
		return Holder{ID: string(value)}
	}
	return h
}

// BusyError is the error Take returns when it gave up waiting. It matches
// ErrBusy with errors.Is.
type BusyError struct {
	Key    string
	Holder Holder // who held the lock when Take gave up, as last seen
	Waited time.Duration
}

// Error says who holds the lock and how long Take waited.
func (e *BusyError) Error() string {
	return fmt.Sprintf("lock %s: held by %s, gave up after waiting %s: %v",
		e.Key, e.Holder, e.Waited.Round(time.Millisecond), ErrBusy)
}

// Unwrap makes errors.Is(err, ErrBusy) true.
func (e *BusyError) Unwrap() error { return ErrBusy }

// Locker takes locks in the locks bucket.
type Locker struct {
	js      jetstream.JetStream
	kv      jetstream.KeyValue
	cfg     Config
	log     *slog.Logger
	host    string
	subject string // the bucket's subject prefix, "$KV.locks."
	stream  string // the bucket's stream, "KV_locks"
}

// New binds the locks bucket (stream KV_locks, applied from streams/ by
// events.Apply, the operators' step) and checks that it can hold per-key TTLs that
// waiters see expire.
func New(ctx context.Context, js jetstream.JetStream, cfg Config, log *slog.Logger) (*Locker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	kv, st, err := bind(ctx, js, log)
	if err != nil {
		return nil, err
	}
	kvst, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok {
		return nil, fmt.Errorf("lock bucket %s: unexpected status type %T", events.BucketLocks, st)
	}
	sc := kvst.StreamInfo().Config
	switch {
	case !sc.AllowMsgTTL:
		return nil, fmt.Errorf("lock bucket %s: allow_msg_ttl is off, so keys cannot have a TTL", events.BucketLocks)
	case sc.SubjectDeleteMarkerTTL <= 0:
		// Without markers a key expires silently and a watcher never learns it.
		return nil, fmt.Errorf("lock bucket %s: subject_delete_marker_ttl is not set, so waiters would not see a lock expire", events.BucketLocks)
	case sc.MaxMsgsPerSubject != 1 && sc.SubjectDeleteMarkerTTL > cfg.TTL:
		// The server raises a message TTL to the marker TTL unless history is 1.
		return nil, fmt.Errorf("lock bucket %s: history %d with subject_delete_marker_ttl %s would stretch LOCK_TTL %s",
			events.BucketLocks, sc.MaxMsgsPerSubject, sc.SubjectDeleteMarkerTTL, cfg.TTL)
	}
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	return &Locker{
		js:      js,
		kv:      kv,
		cfg:     cfg,
		log:     log,
		host:    host,
		subject: "$KV." + kv.Bucket() + ".",
		stream:  sc.Name,
	}, nil
}

// bindAttempt bounds one attempt of bind.
const bindAttempt = 5 * time.Second

// bind binds the locks bucket and reads its status, trying again with
// backoff while JetStream does not answer (a failover at start-up), each
// wait logged; a request JetStream refuses (400) is returned at once, as is
// ctx's end. A bucket said not to exist is waited for too: the service has
// just applied it (service.Connect), and a node without a leader may say so
// of a stream it holds.
func bind(ctx context.Context, js jetstream.JetStream, log *slog.Logger) (jetstream.KeyValue, jetstream.KeyValueStatus, error) {
	var kv jetstream.KeyValue
	var st jetstream.KeyValueStatus
	err := events.UntilAnswered(ctx, log, "lock bucket not reachable; trying again", bindAttempt, func(ctx context.Context) error {
		var err error
		if kv, err = js.KeyValue(ctx, events.BucketLocks); err == nil {
			st, err = kv.Status(ctx)
		}
		if err != nil {
			return fmt.Errorf("lock bucket %s: %w", events.BucketLocks, err)
		}
		return nil
	}, "bucket", events.BucketLocks)
	if err != nil {
		return nil, nil, err
	}
	return kv, st, nil
}

// natsRetry paces the retries of a NATS failure (a failover's "no response
// from stream", a timeout) while binding the bucket, taking or releasing a
// lock, by attempt. A connection closed for good (the process going down)
// is not tried again.
var natsRetry = events.JetStreamRetry

// Take takes the lock for key, waiting up to the configured budget while
// someone else holds it. Waiting watches the key (wait): it reads the key
// when it is written and when the holder's TTL runs out, and otherwise
// every rereadEvery, and tries to take it only when it is free. A NATS
// failure (a JetStream failover) is tried again with backoff until NATS
// answers, and logged: it delays the run, it does not fail it.
//
// ctx bounds the wait and the hold: the lock's Context is derived from it,
// and when ctx is done the keep-alive stops and the lock expires after its
// TTL unless it is released. Take returns a *BusyError (errors.Is ErrBusy)
// when the budget runs out, and ctx's error when ctx ends first; in both
// cases it has not touched the lock.
func (l *Locker) Take(ctx context.Context, key string) (*Lock, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("take lock %s: %w", key, err)
	}
	t := &taking{key: key, h: Holder{ID: rand.Text(), Host: l.host, PID: os.Getpid()}}
	for attempt := 1; ; attempt++ {
		lk, err := l.create(ctx, t)
		if errors.Is(err, errTaken) {
			lk, err = l.wait(ctx, t)
		}
		if err == nil || errors.Is(err, ErrBusy) || ctx.Err() != nil || errors.Is(err, nats.ErrConnectionClosed) {
			return lk, err
		}
		pause := natsRetry.After(attempt)
		l.log.Warn("taking the lock failed; trying again", "key", key, "in", pause, "err", err)
		if serr := sleep(ctx, pause); serr != nil {
			return nil, fmt.Errorf("take lock %s: %w", key, errors.Join(serr, err))
		}
	}
}

// taking is one Take: the key, the holder it writes, when it first found
// the lock taken (the wait budget runs from then), and whether a create of
// it may have been stored without an answer (uncertainSince, the first such
// attempt).
type taking struct {
	key            string
	h              Holder
	busySince      time.Time
	uncertainSince time.Time
}

// errTaken is create's answer when the key exists, including when another
// taker won the race for it (§8.3).
var errTaken = errors.New("taken")

// create takes the lock if it is free. The attempt is not cut short by ctx:
// an attempt abandoned mid-flight could take the lock without our knowing.
// After a create that failed without an answer, a key that exists may be
// that create's: if it holds this Take's holder, it is taken.
func (l *Locker) create(ctx context.Context, t *taking) (*Lock, error) {
	h := t.h
	h.TakenAt = time.Now().UTC()
	value, err := h.encode()
	if err != nil {
		return nil, err
	}
	sent := time.Now()
	rev, err := l.kv.Create(context.WithoutCancel(ctx), t.key, value, jetstream.KeyTTL(l.cfg.TTL))
	switch {
	case events.IsKVConflict(err) && !t.uncertainSince.IsZero():
		cur, curRev, gerr := l.current(context.WithoutCancel(ctx), t.key)
		switch {
		case gerr != nil:
			return nil, fmt.Errorf("take lock %s: reading the key after a create that went unanswered: %w", t.key, gerr)
		case cur.ID == t.h.ID:
			l.log.Info("took lock: an earlier attempt was stored, its answer lost", "key", t.key)
			return l.hold(ctx, t.key, cur, curRev, t.uncertainSince), nil
		case cur.ID == "":
			// Refused as taken, read as free: the cluster is still settling
			// after the failure. Ask again.
			return nil, fmt.Errorf("take lock %s: refused as taken, but nobody holds it yet", t.key)
		}
		return nil, errTaken
	case events.IsKVConflict(err):
		return nil, errTaken
	case err != nil:
		if t.uncertainSince.IsZero() {
			t.uncertainSince = sent
		}
		return nil, fmt.Errorf("take lock %s: %w", t.key, err)
	}
	return l.hold(ctx, t.key, h, rev, sent), nil
}

// How a waiter watches the lock (wait). It reads who holds the key again
// when a write to it is seen (a renewal, a release, another taker's
// attempt: events.WatchKey), when the holder's TTL runs out (the server
// publishes no expiry marker), and at least every rereadEvery, which bounds
// how late it learns of a release published while its connection was down.
// Past the holder's expiry it reads again after expirySlack, doubled each
// time the lock is still there (the server expires a key a little after
// its TTL, and the hosts' clocks differ).
const (
	rereadEvery = 10 * time.Second
	expirySlack = 100 * time.Millisecond
	// readAttempt bounds one read of the key while waiting.
	readAttempt = 5 * time.Second
)

// wait waits for key to be free and takes it, until the budget, counted
// from when the Take first found the lock taken, runs out. It tries to take
// the lock only when a read finds it free (deleted, purged or expired).
func (l *Locker) wait(ctx context.Context, t *taking) (*Lock, error) {
	if t.busySince.IsZero() {
		t.busySince = time.Now()
	}
	key, start := t.key, t.busySince
	wctx, cancel := context.WithDeadline(ctx, start.Add(l.cfg.Wait))
	defer cancel()
	var holder Holder // the holder last seen
	giveUp := func() (*Lock, error) {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("wait for lock %s: %w", key, context.Cause(ctx))
		}
		err := &BusyError{Key: key, Holder: holder, Waited: time.Since(start)}
		l.log.Warn("gave up waiting for lock", "key", key, "holder", holder.String(), "waited", err.Waited)
		return nil, err
	}
	// Watched before the first read, so that no write after it goes unseen.
	w, err := events.WatchKey(l.js.Conn(), events.BucketLocks, key)
	if err != nil {
		return nil, fmt.Errorf("wait for lock %s: watch: %w", key, err)
	}
	defer w.Stop()
	var seen keyState
	logged, overdue := false, 0
	for {
		rctx, rcancel := context.WithTimeout(wctx, readAttempt)
		k, err := l.read(rctx, key)
		rcancel()
		switch {
		case wctx.Err() != nil:
			return giveUp()
		case err != nil:
			return nil, fmt.Errorf("wait for lock %s: %w", key, err)
		case k.holder.ID == "":
			lk, err := l.create(ctx, t)
			switch {
			case err == nil:
				l.log.Info("took lock after waiting", "key", key, "waited", time.Since(start))
				return lk, nil
			case !errors.Is(err, errTaken):
				return nil, err
			}
			continue // lost the race: read who won
		}
		if k.rev == seen.rev {
			w.Unchanged()
		} else {
			overdue = 0
		}
		seen, holder = k, k.holder
		if !logged {
			logged = true
			l.log.Info("waiting for lock", "key", key, "holder", holder.String(), "budget", l.cfg.Wait)
		}
		next := rereadEvery
		if !k.expires.IsZero() {
			if d := time.Until(k.expires); d > 0 {
				next = min(next, d)
			} else {
				next = min(next, expirySlack<<min(overdue, 10))
				overdue++
			}
		}
		timer := time.NewTimer(next)
		select {
		case <-wctx.Done():
			timer.Stop()
			return giveUp()
		case <-w.C():
		case <-timer.C:
		}
		timer.Stop()
	}
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Lock is a taken lock. Its keep-alive renews it until Release, until the
// context given to Take is done, or until the lock is lost.
type Lock struct {
	l      *Locker
	key    string
	holder Holder
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{} // closed when the keep-alive has stopped

	mu       sync.Mutex
	rev      uint64
	expires  time.Time // the earliest the server may expire the lock as last written
	released bool
}

func (l *Locker) hold(ctx context.Context, key string, h Holder, rev uint64, sent time.Time) *Lock {
	lctx, cancel := context.WithCancelCause(ctx)
	lk := &Lock{l: l, key: key, holder: h, ctx: lctx, cancel: cancel, done: make(chan struct{}), rev: rev,
		expires: sent.Add(l.cfg.TTL)}
	go lk.keepAlive()
	return lk
}

// Key is the task key the lock is on.
func (lk *Lock) Key() string { return lk.key }

// Holder is the value the lock was taken with.
func (lk *Lock) Holder() Holder { return lk.holder }

// Revision is the key's revision as this holder last wrote it; it changes
// with every renewal.
func (lk *Lock) Revision() uint64 {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	return lk.rev
}

// Context is done when the lock is released, when the context given to Take
// is done, or when the lock is lost; context.Cause tells which (ErrReleased,
// ErrLost or the parent's cause). Work done under the lock should use it.
func (lk *Lock) Context() context.Context { return lk.ctx }

// keepAlive renews the lock every Renew until its context ends.
func (lk *Lock) keepAlive() {
	defer close(lk.done)
	t := time.NewTicker(lk.l.cfg.renewEvery())
	defer t.Stop()
	for {
		select {
		case <-lk.ctx.Done():
			return
		case <-t.C:
		}
		sent := time.Now()
		expires := lk.expiry()
		err := lk.renew(expires)
		switch {
		case err == nil:
			lk.mu.Lock()
			lk.expires = sent.Add(lk.l.cfg.TTL)
			lk.mu.Unlock()
		case errors.Is(err, ErrLost):
			lk.lost(err)
			return
		case !time.Now().Before(expires):
			lk.lost(fmt.Errorf("lock %s: not renewed within its TTL (%w): %w", lk.key, err, ErrLost))
			return
		default:
			lk.l.log.Warn("lock renewal failed, will retry", "key", lk.key, "err", err)
		}
	}
}

func (lk *Lock) lost(err error) {
	lk.l.log.Error("lost lock", "key", lk.key, "holder", lk.holder.ID, "err", err)
	lk.cancel(err)
}

// renew republishes the holder with a fresh per-key TTL, expecting the
// revision we last wrote. kv.Update would drop the key's TTL (DESIGN.md,
// "Known sharp edges"). A renewal in flight is not cut short by Release, so
// that Release purges the revision that is really current.
func (lk *Lock) renew(expires time.Time) error {
	ctx, cancel := context.WithDeadline(context.WithoutCancel(lk.ctx), expires)
	defer cancel()
	h := lk.holder
	h.RenewedAt = time.Now().UTC()
	value, err := h.encode()
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		rev := lk.Revision()
		ack, err := lk.l.js.PublishMsg(ctx, &nats.Msg{Subject: lk.l.subject + lk.key, Data: value},
			jetstream.WithMsgTTL(lk.l.cfg.TTL), jetstream.WithExpectLastSequencePerSubject(rev))
		if err == nil {
			lk.setRevision(ack.Sequence)
			return nil
		}
		if !events.IsKVConflict(err) {
			return fmt.Errorf("renew lock %s: %w", lk.key, err)
		}
		cur, curRev, err := lk.l.current(ctx, lk.key)
		switch {
		case err != nil:
			return fmt.Errorf("renew lock %s: revision %d is gone, reading the key: %w", lk.key, rev, err)
		case cur.ID == lk.holder.ID && attempt == 0:
			// Our own earlier renewal whose ack never came back.
			lk.setRevision(curRev)
		case cur.ID == "":
			return fmt.Errorf("lock %s: expired: %w", lk.key, ErrLost)
		default:
			return fmt.Errorf("lock %s: now held by %s: %w", lk.key, cur, ErrLost)
		}
	}
}

func (lk *Lock) expiry() time.Time {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	return lk.expires
}

func (lk *Lock) setRevision(rev uint64) {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	lk.rev = rev
}

// current reads who holds key now, and the key's revision; a zero Holder
// means nobody does (read).
func (l *Locker) current(ctx context.Context, key string) (Holder, uint64, error) {
	k, err := l.read(ctx, key)
	return k.holder, k.rev, err
}

// keyState is a lock's key as read: who holds it (a zero Holder: nobody),
// the key's revision, and when the server expires it unless it is renewed
// (zero when nobody holds it, or it has no TTL).
type keyState struct {
	holder  Holder
	rev     uint64
	expires time.Time
}

// read reads the lock's key, with its headers (the TTL's, the markers'),
// from the stream's leader, as kv.Get does on a bucket that allows no
// direct get (streams/KV_locks.json): a replica still catching up after a
// failover would say that nobody holds a lock the leader has just refused
// to create.
func (l *Locker) read(ctx context.Context, key string) (keyState, error) {
	req, err := json.Marshal(struct {
		LastBySubject string `json:"last_by_subj"`
	}{l.subject + key})
	if err != nil {
		return keyState{}, err
	}
	msg, err := l.js.Conn().RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+l.stream, req)
	if err != nil {
		return keyState{}, err
	}
	var resp struct {
		Message *struct {
			Seq     uint64    `json:"seq"`
			Headers []byte    `json:"hdrs"`
			Data    []byte    `json:"data"`
			Time    time.Time `json:"time"`
		} `json:"message"`
		Error *jetstream.APIError `json:"error"`
	}
	switch err := json.Unmarshal(msg.Data, &resp); {
	case err != nil:
		return keyState{}, fmt.Errorf("read lock %s: %w", key, err)
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return keyState{}, nil
	case resp.Error != nil:
		return keyState{}, fmt.Errorf("read lock %s: %w", key, resp.Error)
	case resp.Message == nil:
		return keyState{}, fmt.Errorf("read lock %s: %w", key, jetstream.ErrInvalidJetStreamResponse)
	}
	k := keyState{rev: resp.Message.Seq}
	if len(resp.Message.Headers) > 0 {
		h, err := nats.DecodeHeadersMsg(resp.Message.Headers)
		if err != nil {
			return keyState{}, fmt.Errorf("read lock %s: %w", key, err)
		}
		if op := h.Get(kvOperationHeader); op == "DEL" || op == "PURGE" || h.Get(jetstream.MarkerReasonHeader) != "" {
			return k, nil // released, or expired
		}
		if ttl, ok := messageTTL(h.Get(jetstream.MsgTTLHeader)); ok {
			k.expires = resp.Message.Time.Add(ttl)
		}
	}
	k.holder = decodeHolder(resp.Message.Data)
	return k, nil
}

// messageTTL reads a Nats-TTL header: a duration ("12m0s", as the lock
// writes it) or whole seconds ("720", as the server may).
func messageTTL(v string) (time.Duration, bool) {
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return d, true
	}
	if n, err := strconv.Atoi(v); err == nil && n > 0 {
		return time.Duration(n) * time.Second, true
	}
	return 0, false
}

// Held reads who holds the lock of key now, as `nats kv get locks <key>`
// does; found is false when nobody does. It neither takes nor changes a
// lock: primectl status and the status page read the locks with it. (A
// replica may answer; for a look at the locks that is close enough.)
func Held(ctx context.Context, js jetstream.JetStream, key string) (h Holder, found bool, err error) {
	kv, err := js.KeyValue(ctx, events.BucketLocks)
	if err != nil {
		return Holder{}, false, fmt.Errorf("lock bucket %s: %w", events.BucketLocks, err)
	}
	e, err := kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return Holder{}, false, nil
	case err != nil:
		return Holder{}, false, err
	}
	h = decodeHolder(e.Value())
	return h, h.ID != "", nil
}

// kvOperationHeader marks a KV delete or purge.
const kvOperationHeader = "KV-Operation"

// releaseAttempt bounds one purge of Release.
const releaseAttempt = 5 * time.Second

// Release stops the keep-alive and purges the key, but only at the revision
// this holder last wrote: a lock that expired, or that someone else has taken
// since, is left as it is and Release returns ErrLost. A purge that fails on
// a NATS failure (a JetStream failover) is tried again with backoff until it
// is done, the lock is no longer ours, or the lock's TTL has run out (it has
// expired then, and Release returns ErrLost) — or until ctx ends, when
// Release returns ctx's error and may be called again. A second Release
// returns ErrReleased.
func (lk *Lock) Release(ctx context.Context) error {
	lk.cancel(ErrReleased)
	<-lk.done
	lk.mu.Lock()
	defer lk.mu.Unlock()
	if lk.released {
		return fmt.Errorf("release lock %s: %w", lk.key, ErrReleased)
	}
	failed := false
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, releaseAttempt)
		err := lk.l.kv.Purge(actx, lk.key, jetstream.LastRevision(lk.rev))
		cancel()
		switch {
		case err == nil:
			lk.released = true
			return nil
		case events.IsKVConflict(err):
			rctx, rcancel := context.WithTimeout(ctx, releaseAttempt)
			cur, curRev, gerr := lk.l.current(rctx, lk.key)
			rcancel()
			switch {
			case gerr != nil:
				err = gerr // try again
			case cur.ID == lk.holder.ID && curRev != lk.rev:
				lk.rev = curRev // a renewal stored, its answer lost: purge that one
				continue
			case cur.ID == lk.holder.ID:
				// Refused at the revision the key is read at: the cluster is
				// still applying what it stored while it could not answer.
				err = fmt.Errorf("purge at revision %d refused, the key read at it: %w", lk.rev, err)
			case cur.ID == "" && failed:
				lk.released = true // an earlier purge was stored, its answer lost
				return nil
			case cur.ID == "":
				lk.released = true // expired: nothing of ours is left to release
				return fmt.Errorf("release lock %s: revision %d is no longer current, the lock expired: %w", lk.key, lk.rev, ErrLost)
			default:
				lk.released = true
				return fmt.Errorf("release lock %s: revision %d is no longer current, now held by %s: %w", lk.key, lk.rev, cur, ErrLost)
			}
		case !time.Now().Before(lk.expires):
			lk.released = true
			return fmt.Errorf("release lock %s: not released before its TTL ran out, so it expired (%w): %w", lk.key, err, ErrLost)
		case errors.Is(err, nats.ErrConnectionClosed):
			return fmt.Errorf("release lock %s: %w", lk.key, err) // for good: the lock expires by its TTL
		}
		failed = true
		pause := natsRetry.After(attempt)
		lk.l.log.Warn("releasing the lock failed; trying again", "key", lk.key, "in", pause, "err", err)
		if serr := sleep(ctx, pause); serr != nil {
			return fmt.Errorf("release lock %s: %w", lk.key, errors.Join(serr, err))
		}
	}
}
