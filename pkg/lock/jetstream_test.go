package lock_test

// These tests pin down how nats-server v2.15 and nats.go v1.55 behave in the
// ways the lock relies on, so that an upgrade that changes any of it fails here.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/matryer/is"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A key's per-key TTL expires into a marker (Nats-Marker-Reason: MaxAge) that
// a watcher receives as a KeyValuePurge; this is what wakes a waiter when a
// crashed holder's lock expires. Get then says not found, and Create succeeds
// over the marker.
func TestJetStreamKeyTTLExpiresIntoMarker(t *testing.T) {
	is := is.New(t)
	ctx := testContext(t)
	_, js := natstest.Connect(t, natstest.Server(t))
	kv, err := js.KeyValue(ctx, events.BucketLocks)
	is.NoErr(err)
	w, err := kv.Watch(ctx, "expiry")
	is.NoErr(err)
	defer w.Stop()
	is.Equal(next(t, w), nil) // the key starts empty

	rev, err := kv.Create(ctx, "expiry", []byte("holder"), jetstream.KeyTTL(time.Second))
	is.NoErr(err)
	is.Equal(lastMsg(t, js, "expiry").Header.Get(jetstream.MsgTTLHeader), "1s") // the key carries its TTL
	put := next(t, w)
	is.Equal(put.Operation(), jetstream.KeyValuePut) // the watcher sees the create
	is.Equal(put.Revision(), rev)                    // at its revision

	marker := next(t, w)
	is.Equal(marker.Operation(), jetstream.KeyValuePurge) // expiry arrives as a purge
	is.True(marker.Revision() > rev)                      // as a new revision of the key
	raw := lastMsg(t, js, "expiry")
	is.Equal(raw.Header.Get(jetstream.MarkerReasonHeader), "MaxAge") // the server's subject delete marker
	is.Equal(raw.Sequence, marker.Revision())                        // is the key's last message

	_, err = kv.Get(ctx, "expiry")
	is.True(errors.Is(err, jetstream.ErrKeyNotFound)) // an expired key reads as not found
	_, err = kv.Create(ctx, "expiry", []byte("next"), jetstream.KeyTTL(time.Second))
	is.NoErr(err) // and can be created again over the marker
}

// kv.Update drops the key's per-key TTL, which is why the keep-alive does
// not use it.
func TestJetStreamUpdateDropsKeyTTL(t *testing.T) {
	is := is.New(t)
	ctx := testContext(t)
	_, js := natstest.Connect(t, natstest.Server(t))
	kv, err := js.KeyValue(ctx, events.BucketLocks)
	is.NoErr(err)
	rev, err := kv.Create(ctx, "update", []byte("a"), jetstream.KeyTTL(time.Minute))
	is.NoErr(err)
	is.Equal(lastMsg(t, js, "update").Header.Get(jetstream.MsgTTLHeader), "1m0s") // created with a TTL
	_, err = kv.Update(ctx, "update", []byte("b"), rev)
	is.NoErr(err)
	is.Equal(lastMsg(t, js, "update").Header.Get(jetstream.MsgTTLHeader), "") // Update left no TTL
}

// Publishing to the key's subject with a message TTL and the expected last
// sequence renews the key and keeps a TTL on it; watchers see a put; a stale
// expected revision is refused with a conflict and changes nothing. A purge
// with a stale LastRevision is refused the same way.
func TestJetStreamRenewByPublish(t *testing.T) {
	is := is.New(t)
	ctx := testContext(t)
	_, js := natstest.Connect(t, natstest.Server(t))
	kv, err := js.KeyValue(ctx, events.BucketLocks)
	is.NoErr(err)
	rev, err := kv.Create(ctx, "renew", []byte("a"), jetstream.KeyTTL(time.Minute))
	is.NoErr(err)
	w, err := kv.Watch(ctx, "renew", jetstream.UpdatesOnly())
	is.NoErr(err)
	defer w.Stop()

	subject := "$KV." + events.BucketLocks + ".renew"
	ack, err := js.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: []byte("b")},
		jetstream.WithMsgTTL(time.Minute), jetstream.WithExpectLastSequencePerSubject(rev))
	is.NoErr(err)
	is.True(ack.Sequence > rev)                                                  // a new revision
	is.Equal(lastMsg(t, js, "renew").Header.Get(jetstream.MsgTTLHeader), "1m0s") // still with a TTL
	e := next(t, w)
	is.Equal(e.Operation(), jetstream.KeyValuePut) // a renewal is a put to watchers
	is.Equal(string(e.Value()), "b")               // with the new value

	_, err = js.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: []byte("c")},
		jetstream.WithMsgTTL(time.Minute), jetstream.WithExpectLastSequencePerSubject(rev))
	var apiErr *jetstream.APIError
	is.True(errors.As(err, &apiErr))                                       // a stale revision is refused
	is.Equal(apiErr.ErrorCode, jetstream.JSErrCodeStreamWrongLastSequence) // as a wrong last sequence
	err = kv.Purge(ctx, "renew", jetstream.LastRevision(rev))
	is.True(errors.Is(err, jetstream.ErrKeyRevisionMismatch)) // so is a purge at a stale revision
	cur, err := kv.Get(ctx, "renew")
	is.NoErr(err)
	is.Equal(cur.Revision(), ack.Sequence) // and neither changed the key
	is.Equal(string(cur.Value()), "b")     // nor its value
}

// Without subject_delete_marker_ttl a key with a TTL expires silently: a
// watcher gets nothing, so a waiter would wait out its whole budget. With
// history above 1 the server raises a message's TTL to the marker TTL. New
// refuses buckets like these.
func TestJetStreamBucketSettingsTheLockNeeds(t *testing.T) {
	t.Run("no markers, silent expiry", func(t *testing.T) {
		is := is.New(t)
		ctx := testContext(t)
		_, js := natstest.Connect(t, natstest.Server(t))
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{
			Name: "KV_silent", Subjects: []string{"$KV.silent.>"}, MaxMsgsPerSubject: 1,
			AllowMsgTTL: true, AllowRollup: true, Discard: jetstream.DiscardNew,
		})
		is.NoErr(err)
		kv, err := js.KeyValue(ctx, "silent")
		is.NoErr(err)
		w, err := kv.Watch(ctx, "k")
		is.NoErr(err)
		defer w.Stop()
		is.Equal(next(t, w), nil) // empty to start with
		_, err = kv.Create(ctx, "k", []byte("a"), jetstream.KeyTTL(time.Second))
		is.NoErr(err)
		is.Equal(next(t, w).Operation(), jetstream.KeyValuePut) // the create
		waitFor(t, "the key to expire", func() bool {
			_, err := kv.Get(ctx, "k")
			return errors.Is(err, jetstream.ErrKeyNotFound)
		})
		_, err = kv.Put(ctx, "k", []byte("after"))
		is.NoErr(err)
		e := next(t, w)
		is.Equal(e.Operation(), jetstream.KeyValuePut) // no marker came between
		is.Equal(string(e.Value()), "after")           // the next thing seen is the later put
	})
	t.Run("history above 1 stretches the TTL", func(t *testing.T) {
		is := is.New(t)
		ctx := testContext(t)
		_, js := natstest.Connect(t, natstest.Server(t))
		kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "hist", History: 2, LimitMarkerTTL: time.Minute})
		is.NoErr(err)
		_, err = kv.Create(ctx, "k", []byte("a"), jetstream.KeyTTL(time.Second))
		is.NoErr(err)
		s, err := js.Stream(ctx, "KV_hist")
		is.NoErr(err)
		m, err := s.GetLastMsgForSubject(ctx, "$KV.hist.k")
		is.NoErr(err)
		is.Equal(m.Header.Get(jetstream.MsgTTLHeader), "60") // 1s became the marker TTL
	})
}

// next reads the watcher's next update; nil marks the end of the initial values.
func next(t *testing.T, w jetstream.KeyWatcher) jetstream.KeyValueEntry {
	t.Helper()
	select {
	case e, ok := <-w.Updates():
		if !ok {
			t.Fatal("watcher closed")
		}
		return e
	case <-time.After(30 * time.Second):
		t.Fatal("no watcher update within 30s")
		return nil
	}
}

// lastMsg is the raw last message on a key of the locks bucket, with headers.
func lastMsg(t *testing.T, js jetstream.JetStream, key string) *jetstream.RawStreamMsg {
	t.Helper()
	ctx := testContext(t)
	s, err := js.Stream(ctx, "KV_"+events.BucketLocks)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	m, err := s.GetLastMsgForSubject(ctx, "$KV."+events.BucketLocks+"."+key)
	if err != nil {
		t.Fatalf("last message of %s: %v", key, err)
	}
	return m
}

// waitFor waits for cond with a deadline; it is how tests wait without timing.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting 30s for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
