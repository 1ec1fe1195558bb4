package ingest

import "github.com/nats-io/nats.go/jetstream"

// WrapJetStream wraps the JetStream the publisher sends through, so a test
// can hold a publish; call it before Run.
func (in *Ingest) WrapJetStream(wrap func(jetstream.JetStream) jetstream.JetStream) {
	in.publisher.js = wrap(in.publisher.js)
}
