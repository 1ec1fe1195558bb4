package events

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ApplyCommand is the operators' step that makes NATS hold the streams of
// streams/ and every durable consumer (Apply), with the operators' user: a
// service finds them made, and may itself only read their info.
const ApplyCommand = "primectl streams apply"

// The defaults of a Consumer left zero.
const (
	defaultAckWait       = 30 * time.Second
	defaultMaxAckPending = 1024
)

// Config is the consumer's JetStream configuration: a durable consumer
// (pull, or push to its DeliverSubject), acked one message at a time,
// delivered for as long as it takes.
func (c Consumer) Config() jetstream.ConsumerConfig {
	cfg := jetstream.ConsumerConfig{
		Durable:        c.Durable,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        cmp.Or(c.AckWait, defaultAckWait),
		MaxAckPending:  cmp.Or(c.MaxAckPending, defaultMaxAckPending),
		MaxDeliver:     -1,
		DeliverSubject: c.DeliverSubject,
		DeliverGroup:   c.DeliverGroup,
	}
	if len(c.Subjects) == 1 {
		cfg.FilterSubject = c.Subjects[0]
	} else {
		cfg.FilterSubjects = c.Subjects
	}
	return cfg
}

// Drift names what of live, the consumer NATS holds, is not c's
// definition; none when it is.
func (c Consumer) Drift(live jetstream.ConsumerConfig) []string {
	want := c.Config()
	filters := func(cfg jetstream.ConsumerConfig) []string {
		if cfg.FilterSubject != "" {
			return []string{cfg.FilterSubject}
		}
		return cfg.FilterSubjects
	}
	var out []string
	for _, f := range []struct {
		name string
		same bool
	}{
		{"filter_subjects", slices.Equal(filters(want), filters(live))},
		{"ack_policy", want.AckPolicy == live.AckPolicy},
		{"ack_wait", want.AckWait == live.AckWait},
		{"max_ack_pending", want.MaxAckPending == live.MaxAckPending},
		{"max_deliver", want.MaxDeliver == live.MaxDeliver},
		{"deliver_policy", want.DeliverPolicy == live.DeliverPolicy},
		{"deliver_subject", want.DeliverSubject == live.DeliverSubject}, // a push consumer delivers where its maker chose
		{"deliver_group", want.DeliverGroup == live.DeliverGroup},
	} {
		if !f.same {
			out = append(out, f.name)
		}
	}
	return out
}

// NotAppliedError is NATS holding a stream or consumer that is missing or
// not as defined: the operators' step (ApplyCommand) has not run since the
// definitions changed, or someone changed NATS by hand.
type NotAppliedError struct {
	Problems []string
}

func (e *NotAppliedError) Error() string {
	return strings.Join(e.Problems, "; ") + ": run `" + ApplyCommand + "` (the operators' NATS user)"
}

// CheckRole reports whether NATS holds the streams the role touches and
// its consumers as defined: a *NotAppliedError names what is missing or
// different; any other error is JetStream's (not answering). It reads
// only what the role's user may read (their info).
func CheckRole(ctx context.Context, js jetstream.JetStream, r Role, replicas int) error {
	streams, err := r.Streams()
	if err != nil {
		return err
	}
	return check(ctx, js, replicas, streams, r.Consumes)
}

// CheckAll is CheckRole for every stream of streams/ and every durable
// consumer.
func CheckAll(ctx context.Context, js jetstream.JetStream, replicas int) error {
	defs, err := streamDefs(replicas)
	if err != nil {
		return err
	}
	var names []string
	for _, d := range defs {
		names = append(names, d.cfg.Name)
	}
	return check(ctx, js, replicas, names, Consumers())
}

func check(ctx context.Context, js jetstream.JetStream, replicas int, streams []string, consumers []Consumer) error {
	defs, err := streamDefs(replicas)
	if err != nil {
		return err
	}
	var problems []string
	for _, d := range defs {
		if !slices.Contains(streams, d.cfg.Name) {
			continue
		}
		s, err := js.Stream(ctx, d.cfg.Name)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			problems = append(problems, "stream "+d.cfg.Name+" is missing")
		case err != nil:
			return fmt.Errorf("stream %s: %w", d.cfg.Name, err)
		default:
			if diff := d.drift(s.CachedInfo().Config); len(diff) > 0 {
				problems = append(problems, fmt.Sprintf("stream %s differs from streams/%s.json in %s", d.cfg.Name, d.cfg.Name, strings.Join(diff, ", ")))
			}
		}
	}
	for _, c := range consumers {
		info, err := c.Info(ctx, js)
		switch {
		case errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound):
			problems = append(problems, "consumer "+c.Stream+"/"+c.Durable+" is missing")
		case errors.Is(err, jetstream.ErrNotPullConsumer) || errors.Is(err, jetstream.ErrNotPushConsumer):
			problems = append(problems, KindProblem(c))
		case err != nil:
			return fmt.Errorf("consumer %s/%s: %w", c.Stream, c.Durable, err)
		default:
			if diff := c.Drift(info.Config); len(diff) > 0 {
				problems = append(problems, fmt.Sprintf("consumer %s/%s differs from its definition (pkg/events) in %s", c.Stream, c.Durable, strings.Join(diff, ", ")))
			}
		}
	}
	if len(problems) > 0 {
		return &NotAppliedError{Problems: problems}
	}
	return nil
}

// streamDef is a stream of streams/: its configuration, and the fields its
// file sets, which are the ones a live stream is held to.
type streamDef struct {
	cfg    jetstream.StreamConfig
	fields []string
}

func streamDefs(replicas int) ([]streamDef, error) {
	cfgs, err := StreamConfigs(replicas)
	if err != nil {
		return nil, err
	}
	defs := make([]streamDef, len(cfgs))
	for i, cfg := range cfgs {
		raw, err := streamFile(cfg.Name)
		if err != nil {
			return nil, err
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(raw, &fields); err != nil {
			return nil, fmt.Errorf("streams/%s.json: %w", cfg.Name, err)
		}
		defs[i] = streamDef{cfg: cfg, fields: slices.Sorted(maps.Keys(fields))}
	}
	return defs, nil
}

// drift names the fields of the file whose value live does not have
// (JetStream leaves out a field at its zero value).
func (d streamDef) drift(live jetstream.StreamConfig) []string {
	want, got := asFields(d.cfg), asFields(live)
	var out []string
	for _, f := range d.fields {
		w, g := want[f], got[f]
		if isZeroField(w) && isZeroField(g) || reflect.DeepEqual(w, g) {
			continue
		}
		out = append(out, f)
	}
	return out
}

func asFields(cfg jetstream.StreamConfig) map[string]any {
	b, _ := json.Marshal(cfg) // a StreamConfig always marshals
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

func isZeroField(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case bool:
		return !v
	case float64:
		return v == 0
	case string:
		return v == ""
	case []any:
		return len(v) == 0
	case map[string]any:
		return len(v) == 0
	}
	return false
}

// Apply makes NATS hold what is defined, as the operators' step does
// (ApplyCommand, and bin/primeflow before its services start): every
// stream of streams/ created, or updated where it is not as its file says
// (replicas above zero overriding num_replicas), and every durable
// consumer created, or updated where it is not as defined. It returns what
// it changed, one line each; nothing when NATS held it all already. It
// runs again safely, after a failure too.
//
// A subject that moved from one stream to another (makesafe.detect, from
// MAKESAFE to MAKESAFE_DETECT) leaves messages where it was: those a
// durable consumer there had not acked yet are published again to the
// stream that takes the subject now (with their Nats-Msg-Id: the handlers
// are idempotent, and a few acked out of order may be handled twice), the
// old stream's copies are purged, and only then is the consumer moved off
// the subject. A schedule stored on a moved subject is dropped, not
// carried over: the new stream takes none (MAKESAFE_DETECT).
func Apply(ctx context.Context, js jetstream.JetStream, replicas int) ([]string, error) {
	defs, err := streamDefs(replicas)
	if err != nil {
		return nil, err
	}
	moves, err := findMoves(ctx, js, defs)
	if err != nil {
		return nil, err
	}
	var did []string
	var missing []jetstream.StreamConfig
	// Existing streams first: one giving up a subject does so before the
	// stream that takes it is made (two streams may not share a subject).
	for _, d := range defs {
		s, err := js.Stream(ctx, d.cfg.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			missing = append(missing, d.cfg)
			continue
		}
		if err != nil {
			return did, fmt.Errorf("stream %s: %w", d.cfg.Name, err)
		}
		diff := d.drift(s.CachedInfo().Config)
		if len(diff) == 0 {
			continue
		}
		if _, err := js.UpdateStream(ctx, d.cfg); err != nil {
			return did, fmt.Errorf("stream %s: update %s: %w", d.cfg.Name, strings.Join(diff, ", "), err)
		}
		did = append(did, fmt.Sprintf("stream %s updated: %s", d.cfg.Name, strings.Join(diff, ", ")))
	}
	for _, cfg := range missing {
		if _, err := js.CreateStream(ctx, cfg); err != nil {
			return did, fmt.Errorf("stream %s: create: %w", cfg.Name, err)
		}
		did = append(did, "stream "+cfg.Name+" created")
	}
	for _, m := range moves {
		line, err := m.carry(ctx, js)
		if err != nil {
			return did, err
		}
		did = append(did, line)
	}
	for _, c := range Consumers() {
		line, err := ApplyConsumer(ctx, js, c)
		if err != nil {
			return did, err
		}
		if line != "" {
			did = append(did, line)
		}
	}
	return did, nil
}

// Info reads what NATS holds as c, as the kind c is defined (pull or
// push): jetstream.ErrNotPullConsumer or ErrNotPushConsumer when NATS
// holds it as the other kind.
func (c Consumer) Info(ctx context.Context, js jetstream.JetStream) (*jetstream.ConsumerInfo, error) {
	if c.Push() {
		cons, err := js.PushConsumer(ctx, c.Stream, c.Durable)
		if err != nil {
			return nil, err
		}
		return cons.CachedInfo(), nil
	}
	cons, err := js.Consumer(ctx, c.Stream, c.Durable)
	if err != nil {
		return nil, err
	}
	return cons.CachedInfo(), nil
}

// KindProblem says that NATS holds c as the other kind of consumer than
// defined: a push consumer delivers to the subject its maker chose, a pull
// consumer to the subject its reader chooses.
func KindProblem(c Consumer) string {
	if c.Push() {
		return "consumer " + c.Stream + "/" + c.Durable + " is a pull consumer, not the push consumer defined (deliver_subject " + c.DeliverSubject + ")"
	}
	return "consumer " + c.Stream + "/" + c.Durable + " is a push consumer (deliver_subject), not the pull consumer defined"
}

// ApplyConsumer creates c, or updates it where it is not as defined, and
// says which it did ("" when it was as defined already). A pull consumer
// defined as push (MAKESAFE/makesafe before issue 27's fix) is deleted and
// made again, as JetStream cannot turn one into the other: the new one
// delivers the stream's messages from its first, which its reader must
// take as already handled where they were (makesafe does nothing for a
// rung whose row says it fired).
func ApplyConsumer(ctx context.Context, js jetstream.JetStream, c Consumer) (string, error) {
	name := c.Stream + "/" + c.Durable
	var line string
	info, err := c.Info(ctx, js)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		line = "consumer " + name + " created"
	case errors.Is(err, jetstream.ErrNotPullConsumer):
		// JetStream cannot turn it into a pull consumer, and a new one
		// would start from the stream's first message: a person decides.
		return "", fmt.Errorf("%s: it is not primeflow's; remove it (nats consumer rm %s %s) and apply again", KindProblem(c), c.Stream, c.Durable)
	case errors.Is(err, jetstream.ErrNotPushConsumer):
		if err := js.DeleteConsumer(ctx, c.Stream, c.Durable); err != nil {
			return "", fmt.Errorf("consumer %s: delete the pull consumer to make it push: %w", name, err)
		}
		line = "consumer " + name + " recreated as a push consumer delivering to " + c.DeliverSubject +
			" (a pull consumer cannot become one): it delivers the stream's messages again from the first"
	case err != nil:
		return "", fmt.Errorf("consumer %s: %w", name, err)
	default:
		diff := c.Drift(info.Config)
		if len(diff) == 0 {
			return "", nil
		}
		line = "consumer " + name + " updated: " + strings.Join(diff, ", ")
	}
	if c.Push() {
		_, err = js.CreateOrUpdatePushConsumer(ctx, c.Stream, c.Config())
	} else {
		_, err = js.CreateOrUpdateConsumer(ctx, c.Stream, c.Config())
	}
	if err != nil {
		return "", fmt.Errorf("consumer %s: %w", name, err)
	}
	return line, nil
}

// move is the messages a stream still holds on a subject that another
// stream takes now.
type move struct {
	from, to, subject string
	owed              []*jetstream.RawStreamMsg // not acked yet by a consumer of from that reads subject
	schedules         int                       // schedules among them, not carried
}

// findMoves finds, before any stream changes, the messages each stream
// holds on a subject another stream's file takes, and which of them a
// durable consumer reading that subject there has not acked.
func findMoves(ctx context.Context, js jetstream.JetStream, defs []streamDef) ([]move, error) {
	var moves []move
	for _, from := range defs {
		s, err := js.Stream(ctx, from.cfg.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w", from.cfg.Name, err)
		}
		for _, to := range defs {
			if to.cfg.Name == from.cfg.Name {
				continue
			}
			for _, subject := range to.cfg.Subjects {
				info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
				if err != nil {
					return nil, fmt.Errorf("stream %s: %w", from.cfg.Name, err)
				}
				if len(info.State.Subjects) == 0 {
					continue
				}
				m := move{from: from.cfg.Name, to: to.cfg.Name, subject: subject}
				if err := m.collect(ctx, s); err != nil {
					return nil, err
				}
				moves = append(moves, m)
			}
		}
	}
	return moves, nil
}

// collect reads the messages on m.subject past the lowest ack floor of the
// durable consumers of s that read it; with none, nothing is owed.
func (m *move) collect(ctx context.Context, s jetstream.Stream) error {
	var floor uint64
	readers := 0
	lister := s.ListConsumers(ctx)
	for info := range lister.Info() {
		if info.Config.Durable == "" || !readsSubject(info.Config, m.subject) {
			continue
		}
		if readers == 0 || info.AckFloor.Stream < floor {
			floor = info.AckFloor.Stream
		}
		readers++
	}
	if err := lister.Err(); err != nil {
		return fmt.Errorf("stream %s: consumers: %w", m.from, err)
	}
	if readers == 0 {
		return nil
	}
	for seq := floor + 1; ; {
		msg, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(m.subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("stream %s: message after %d on %s: %w", m.from, seq, m.subject, err)
		}
		seq = msg.Sequence + 1
		if msg.Header.Get(jetstream.ScheduleHeader) != "" {
			m.schedules++
			continue
		}
		m.owed = append(m.owed, msg)
	}
}

func readsSubject(cfg jetstream.ConsumerConfig, subject string) bool {
	filters := cfg.FilterSubjects
	if cfg.FilterSubject != "" {
		filters = append(filters, cfg.FilterSubject)
	}
	if len(filters) == 0 {
		return true
	}
	return slices.ContainsFunc(filters, func(f string) bool { return SubjectWithin(subject, f) || SubjectWithin(f, subject) })
}

// carry publishes the owed messages to the stream that takes the subject
// now, then purges the subject from the stream that held it.
func (m move) carry(ctx context.Context, js jetstream.JetStream) (string, error) {
	for _, msg := range m.owed {
		out := nats.NewMsg(msg.Subject)
		out.Data = msg.Data
		for k, v := range msg.Header {
			if !strings.HasPrefix(k, "Nats-Expected") {
				out.Header[k] = v
			}
		}
		if _, err := js.PublishMsg(ctx, out, jetstream.WithExpectStream(m.to)); err != nil {
			return "", fmt.Errorf("move %s from %s to %s: message %d: %w", m.subject, m.from, m.to, msg.Sequence, err)
		}
	}
	s, err := js.Stream(ctx, m.from)
	if err != nil {
		return "", fmt.Errorf("stream %s: %w", m.from, err)
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSubject(m.subject)); err != nil {
		return "", fmt.Errorf("stream %s: purge %s: %w", m.from, m.subject, err)
	}
	line := fmt.Sprintf("%s moved from %s to %s: %d messages not acked yet published again there, the rest purged", m.subject, m.from, m.to, len(m.owed))
	if m.schedules > 0 {
		line += fmt.Sprintf("; %d schedules on it dropped (%s takes none)", m.schedules, m.to)
	}
	return line, nil
}
