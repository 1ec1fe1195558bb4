// Package storetest is the contract suite every store adapter passes: the
// same behaviour from SQLite and SQL Server.
package storetest

import (
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/store"
)

// Opener returns an empty store for one test; the adapter's test closes it.
type Opener func(t *testing.T) store.Store

// Run runs the whole contract suite against the stores open returns.
func Run(t *testing.T, open Opener) {
	t.Run("WebhookLog", func(t *testing.T) { testWebhookLog(t, open) })
	t.Run("JobReferences", func(t *testing.T) { testJobReferences(t, open) })
	t.Run("InTx", func(t *testing.T) { testInTx(t, open) })
	t.Run("Outbox", func(t *testing.T) { testOutbox(t, open) })
	t.Run("Appointments", func(t *testing.T) { testAppointments(t, open) })
	t.Run("Allocations", func(t *testing.T) { testAllocations(t, open) })
	t.Run("SiteForms", func(t *testing.T) { testSiteForms(t, open) })
	t.Run("Estimates", func(t *testing.T) { testEstimates(t, open) })
	t.Run("Contacts", func(t *testing.T) { testContacts(t, open) })
	t.Run("AISummaryQueue", func(t *testing.T) { testAISummaryQueue(t, open) })
	t.Run("Jobs", func(t *testing.T) { testJobs(t, open) })
	t.Run("IdentifyGuid", func(t *testing.T) { testIdentify(t, open) })
	t.Run("FirstSeen", func(t *testing.T) { testFirstSeen(t, open) })
	t.Run("ClientWIPTriggers", func(t *testing.T) { testClientWIPTriggers(t, open) })
	t.Run("TriageInvites", func(t *testing.T) { testTriageInvites(t, open) })
	t.Run("SyncQueue", func(t *testing.T) { testSyncQueue(t, open) })
	t.Run("SyncQueueDrains", func(t *testing.T) { testSyncQueueDrains(t, open) })
	t.Run("JobObjectsQueued", func(t *testing.T) { testJobObjectsQueued(t, open) })
	t.Run("StatusHistories", func(t *testing.T) { testStatusHistories(t, open) })
	t.Run("TriageInviteQueue", func(t *testing.T) { testTriageInviteQueue(t, open) })
	t.Run("TriageInviteArrivals", func(t *testing.T) { testTriageInviteArrivals(t, open) })
	t.Run("Makesafe", func(t *testing.T) { testMakesafe(t, open) })
	t.Run("SMSQueue", func(t *testing.T) { testSMSQueue(t, open) })
	t.Run("Optimo", func(t *testing.T) { testOptimo(t, open) })
	t.Run("Callers", func(t *testing.T) { testCallers(t, open) })
	t.Run("NewJobPath", func(t *testing.T) { testNewJobPath(t, open) })
	t.Run("EmailReceipts", func(t *testing.T) { testEmailReceipts(t, open) })
	t.Run("Coverage", func(t *testing.T) { testCoverage(t, open) })
	t.Run("Status", func(t *testing.T) { testStatus(t, open) })
	t.Run("Archive", func(t *testing.T) { testArchive(t, open) })
	t.Run("Resolutions", func(t *testing.T) { testResolutions(t, open) })
}
