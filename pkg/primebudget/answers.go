package primebudget

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// maxAnswerBytes is the largest answer shared: the bucket takes messages of
// 1 MiB at most (streams/KV_prime_answers.json); a larger one is reused in
// its own process only.
const maxAnswerBytes = 1<<20 - 4<<10

// Answers shares Prime's recent answers between the processes of a
// deployment (prime.WithSharedAnswers): one key a request, in the KV
// bucket prime_answers, kept 10 minutes at most. The records hold
// customers' details as the mirror does; only the roles that call Prime may
// read the bucket.
type Answers struct {
	kv      jetstream.KeyValue
	nc      *nats.Conn
	timeout time.Duration
	log     *slog.Logger
}

// NewAnswers binds the bucket (streams/KV_prime_answers.json, applied by
// events.Apply, the operators' step). cfg.Timeout bounds each read and write.
func NewAnswers(ctx context.Context, js jetstream.JetStream, cfg Config, log *slog.Logger) (*Answers, error) {
	kv, err := bind(ctx, js, events.BucketPrimeAnswers, log)
	if err != nil {
		return nil, err
	}
	return &Answers{kv: kv, nc: js.Conn(), timeout: cfg.Timeout, log: log}, nil
}

// stored is an answer as the bucket holds it, under the request it
// answers (the bucket's key is the request's hash).
type stored struct {
	Request string       `json:"request"`
	Answer  prime.Answer `json:"answer"`
}

func answerKey(request string) string {
	sum := sha256.Sum256([]byte(request))
	return hex.EncodeToString(sum[:])
}

// Get implements prime.AnswerStore.
func (a *Answers) Get(ctx context.Context, request string) (prime.Answer, bool) {
	if !a.nc.IsConnected() {
		return prime.Answer{}, false
	}
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	e, err := a.kv.Get(ctx, answerKey(request))
	if err != nil {
		return prime.Answer{}, false
	}
	var s stored
	if err := json.Unmarshal(e.Value(), &s); err != nil || s.Request != request {
		return prime.Answer{}, false
	}
	return s.Answer, true
}

// Put implements prime.AnswerStore.
func (a *Answers) Put(ctx context.Context, request string, answer prime.Answer) {
	if !a.nc.IsConnected() {
		return
	}
	b, err := json.Marshal(stored{Request: request, Answer: answer})
	if err != nil || len(b) > maxAnswerBytes {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.timeout)
	defer cancel()
	if _, err := a.kv.Put(ctx, answerKey(request), b); err != nil {
		a.log.Debug("prime answer not shared", "err", err)
	}
}
