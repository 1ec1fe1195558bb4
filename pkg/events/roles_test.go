package events_test

import (
	"slices"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/matryer/is"
	"github.com/nats-io/nats.go/jetstream"
)

func TestSubjectWithin(t *testing.T) {
	for _, tc := range []struct {
		subject, filter string
		within          bool
	}{
		{"prime.webhook.change-job-status", "prime.webhook.>", true},
		{"prime.webhook.>", "prime.webhook.>", true},
		{"makesafe.schedule.>", "makesafe.>", true},
		{"primeflow.done.*", "primeflow.done.*", true},
		{"primeflow.done.42", "primeflow.done.*", true},
		{"prime.webhook", "prime.webhook.>", false},
		{"prime.webhook.>", "prime.webhook.*", false},
		{"prime.resolved.x", "prime.webhook.>", false},
		{"optimo.plan.requested", "optimo.create.requested", false},
		{"a.b.c", "a.*", false},
	} {
		t.Run(tc.subject+" in "+tc.filter, func(t *testing.T) {
			is := is.New(t)
			is.Equal(events.SubjectWithin(tc.subject, tc.filter), tc.within)
		})
	}
}

// Every stream of streams/ is some service's to check, every consumer is
// one service's, and every subject a service publishes lands in a stream
// or is core NATS that another service subscribes to.
func TestRolesCoverTheStreams(t *testing.T) {
	is := is.New(t)
	cfgs, err := events.StreamConfigs(0)
	is.NoErr(err)
	applied := map[string]bool{}
	durables := map[string]string{}
	for _, r := range events.ServiceRoles {
		streams, err := r.Streams()
		is.NoErr(err) // every consumer is on a stream of streams/
		for _, s := range streams {
			applied[s] = true
		}
		for _, c := range r.Consumes {
			other, dup := durables[c.Durable]
			is.True(!dup || other == r.Name) // a consumer belongs to one service
			durables[c.Durable] = r.Name
		}
		for _, p := range r.Publishes {
			inStream := slices.ContainsFunc(cfgs, func(c jetstream.StreamConfig) bool {
				return slices.ContainsFunc(c.Subjects, func(s string) bool { return events.SubjectWithin(p, s) })
			})
			subscribed := slices.ContainsFunc(events.ServiceRoles, func(o events.Role) bool { return slices.Contains(o.Subscribes, p) })
			is.True(inStream || subscribed) // every publish reaches someone
		}
	}
	for _, c := range cfgs {
		is.True(applied[c.Name]) // every stream is checked by a service that uses it
	}
}

// A stream that takes scheduled messages lets whoever may publish to it
// have the server publish any of its subjects, at any time, for ever (a
// schedule's target is checked against the stream's subjects, not against
// the publisher's permissions): only makesafe publishes to one (§6's
// ladder), and no one else's subject lands there.
func TestOnlyMakesafePublishesWhereSchedulesAre(t *testing.T) {
	cfgs, err := events.StreamConfigs(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfgs {
		if !c.AllowMsgSchedules {
			continue
		}
		for _, r := range append(slices.Clone(events.ServiceRoles), events.RolePortals) {
			for _, p := range r.Publishes {
				lands := slices.ContainsFunc(c.Subjects, func(s string) bool { return events.SubjectWithin(p, s) || events.SubjectWithin(s, p) })
				if lands && r.Name != events.RoleMakesafe.Name {
					t.Errorf("%s publishes %s to %s, which takes scheduled messages: only makesafe may", r.Name, p, c.Name)
				}
			}
		}
	}
}

// Every endpoint a service asks is one a service answers, and each of
// job-mirror's ensure-job subjects is asked by one role alone: the subject
// is what job-mirror believes of a request (who asks, by which path), so
// two roles on one subject could pass for each other.
func TestEachRequestSubjectIsOneRoles(t *testing.T) {
	is := is.New(t)
	askers := map[string][]string{}
	for _, r := range events.ServiceRoles {
		for _, s := range r.Requests {
			askers[s] = append(askers[s], r.Name)
			served := slices.ContainsFunc(events.ServiceRoles, func(o events.Role) bool {
				return slices.ContainsFunc(o.Serves, func(e events.Endpoint) bool { return e.Subject == s })
			})
			is.True(served) // someone answers it
		}
	}
	for _, s := range []string{events.SubjectEnsureJobEvent, events.SubjectEnsureJobSweep, events.SubjectEnsureJobDrain, events.SubjectEnsureJobEmail} {
		is.Equal(len(askers[s]), 1) // asked by one role
	}
	is.Equal(askers[events.SubjectEnsureJobEmail], []string{events.RoleMailIntake.Name}) // the email path is mail-intake's
	is.Equal(events.RoleMailIntake.Requests, []string{events.SubjectEnsureJobEmail})     // and mail-intake asks nothing else
	is.True(events.ConsumerChildMirror.Takes(events.ActionCreateAllocation))             // child-mirror's events
	is.True(!events.ConsumerChildMirror.Takes(events.ActionChangeJobStatus))             // not job-mirror's
}

// A role shares the answers of calls it makes: it calls Prime. And a job is
// believed from the roles that mirror it or hand it on, and no other.
func TestTheRolesThatShareAnswersCallPrime(t *testing.T) {
	is := is.New(t)
	for _, r := range events.ServiceRoles {
		if len(r.SharesAnswers) > 0 && !r.CallsPrime {
			t.Errorf("%s shares Prime's answers but does not call Prime", r.Name)
		}
	}
	var names []string
	for _, r := range events.PrimeAnswerWriters(prime.EndpointJob) {
		names = append(names, r.Name)
	}
	is.Equal(names, []string{events.RoleResolver.Name, events.RoleJobMirror.Name})
}
