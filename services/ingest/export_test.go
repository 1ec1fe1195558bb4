package ingest

import "github.com/nats-io/nats.go/jetstream"

// WrapJetStream wraps the JetStream the publisher sends through, so a test
// can hold a publish; call it before Run.
func (in *Ingest) WrapJetStream(wrap func(jetstream.JetStream) jetstream.JetStream) {
	in.publisher.js = wrap(in.publisher.js)
}

// SetRelayPage sets how many rows the relay reads at a time, so a test can
// span pages with a few rows; call it before Run.
func (in *Ingest) SetRelayPage(n int) { in.relay.page = n }

// HeaderRoom is the room ingest leaves for a message's headers above the
// body limit.
const HeaderRoom = headerRoom
