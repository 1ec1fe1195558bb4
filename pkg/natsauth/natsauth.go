// Package natsauth turns the roles of pkg/events into nats-server users and
// their permissions, so that each service's NATS user may do what the
// service does and nothing else: compose/nats/users.conf is Config's
// output, and the tests load it into a real nats-server.
package natsauth

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ethosbuilding/primeflow/pkg/events"
)

// Operators is the user of the operators' nats CLI and of the operators'
// step (primectl streams apply): every permission (making and changing
// the streams and consumers, replaying events, the micro services' stats,
// purging a stream when that is the fix), its replies on its own inbox
// prefix (events.InboxPrefix), and no one else's replies.
const Operators = "operators"

// OperatorsReadOnly is the operators' read-only user, for primectl status
// and a look at the streams: the streams' and consumers' info, who holds
// each lock and the Prime budget, the micro services' stats; no message of
// a stream, no change to anything.
const OperatorsReadOnly = "operators-readonly"

// Roles are the roles that get a user: every service's and the portals'.
func Roles() []events.Role {
	return append(slices.Clone(events.ServiceRoles), events.RolePortals)
}

// Users is every user Config writes: a role's each, then the operators'.
func Users() []string {
	var out []string
	for _, r := range Roles() {
		out = append(out, r.Name)
	}
	return append(out, Operators, OperatorsReadOnly)
}

// PasswordVar is the environment variable nats-server reads a user's
// password from: NATS_<USER>_PASSWORD, the user upper-cased with - as _.
func PasswordVar(user string) string {
	return "NATS_" + strings.ToUpper(strings.ReplaceAll(user, "-", "_")) + "_PASSWORD"
}

// Permissions are what a user may publish and subscribe to (Deny: what it
// may not subscribe to, of what Subscribe allows), and whether it may
// answer requests (micro services).
type Permissions struct {
	Publish, Subscribe, Deny []string
	Responses                bool
}

// The JetStream API subjects (nats-io/nats.go jetstream/api.go) a process
// uses.
const (
	jsAPI = "$JS.API."
	jsAck = "$JS.ACK."
	srv   = "$SRV."
)

// For is the permissions of r. A service's: its subjects; its streams'
// info, which it checks at start (never create, update, purge or delete:
// the operators' step makes them, events.Apply); its consumers' info and
// acks, and a pull consumer's next, a push consumer's deliver subject
// (never create: a consumer's maker chooses where a push consumer
// delivers); its requests; its locks' keys, read, written and
// watched (a subscription to the key: no consumer), and the Prime budget's
// key alike if it calls Prime, with the answers the others share, and its
// own to write for the calls it shares (events.Role.SharesAnswers); its
// micro services' endpoints and the $SRV discovery subjects;
// replies on its own inbox prefix. The portals', which are not a service:
// their subject, and their replies.
func For(r events.Role) (Permissions, error) {
	streams, err := r.Streams()
	if err != nil {
		return Permissions{}, err
	}
	var p Permissions
	pub := func(s ...string) { p.Publish = append(p.Publish, s...) }
	sub := func(s ...string) { p.Subscribe = append(p.Subscribe, s...) }
	pub(r.Publishes...)
	if _, service := events.RoleNamed(r.Name); service {
		for _, s := range streams {
			pub(jsAPI + "STREAM.INFO." + s)
		}
		if len(r.Publishes) > 0 {
			pub(jsAPI + "STREAM.NAMES") // an outbox sweep asks which stream takes a subject
		}
	}
	for _, c := range r.Consumes {
		sc := c.Stream + "." + c.Durable
		pub(jsAPI + "CONSUMER.INFO." + sc)
		if c.Push() {
			// Delivered where the consumer's definition says: no next
			// request, whose reply subject would say where (and an ack's
			// +NXT a push consumer refuses).
			sub(c.DeliverSubject)
		} else {
			pub(jsAPI + "CONSUMER.MSG.NEXT." + sc)
		}
		pub(jsAck + sc + ".>")
	}
	pub(r.Requests...)
	for _, k := range r.Locks {
		key := kvKey(events.BucketLocks, k)
		pub(key)
		pub(kvRead(events.StreamLocks))
		sub(key)
	}
	if r.CallsPrime {
		key := kvKey(events.BucketPrimeBudget, events.PrimeBudgetKey)
		pub(key)
		pub(kvRead(events.StreamPrimeBudget))
		sub(key)
		// A key a request, read and never watched: any role's answers read,
		// its own written, for the calls it shares alone.
		pub(kvRead(events.StreamPrimeAnswers))
		for _, endpoint := range r.SharesAnswers {
			pub(kvKey(events.BucketPrimeAnswers, events.PrimeAnswerKey(r.Name, endpoint, "*")))
		}
	}
	sub(r.InboxPrefix() + ".>")
	sub(r.Subscribes...)
	for _, e := range r.Serves {
		sub(e.Subject, srv+"*", srv+"*."+e.Service, srv+"*."+e.Service+".*")
		p.Responses = true
	}
	p.Publish, p.Subscribe = dedupe(p.Publish), dedupe(p.Subscribe)
	return p, nil
}

// ForOperators is the operators' permissions: anything, but another
// user's replies (nats.go's default inbox prefix included, which no user
// is given: an operators' nats CLI runs with --inbox-prefix).
func ForOperators() Permissions {
	p := Permissions{Publish: []string{">"}, Subscribe: []string{">"}, Deny: []string{"_INBOX.>"}}
	for _, u := range Users() {
		if u != Operators {
			p.Deny = append(p.Deny, events.InboxPrefix(u)+".>")
		}
	}
	return p
}

// ForOperatorsReadOnly is the read-only operators' permissions: what
// primectl status and `nats stream ls`, `stream info`, `consumer report`,
// `micro stats` read, and the locks' and the Prime budget's keys; replies
// on its own inbox prefix.
func ForOperatorsReadOnly() Permissions {
	var p Permissions
	p.Publish = []string{jsAPI + "INFO", jsAPI + "STREAM.NAMES", jsAPI + "STREAM.LIST", jsAPI + "STREAM.INFO.*",
		jsAPI + "CONSUMER.NAMES.*", jsAPI + "CONSUMER.LIST.*", jsAPI + "CONSUMER.INFO.*.*"}
	for _, stream := range []string{events.StreamLocks, events.StreamPrimeBudget} {
		p.Publish = append(p.Publish, jsAPI+"STREAM.MSG.GET."+stream)
	}
	for _, verb := range []string{"PING", "INFO", "STATS"} {
		p.Publish = append(p.Publish, srv+verb, srv+verb+".>")
	}
	p.Subscribe = []string{events.InboxPrefix(OperatorsReadOnly) + ".>"}
	return p
}

// kvKey is the subject of key k of a bucket: written by a publish to it,
// and watched by a subscription to it (pkg/events.WatchKey), which takes no
// consumer. No role may create a consumer on a bucket: nats-server does not
// check where a push consumer delivers against its maker's permissions, so
// a user that may make one on its key could have the server deliver the
// key's value, which it writes, to any subject.
func kvKey(bucket, k string) string { return "$KV." + bucket + "." + k }

// kvRead is what reading a key of stream's bucket takes: the leader's
// message get (a KV Get on a bucket without allow_direct), which names no
// key, so a role that may read one key may read any of the bucket. Never a
// direct get: its answer is the stored message itself, body and headers,
// published to the request's reply subject, which nats-server checks
// against no permission, so a role that may write a key and direct-get it
// writes any body onto any subject (issue 27's review: a forged Prime
// answer under job-mirror's key); no stream allows them (streams/). A
// message get's answer is JSON wrapping the message, with none of its
// headers: what it reflects, its readers refuse as not their own.
func kvRead(stream string) string { return jsAPI + "STREAM.MSG.GET." + stream }

func dedupe(s []string) []string {
	var out []string
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// Config is nats-server's authorization block: a user a role, with its
// permissions, and the operators' users. Each password is a variable
// nats-server reads from its environment (PasswordVar), so the file holds
// no secret.
func Config() (string, error) {
	var b strings.Builder
	b.WriteString("# Generated by pkg/natsauth from the roles of pkg/events: do not edit.\n")
	b.WriteString("# go test ./pkg/natsauth -run TestUsersConf -update writes it again.\n")
	b.WriteString("# One user a service, allowed what the service does and nothing else;\n")
	b.WriteString("# passwords from the environment variables named here (compose/.env).\n")
	b.WriteString("authorization {\n  users: [\n")
	for _, r := range Roles() {
		p, err := For(r)
		if err != nil {
			return "", err
		}
		user(&b, r.Name, "", p)
	}
	user(&b, Operators, "The operators' nats CLI and primectl streams apply: everything, but another user's replies.", ForOperators())
	user(&b, OperatorsReadOnly, "primectl status: the streams', consumers', locks' and Prime budget's state, and nothing else.", ForOperatorsReadOnly())
	b.WriteString("  ]\n}\n")
	return b.String(), nil
}

// user writes one user of the authorization block.
func user(b *strings.Builder, name, comment string, p Permissions) {
	if comment != "" {
		fmt.Fprintf(b, "    # %s\n", comment)
	}
	fmt.Fprintf(b, "    {\n      user: %q\n      password: $%s\n      permissions: {\n", name, PasswordVar(name))
	fmt.Fprintf(b, "        publish: { allow: %s }\n", list(p.Publish, 10))
	if len(p.Deny) > 0 {
		fmt.Fprintf(b, "        subscribe: { allow: %s, deny: %s }\n", list(p.Subscribe, 10), list(p.Deny, 10))
	} else {
		fmt.Fprintf(b, "        subscribe: { allow: %s }\n", list(p.Subscribe, 10))
	}
	if p.Responses {
		b.WriteString("        allow_responses: true\n")
	}
	b.WriteString("      }\n    }\n")
}

// list writes subjects as a nats-server array, one a line.
func list(subjects []string, indent int) string {
	pad := strings.Repeat(" ", indent)
	var b strings.Builder
	b.WriteString("[\n")
	for _, s := range subjects {
		fmt.Fprintf(&b, "%s  %q\n", pad, s)
	}
	b.WriteString(pad + "]")
	return b.String()
}
