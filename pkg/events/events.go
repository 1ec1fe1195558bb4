// Package events defines, once, the JetStream streams, subjects, headers and
// message types that the primeflow services use to talk to each other, and
// the webhook actions and record types those messages name (actions.go).
// Nothing else in the project spells a subject, stream name or action as a
// literal.
package events

import (
	"strconv"
)

// Stream names. Their definitions are the JSON files in streams/.
const (
	StreamWebhook  = "PRIME_WEBHOOK"
	StreamResolved = "PRIME_RESOLVED"
	StreamJob      = "PRIME_JOB"
	// StreamMakesafe holds the make-safe ladder: the rungs' schedules and
	// the re-checks they deliver. Only makesafe writes to it, and it alone
	// takes scheduled messages (makesafe.go).
	StreamMakesafe = "MAKESAFE"
	// StreamMakesafeDetect holds the detection requests of the services
	// that ask makesafe for one; it takes no schedule.
	StreamMakesafeDetect = "MAKESAFE_DETECT"
	StreamOptimo         = "OPTIMO"
	StreamSMS            = "SMS"
)

// BucketLocks is the KV bucket that holds the planning locks (stream KV_locks).
const BucketLocks = "locks"

// BucketPrimeBudget is the KV bucket that holds the deployment's Prime
// budget (stream KV_prime_budget, pkg/primebudget), under its one key
// PrimeBudgetKey.
const (
	BucketPrimeBudget = "prime_budget"
	PrimeBudgetKey    = "account"
)

// BucketPrimeAnswers is the KV bucket that holds Prime's recent answers,
// shared by the processes that call Prime (stream KV_prime_answers,
// pkg/primebudget.Answers).
const BucketPrimeAnswers = "prime_answers"

// Subjects.
const (
	// SubjectWebhookAll matches every raw webhook event.
	SubjectWebhookAll = "prime.webhook.>"
	// SubjectResolvedAll matches every resolved event.
	SubjectResolvedAll = "prime.resolved.>"
	// SubjectJobFirstSeen asks the new-job pipeline (§6) to run for a job.
	SubjectJobFirstSeen = "prime.job.firstseen"
	// SubjectSyncQueued says a job's objects were queued in ethSyncQueue
	// (§6 step 1): the drains sync them from Prime now.
	SubjectSyncQueued = "prime.job.syncqueued"
	// SubjectMakesafeDetect asks for make-safe detection of a job (§5.5, §6).
	SubjectMakesafeDetect = "makesafe.detect"
	// SubjectMakesafeRecheck is where scheduled re-checks of the ladder land
	// (on StreamMakesafe, which only makesafe writes).
	SubjectMakesafeRecheck = "makesafe.recheck"
	// SubjectMakesafeRecheckDeliver is where the server delivers the
	// re-checks to makesafe (ConsumerMakesafe, a push consumer): a subject
	// no stream takes, which only makesafe's user may subscribe to.
	SubjectMakesafeRecheckDeliver = "makesafe.deliver.recheck"
	// SubjectOptimoCreate asks optimo-create to turn queued appointments into orders.
	SubjectOptimoCreate = "optimo.create.requested"
	// SubjectOptimoPlan asks optimo-plan to plan every NotPlanned date. The
	// portals publish it too.
	SubjectOptimoPlan = "optimo.plan.requested"
	// SubjectSMSSend asks for the queued SMS messages to be sent now.
	SubjectSMSSend = "sms.send.requested"
)

const (
	webhookPrefix  = "prime.webhook."
	resolvedPrefix = "prime.resolved."
	donePrefix     = "primeflow.done."
)

// Headers.
const (
	// HeaderLogID names the ethPrimeWebhookLog row a message is about.
	HeaderLogID = "Primeflow-Log-Id"
	// HeaderEventAction carries the eventAction as stored, which the subject
	// token may not (see ActionToken).
	HeaderEventAction = "Primeflow-Event-Action"
)

// ActionNone and ActionInvalid are the subject tokens for an event whose
// eventAction is missing or cannot be a subject token.
const (
	ActionNone    = "_none"
	ActionInvalid = "_invalid"
)

// maxTokenLen is the longest eventAction used as a subject token.
const maxTokenLen = 100

// ActionToken is the subject token for an eventAction: the action itself when
// it is a plain token (1 to 100 of A-Z, a-z, 0-9, _ and -), otherwise
// ActionNone or ActionInvalid, so that every event is published on a defined
// subject.
func ActionToken(action string) string {
	switch {
	case action == "":
		return ActionNone
	case isToken(action) && action != ActionNone && action != ActionInvalid:
		return action
	default:
		return ActionInvalid
	}
}

// isToken reports whether s is 1 to maxTokenLen of A-Z, a-z, 0-9, _ and -.
func isToken(s string) bool {
	if len(s) == 0 || len(s) > maxTokenLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// WebhookSubject is the subject a raw event of this eventAction is published on.
func WebhookSubject(action string) string { return webhookPrefix + ActionToken(action) }

// ResolvedSubject is the subject a resolved event of this eventAction is published on.
func ResolvedSubject(action string) string { return resolvedPrefix + ActionToken(action) }

// DoneSubject is the core NATS subject on which the stage that finishes
// processing a log row announces it.
func DoneSubject(logID int64) string { return donePrefix + strconv.FormatInt(logID, 10) }
