package primebudget

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"slices"
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
// deployment (prime.WithSharedAnswers), in the KV bucket prime_answers,
// each kept 10 minutes at most. A process writes an answer under its role's
// name, and only for the calls its role shares (events.Role.SharesAnswers:
// those for the records the role is the authority for); it believes an
// answer only from a role that shares that call, and NATS lets each role
// write its own keys alone (pkg/natsauth). So a leaked user of a role that
// calls Prime passes off as Prime's no record its role does not already
// write: child-mirror's cannot have job-mirror mirror a job Prime does not
// say. The records hold customers' details as the mirror does; only the
// roles that call Prime may read the bucket.
type Answers struct {
	kv      jetstream.KeyValue
	nc      *nats.Conn
	timeout time.Duration
	log     *slog.Logger
	as      []events.Role
}

// NewAnswers binds the bucket (streams/KV_prime_answers.json, applied by
// events.Apply, the operators' step). as are the roles the process runs
// as: a service's own, or all those bin/primeflow runs; it writes an answer
// under the first that shares its call. cfg.Timeout bounds each read and
// write.
func NewAnswers(ctx context.Context, js jetstream.JetStream, cfg Config, log *slog.Logger, as ...events.Role) (*Answers, error) {
	kv, err := bind(ctx, js, events.BucketPrimeAnswers, log)
	if err != nil {
		return nil, err
	}
	return &Answers{kv: kv, nc: js.Conn(), timeout: cfg.Timeout, log: log, as: as}, nil
}

// stored is an answer as the bucket holds it, under the request it
// answers (the key holds the request's hash).
type stored struct {
	Request string       `json:"request"`
	Answer  prime.Answer `json:"answer"`
}

func answerHash(request string) string {
	sum := sha256.Sum256([]byte(request))
	return hex.EncodeToString(sum[:])
}

// Get implements prime.AnswerStore: the latest answer to request that a
// role sharing endpoint's answers stored, and none that says it was sent
// after now (prime.AnswerSkew).
func (a *Answers) Get(ctx context.Context, endpoint, request string) (prime.Answer, bool) {
	if !a.nc.IsConnected() {
		return prime.Answer{}, false
	}
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	hash := answerHash(request)
	var best prime.Answer
	found := false
	for _, w := range events.PrimeAnswerWriters(endpoint) {
		e, err := a.kv.Get(ctx, events.PrimeAnswerKey(w.Name, endpoint, hash))
		if err != nil {
			continue
		}
		var s stored
		if err := json.Unmarshal(e.Value(), &s); err != nil || s.Request != request || s.Answer.Sent.After(time.Now().Add(prime.AnswerSkew)) {
			continue
		}
		if !found || s.Answer.Sent.After(best.Sent) {
			best, found = s.Answer, true
		}
	}
	return best, found
}

// Put implements prime.AnswerStore: under the name of the process's first
// role that shares endpoint's answers; a process none of whose roles does
// keeps its answer to itself.
func (a *Answers) Put(ctx context.Context, endpoint, request string, answer prime.Answer) {
	i := slices.IndexFunc(a.as, func(r events.Role) bool { return slices.Contains(r.SharesAnswers, endpoint) })
	if i < 0 || !a.nc.IsConnected() {
		return
	}
	b, err := json.Marshal(stored{Request: request, Answer: answer})
	if err != nil || len(b) > maxAnswerBytes {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.timeout)
	defer cancel()
	if _, err := a.kv.Put(ctx, events.PrimeAnswerKey(a.as[i].Name, endpoint, answerHash(request)), b); err != nil {
		a.log.Debug("prime answer not shared", "err", err)
	}
}
