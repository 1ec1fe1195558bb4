package events

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/nats-io/nats.go/jetstream"
)

// The durable consumers' names.
const (
	DurableResolver       = "resolver"
	DurableJobMirror      = "job-mirror"
	DurableChildMirror    = "child-mirror"
	DurableSyncDrain      = "child-mirror-sync"
	DurableNewJobPipeline = "newjob-pipeline"
	DurableMakesafe       = "makesafe"
	DurableMakesafeDetect = "makesafe-detect"
	DurableMakesafeSMS    = "makesafe-sms"
	DurableOptimoCreate   = "optimo-create"
	DurableOptimoPlan     = "optimo-plan"
)

// Consumer is a durable JetStream consumer: its stream, its name, the
// subjects it filters on and what the server holds it to; a pull consumer
// unless it names a DeliverSubject. It is the one
// definition of the consumer: the operators' step (Apply) creates it from
// this, and the service that reads it (pkg/consume) checks that the one it
// finds is this.
type Consumer struct {
	Stream   string
	Durable  string
	Subjects []string
	// AckWait is how long the server waits for an ack before it delivers a
	// message again (its reader heartbeats every third of it); zero is 30 s.
	AckWait time.Duration
	// MaxAckPending bounds the messages handed out and not yet acked; zero
	// is 1024.
	MaxAckPending int
	// DeliverSubject, when set, makes it a push consumer: the server
	// delivers its messages there, to the queue group DeliverGroup (one
	// instance of the reader each). Its reader chooses no reply subject
	// for them, as a pull request's reply is: a role that reads what it
	// writes (makesafe) gets a push consumer, or its user could have a
	// message it wrote, body and headers, delivered onto any subject
	// (nats-server checks no reply subject against permissions).
	DeliverSubject, DeliverGroup string
}

// Push reports whether c is a push consumer (it names a DeliverSubject).
func (c Consumer) Push() bool { return c.DeliverSubject != "" }

// Takes reports whether the consumer's subjects take the resolved events of
// action.
func (c Consumer) Takes(action string) bool {
	return slices.ContainsFunc(c.Subjects, func(f string) bool { return SubjectWithin(ResolvedSubject(action), f) })
}

// Every durable consumer.
var (
	// The resolver holds up to 16 messages a lane (RESOLVER_LANES, 64 by
	// default) waiting for their job's lane.
	ConsumerResolver       = Consumer{Stream: StreamWebhook, Durable: DurableResolver, Subjects: []string{SubjectWebhookAll}, AckWait: time.Minute, MaxAckPending: 1024}
	ConsumerJobMirror      = Consumer{Stream: StreamResolved, Durable: DurableJobMirror, Subjects: []string{ResolvedSubject(ActionChangeJobStatus)}}
	ConsumerChildMirror    = Consumer{Stream: StreamResolved, Durable: DurableChildMirror, Subjects: resolvedSubjects(childActions), AckWait: time.Minute}
	ConsumerSyncDrain      = Consumer{Stream: StreamJob, Durable: DurableSyncDrain, Subjects: []string{SubjectSyncQueued}, AckWait: time.Minute}
	ConsumerNewJobPipeline = Consumer{Stream: StreamJob, Durable: DurableNewJobPipeline, Subjects: []string{SubjectJobFirstSeen}}
	// The ladder's rungs, on the stream only makesafe writes (§6). Makesafe
	// writes them too (its schedules' bodies are its own), so it reads them
	// by push, where the operators' step chose (issue 27).
	ConsumerMakesafe = Consumer{Stream: StreamMakesafe, Durable: DurableMakesafe, Subjects: []string{SubjectMakesafeRecheck}, AckWait: time.Minute,
		DeliverSubject: SubjectMakesafeRecheckDeliver, DeliverGroup: DurableMakesafe}
	// The detection requests child-mirror and the new-job pipeline send.
	ConsumerMakesafeDetect = Consumer{Stream: StreamMakesafeDetect, Durable: DurableMakesafeDetect, Subjects: []string{SubjectMakesafeDetect}, AckWait: time.Minute}
	ConsumerMakesafeSMS    = Consumer{Stream: StreamSMS, Durable: DurableMakesafeSMS, Subjects: []string{SubjectSMSSend}}
	ConsumerOptimoCreate   = Consumer{Stream: StreamOptimo, Durable: DurableOptimoCreate, Subjects: []string{SubjectOptimoCreate}}
	ConsumerOptimoPlan     = Consumer{Stream: StreamOptimo, Durable: DurableOptimoPlan, Subjects: []string{SubjectOptimoPlan}}
)

// Consumers is every durable consumer, in the roles' order.
func Consumers() []Consumer {
	var out []Consumer
	for _, r := range ServiceRoles {
		out = append(out, r.Consumes...)
	}
	return out
}

// childActions are the events child-mirror handles (§5.2–§5.5).
var childActions = []string{ActionCreateAppointment, ActionCompleteAppointment,
	ActionChangeCustomFormStatus, ActionCreateEstimate, ActionCreateAllocation}

func resolvedSubjects(actions []string) []string {
	out := make([]string, len(actions))
	for i, a := range actions {
		out[i] = ResolvedSubject(a)
	}
	return out
}

// The keys of BucketLocks (§8.3, §10.10).
const (
	LockOptimoCreate = "optimo-create"
	LockOptimoPlan   = "optimo-plan"
)

// Endpoint is a NATS micro service a process answers: its name (`nats
// micro ls`) and its endpoint's subject.
type Endpoint struct {
	Service string
	Subject string
}

// Role is everything one process does on NATS, and so everything its NATS
// user may do: pkg/natsauth turns each role into nats-server permissions
// (compose/nats/users.conf), and a process connecting as a role checks
// the streams the role touches and its consumers before it starts (the
// operators' step, Apply, makes them). A new subject, consumer, endpoint
// or lock is added here, to the roles that use it, and nowhere else.
type Role struct {
	// Name is the process's NATS user and connection name.
	Name string
	// Publishes are the subjects it publishes on, to a stream (awaiting
	// JetStream's ack) or to core NATS. Its outbox sweeper publishes only
	// these (outbox.Publisher.Subjects).
	Publishes []string
	// Subscribes are core NATS subjects it subscribes to.
	Subscribes []string
	// Consumes are the durable consumers it reads (Apply creates them).
	Consumes []Consumer
	// Serves are the micro services it answers.
	Serves []Endpoint
	// Requests are the endpoints it asks.
	Requests []string
	// Locks are the keys of BucketLocks it takes.
	Locks []string
	// CallsPrime: it calls Prime, so it spends the deployment's budget in
	// BucketPrimeBudget (its one key, PrimeBudgetKey) and reads the answers
	// the others share in BucketPrimeAnswers.
	CallsPrime bool
	// SharesAnswers are the calls (pkg/prime's endpoints) whose answers it
	// shares in BucketPrimeAnswers, under its own name (PrimeAnswerKey):
	// those for the records it is already the authority for — the records
	// it mirrors, or hands the next stage as fetched (Resolved.Fetched) —
	// and no others. A process believes a shared answer only from a role
	// that shares that call (PrimeAnswerWriters), and NATS lets a role
	// write those keys alone (pkg/natsauth): a leaked user can pass off as
	// Prime's no record its role does not already write.
	SharesAnswers []string
}

// PrimeAnswerWriters are the roles whose shared answers to a call of
// endpoint (pkg/prime's) a process believes: those that share it.
func PrimeAnswerWriters(endpoint string) []Role {
	var out []Role
	for _, r := range ServiceRoles {
		if slices.Contains(r.SharesAnswers, endpoint) {
			out = append(out, r)
		}
	}
	return out
}

// PrimeAnswerKey is the key of BucketPrimeAnswers under which the role
// called writer keeps its answer to a call of endpoint whose request hashes
// to hash: its writer's name first, so that each role's user may write its
// own keys and no other's (a hash of "*" is the subject of them all).
func PrimeAnswerKey(writer, endpoint, hash string) string {
	return writer + "." + endpoint + "." + hash
}

// InboxPrefix is the prefix of the role's inboxes, where the replies to its
// requests and JetStream's answers arrive: its own, so its user may
// subscribe to its replies and no one else's.
func (r Role) InboxPrefix() string { return InboxPrefix(r.Name) }

// InboxPrefix is the inbox prefix of the NATS user called user: every
// user's replies arrive under a prefix of its own (pkg/natsauth lets it
// subscribe to that one only), the operators' and the portals' too.
func InboxPrefix(user string) string { return "_INBOX_" + user }

// SubjectDoneAll matches every DoneSubject.
const SubjectDoneAll = donePrefix + "*"

// Roles of the services and of those outside the pipeline that reach NATS.
var (
	RoleIngest = Role{Name: "ingest", Publishes: []string{SubjectWebhookAll}}
	// The resolver finishes the rows no stage takes (no handler, payload
	// faults) itself, so it announces their Done as the stages do.
	// It shares its answers for the records it identifies, which it hands
	// on in Resolved.Fetched.
	RoleResolver = Role{Name: "resolver", Consumes: []Consumer{ConsumerResolver},
		Publishes: []string{SubjectResolvedAll, SubjectDoneAll}, Subscribes: []string{SubjectDoneAll}, CallsPrime: true,
		SharesAnswers: []string{prime.EndpointJob, prime.EndpointAppointment, prime.EndpointAllocation}}
	// It shares its answers for the jobs, which it mirrors.
	RoleJobMirror = Role{Name: "job-mirror", Consumes: []Consumer{ConsumerJobMirror},
		Publishes: []string{SubjectDoneAll, SubjectJobFirstSeen, SubjectSyncQueued},
		Serves: []Endpoint{{"job-mirror", SubjectEnsureJobEvent}, {"job-mirror", SubjectEnsureJobSweep},
			{"job-mirror", SubjectEnsureJobDrain}, {"job-mirror", SubjectEnsureJobEmail}, {"job-mirror", SubjectSweepJobs}},
		CallsPrime: true, SharesAnswers: []string{prime.EndpointJob, prime.EndpointJobs}}
	// It shares its answers for the child records, which it mirrors; not
	// for a job, which is job-mirror's to mirror (§4.3), though it reads
	// one for its contacts.
	RoleChildMirror = Role{Name: "child-mirror", Consumes: []Consumer{ConsumerChildMirror, ConsumerSyncDrain},
		Publishes:  []string{SubjectDoneAll, SubjectOptimoCreate, SubjectMakesafeDetect},
		Serves:     []Endpoint{{"child-mirror", SubjectSweepAppointments}},
		Requests:   []string{SubjectEnsureJobEvent, SubjectEnsureJobSweep, SubjectEnsureJobDrain},
		CallsPrime: true,
		SharesAnswers: []string{prime.EndpointAppointment, prime.EndpointAppointments, prime.EndpointAllocation,
			prime.EndpointJobAllocations, prime.EndpointSiteForms, prime.EndpointEstimates, prime.EndpointContact,
			prime.EndpointContactRelationships, prime.EndpointStatusHistories}}
	RoleNewJobPipeline = Role{Name: "newjob-pipeline", Consumes: []Consumer{ConsumerNewJobPipeline},
		Publishes: []string{SubjectMakesafeDetect, SubjectSyncQueued}}
	// Only makesafe writes to MAKESAFE, the stream that takes schedules:
	// its rungs' schedules, and the re-checks its sweep fires (rungs.go).
	// It shares its answers for a job's allocations, in which it looks for
	// a Make Safe.
	RoleMakesafe = Role{Name: "makesafe", Consumes: []Consumer{ConsumerMakesafeDetect, ConsumerMakesafe, ConsumerMakesafeSMS},
		Publishes: []string{SubjectMakesafeScheduleAll, SubjectMakesafeRecheck}, CallsPrime: true,
		SharesAnswers: []string{prime.EndpointJobAllocations}}
	RoleOptimoCreate = Role{Name: "optimo-create", Consumes: []Consumer{ConsumerOptimoCreate},
		Publishes: []string{SubjectOptimoPlan}, Requests: []string{SubjectSweepAppointments},
		Locks: []string{LockOptimoCreate}}
	RoleOptimoPlan = Role{Name: "optimo-plan", Consumes: []Consumer{ConsumerOptimoPlan},
		Publishes: []string{SubjectSMSSend}, Locks: []string{LockOptimoPlan}}
	// The mail intake (§7) asks job-mirror to make sure of each emailed
	// job, on its own subject, which says to job-mirror that the email path
	// asks; it publishes nothing of its own.
	RoleMailIntake = Role{Name: "mail-intake", Requests: []string{SubjectEnsureJobEmail}}
	// RolePortals is the admin and customer portals, which ask for
	// planning after an order write (§10.7). Theirs is not our code: they
	// connect with their inbox prefix (nats.CustomInboxPrefix), where
	// JetStream's acks come, and may publish their one subject.
	RolePortals = Role{Name: "portals", Publishes: []string{SubjectOptimoPlan}}
)

// ServiceRoles are the services' roles, one a process of services/.
var ServiceRoles = []Role{RoleIngest, RoleResolver, RoleJobMirror, RoleChildMirror,
	RoleNewJobPipeline, RoleMakesafe, RoleOptimoCreate, RoleOptimoPlan, RoleMailIntake}

// RoleNamed is the service role called name.
func RoleNamed(name string) (Role, bool) {
	i := slices.IndexFunc(ServiceRoles, func(r Role) bool { return r.Name == name })
	if i < 0 {
		return Role{}, false
	}
	return ServiceRoles[i], true
}

// Streams are the streams of streams/ the role touches: those that take a
// subject it publishes, those it consumes from, the locks' bucket if it
// takes a lock, and the Prime budget's if it calls Prime. A process checks
// these at start-up (CheckRole), and its user may read their info, and no
// other stream's.
func (r Role) Streams() ([]string, error) {
	cfgs, err := StreamConfigs(0)
	if err != nil {
		return nil, err
	}
	var out []string
	add := func(name string) {
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	for _, subject := range r.Publishes {
		for _, c := range cfgs {
			if slices.ContainsFunc(c.Subjects, func(s string) bool { return SubjectWithin(subject, s) }) {
				add(c.Name)
			}
		}
	}
	for _, c := range r.Consumes {
		if !slices.ContainsFunc(cfgs, func(s jetstream.StreamConfig) bool { return s.Name == c.Stream }) {
			return nil, fmt.Errorf("role %s: consumer %s is on stream %s, which streams/ does not define", r.Name, c.Durable, c.Stream)
		}
		add(c.Stream)
	}
	if len(r.Locks) > 0 {
		add(StreamLocks)
	}
	if r.CallsPrime {
		add(StreamPrimeBudget)
		add(StreamPrimeAnswers)
	}
	slices.Sort(out)
	return out, nil
}

// StreamLocks is the stream that holds BucketLocks.
const StreamLocks = "KV_" + BucketLocks

// StreamPrimeBudget is the stream that holds BucketPrimeBudget.
const StreamPrimeBudget = "KV_" + BucketPrimeBudget

// StreamPrimeAnswers is the stream that holds BucketPrimeAnswers.
const StreamPrimeAnswers = "KV_" + BucketPrimeAnswers

// SubjectWithin reports whether every subject that subject matches (it may
// hold wildcards) is matched by filter too.
func SubjectWithin(subject, filter string) bool {
	s, f := strings.Split(subject, "."), strings.Split(filter, ".")
	for i, ft := range f {
		switch {
		case ft == ">":
			return len(s) > i
		case i >= len(s):
			return false
		case ft == "*":
			if s[i] == ">" {
				return false
			}
		case ft != s[i]:
			return false
		}
	}
	return len(s) == len(f)
}
