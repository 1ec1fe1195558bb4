package events

import (
	"fmt"
	"slices"
	"strings"

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
	DurableMakesafeSMS    = "makesafe-sms"
	DurableOptimoCreate   = "optimo-create"
	DurableOptimoPlan     = "optimo-plan"
)

// Consumer is a durable JetStream consumer: its stream, its name and the
// subjects it filters on.
type Consumer struct {
	Stream   string
	Durable  string
	Subjects []string
}

// Takes reports whether the consumer's subjects take the resolved events of
// action.
func (c Consumer) Takes(action string) bool {
	return slices.ContainsFunc(c.Subjects, func(f string) bool { return SubjectWithin(ResolvedSubject(action), f) })
}

// Every durable consumer.
var (
	ConsumerResolver       = Consumer{StreamWebhook, DurableResolver, []string{SubjectWebhookAll}}
	ConsumerJobMirror      = Consumer{StreamResolved, DurableJobMirror, []string{ResolvedSubject(ActionChangeJobStatus)}}
	ConsumerChildMirror    = Consumer{StreamResolved, DurableChildMirror, resolvedSubjects(childActions)}
	ConsumerSyncDrain      = Consumer{StreamJob, DurableSyncDrain, []string{SubjectSyncQueued}}
	ConsumerNewJobPipeline = Consumer{StreamJob, DurableNewJobPipeline, []string{SubjectJobFirstSeen}}
	ConsumerMakesafe       = Consumer{StreamMakesafe, DurableMakesafe, []string{SubjectMakesafeDetect, SubjectMakesafeRecheck}}
	ConsumerMakesafeSMS    = Consumer{StreamSMS, DurableMakesafeSMS, []string{SubjectSMSSend}}
	ConsumerOptimoCreate   = Consumer{StreamOptimo, DurableOptimoCreate, []string{SubjectOptimoCreate}}
	ConsumerOptimoPlan     = Consumer{StreamOptimo, DurableOptimoPlan, []string{SubjectOptimoPlan}}
)

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
// (compose/nats/users.conf), and a process connecting as a role applies
// only the streams the role touches. A new subject, consumer, endpoint or
// lock is added here, to the roles that use it, and nowhere else.
type Role struct {
	// Name is the process's NATS user and connection name.
	Name string
	// Publishes are the subjects it publishes on, to a stream (awaiting
	// JetStream's ack) or to core NATS. Its outbox sweeper publishes only
	// these (outbox.Publisher.Subjects).
	Publishes []string
	// Subscribes are core NATS subjects it subscribes to.
	Subscribes []string
	// Consumes are the durable consumers it creates and reads.
	Consumes []Consumer
	// Serves are the micro services it answers.
	Serves []Endpoint
	// Requests are the endpoints it asks.
	Requests []string
	// Locks are the keys of BucketLocks it takes.
	Locks []string
	// CallsPrime: it calls Prime, so it spends the deployment's budget in
	// BucketPrimeBudget (its one key, PrimeBudgetKey) and shares Prime's
	// answers in BucketPrimeAnswers.
	CallsPrime bool
}

// InboxPrefix is the prefix of the role's inboxes, where the replies to its
// requests and JetStream's answers arrive: its own, so its user may
// subscribe to its replies and no one else's.
func (r Role) InboxPrefix() string { return "_INBOX_" + r.Name }

// SubjectDoneAll matches every DoneSubject.
const SubjectDoneAll = donePrefix + "*"

// Roles of the services and of those outside the pipeline that reach NATS.
var (
	RoleIngest = Role{Name: "ingest", Publishes: []string{SubjectWebhookAll}}
	// The resolver finishes the rows no stage takes (no handler, payload
	// faults) itself, so it announces their Done as the stages do.
	RoleResolver = Role{Name: "resolver", Consumes: []Consumer{ConsumerResolver},
		Publishes: []string{SubjectResolvedAll, SubjectDoneAll}, Subscribes: []string{SubjectDoneAll}, CallsPrime: true}
	RoleJobMirror = Role{Name: "job-mirror", Consumes: []Consumer{ConsumerJobMirror},
		Publishes: []string{SubjectDoneAll, SubjectJobFirstSeen, SubjectSyncQueued},
		Serves: []Endpoint{{"job-mirror", SubjectEnsureJobEvent}, {"job-mirror", SubjectEnsureJobSweep},
			{"job-mirror", SubjectEnsureJobDrain}, {"job-mirror", SubjectEnsureJobEmail}, {"job-mirror", SubjectSweepJobs}},
		CallsPrime: true}
	RoleChildMirror = Role{Name: "child-mirror", Consumes: []Consumer{ConsumerChildMirror, ConsumerSyncDrain},
		Publishes:  []string{SubjectDoneAll, SubjectOptimoCreate, SubjectMakesafeDetect},
		Serves:     []Endpoint{{"child-mirror", SubjectSweepAppointments}},
		Requests:   []string{SubjectEnsureJobEvent, SubjectEnsureJobSweep, SubjectEnsureJobDrain},
		CallsPrime: true}
	RoleNewJobPipeline = Role{Name: "newjob-pipeline", Consumes: []Consumer{ConsumerNewJobPipeline},
		Publishes: []string{SubjectMakesafeDetect, SubjectSyncQueued}}
	RoleMakesafe = Role{Name: "makesafe", Consumes: []Consumer{ConsumerMakesafe, ConsumerMakesafeSMS},
		Publishes: []string{SubjectMakesafeScheduleAll}, CallsPrime: true}
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
	// planning after an order write (§10.7). Theirs is not our code: their
	// JetStream acks come to nats.go's default inbox.
	RolePortals = Role{Name: "portals", Publishes: []string{SubjectOptimoPlan}, Subscribes: []string{"_INBOX.>"}}
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
// takes a lock, and the Prime budget's if it calls Prime. A process applies
// these at start-up, and only these.
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
