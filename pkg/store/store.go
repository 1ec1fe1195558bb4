// Package store is primeflow's storage contract: the records it keeps and one
// interface a subject, each method the Go face of one of the spec's procs.
// Two adapters implement it: store/sqlite (the embedded default) and
// store/mssql (SQL Server, calling the procs in sql/mssql). The suite in
// store/storetest holds both to the same behaviour.
//
// Table and column names are the spec's in both adapters.
package store

import (
	"context"
	"errors"
)

// Store is everything primeflow persists.
type Store interface {
	WebhookLog
	JobReferences
	Identify
	Outbox
	Appointments
	Allocations
	SiteForms
	Estimates
	Contacts
	StatusHistories
	AISummaryQueue
	Jobs
	FirstSeens
	ClientWIPTriggers
	TriageInvites
	SyncQueue
	Makesafe
	SMSQueue
	Optimo
	WorkOrders
	Settings
	NewJobPath
	EmailReceipts
	Coverage
	Sweeps
	Status
	Archive
	Resolutions

	// InTx runs fn in one transaction: the writes fn makes through the Store
	// it is given commit together when fn returns nil, and not at all when it
	// returns an error. Inside fn use only the given Store. InTx on a Store
	// that is already in a transaction runs fn in that transaction.
	//
	// fn may run more than once: under group commit (the services' store,
	// package groupcommit) a transaction rolled back with its group runs
	// again on its own. So fn keeps nothing from a run rolled back — it
	// assigns its results, never appends them — and has no effect outside
	// the transaction: what must happen after the commit (a publish, a log
	// line, a counter) happens after InTx returns. outbox.Publisher.InTx
	// publishes the outbox messages fn wrote that way.
	InTx(ctx context.Context, fn func(Store) error) error

	// Ping checks that the database answers.
	Ping(ctx context.Context) error

	// Close releases the database.
	Close() error
}

// Errors the adapters return. Match them with errors.Is.
var (
	// ErrNotFound: the row asked for does not exist.
	ErrNotFound = errors.New("not found")
	// ErrReferenceConflict: a numeric job reference is already mapped to a
	// different job (§4.1: the relationship is immutable).
	ErrReferenceConflict = errors.New("numeric reference already mapped to another job")
	// ErrAlreadyProcessed: a failed attempt was not recorded on a row that
	// is processed (another run of its event finished it meanwhile).
	ErrAlreadyProcessed = errors.New("log row already processed")
)
