package store

import "errors"

// SendState is where a row of a send queue — smsQueue, ethTriageInviteQueue:
// something to send out of primeflow, and how its sending went — is in its
// life (package delivery sends them).
type SendState string

// The states of a send queue's rows.
const (
	// SendQueued waits to be sent, from its next attempt's time.
	SendQueued SendState = "Queued"
	// SendSending is claimed by a sender until its claim lapses.
	SendSending SendState = "Sending"
	// SendSent was accepted by the endpoint (a 2xx).
	SendSent SendState = "Sent"
	// SendLogged was written to the log or a dry run's records instead of
	// sent: no endpoint is configured (bin/primeflow on the Prime
	// simulator), or SEND_DRY_RUN. Done, never sent.
	SendLogged SendState = "Logged"
	// SendFailed gave up: it used up its attempts or was refused for good.
	// It stays for a person to look at, who requeues or dismisses it
	// (Resolutions).
	SendFailed SendState = "Failed"
	// SendDismissed was Failed, and a person closed it without sending it
	// (Resolutions): they dealt with it another way. Done, never sent; it
	// waits for nobody.
	SendDismissed SendState = "Dismissed"
)

// SendStates lists every state, for counting.
func SendStates() []SendState {
	return []SendState{SendQueued, SendSending, SendSent, SendLogged, SendFailed, SendDismissed}
}

// SendCounts is a count of a send queue's rows by state, every state in it
// at 0: what a count starts from, so that a state no row is in is served.
func SendCounts() map[SendState]int {
	out := map[SendState]int{}
	for _, st := range SendStates() {
		out[st] = 0
	}
	return out
}

// ErrClaimLost: an outcome or release of a send queue's row named a claim
// the row no longer holds (the claim lapsed and the row was claimed again,
// or failed on the lapse); nothing was written.
var ErrClaimLost = errors.New("claim no longer held")
