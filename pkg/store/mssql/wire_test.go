package mssql

// Every store method's requests, as go-mssqldb writes them, read back from
// the bytes (tdsserver_test.go, tdsdecode_test.go) and held against what
// SQL Server accepts: each length prefix agrees with what follows and the
// parameters end where the message does; each parameter names one of the
// procedure's parameters exactly as the script declares it, with a TYPE_INFO
// the server converts to the declared type; no required parameter is left
// out; and a statement uses no variable it does not declare. Each method
// runs twice: with every optional value left out (the NULLs) and with every
// one given.

import (
	"context"
	"database/sql/driver"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/migration"
)

const (
	wireJob   = "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10"
	wireOther = "7d3f8e21-9c4b-4d1e-8f6a-5b2c9e0a1d34"
	wireDate  = "2026-03-10"
)

// wireTime is in Melbourne's summer time: the adapter sends every time as
// UTC, which the wire check sees as an offset of 0.
var wireTime = time.Date(2026, 3, 10, 9, 30, 15, 250_000_000, time.FixedZone("AEDT", 11*60*60))

// wireDrive calls one store method; full gives every optional argument.
type wireDrive func(ctx context.Context, s *Store, full bool) error

// opt is v when full, the zero value otherwise.
func opt[T any](full bool, v T) T {
	if full {
		return v
	}
	var zero T
	return zero
}

// filled is v with, when full, every field still zero given a value its
// name calls for; over names the fields that need a value of their own.
func filled[T any](full bool, v T, over map[string]any) T {
	if !full {
		return v
	}
	rv := reflect.ValueOf(&v).Elem()
	for i := range rv.NumField() {
		f, name := rv.Field(i), rv.Type().Field(i).Name
		if !f.IsZero() {
			continue
		}
		if o, ok := over[name]; ok {
			f.Set(reflect.ValueOf(o))
			continue
		}
		switch f.Interface().(type) {
		case string:
			s := "x"
			if strings.HasSuffix(name, "ID") {
				s = wireOther
			}
			f.SetString(s)
		case time.Time:
			f.Set(reflect.ValueOf(wireTime))
		case int, int64:
			f.SetInt(7)
		case bool:
			f.SetBool(true)
		case []byte:
			f.SetBytes([]byte(`{"k":1}`))
		case map[string]string:
			f.Set(reflect.ValueOf(map[string]string{"Nats-Msg-Id": "m1"}))
		case []time.Duration:
			f.Set(reflect.ValueOf([]time.Duration{time.Hour}))
		}
	}
	return v
}

// wireDrives drives every method of store.Store but InTx, Ping and Close.
var wireDrives = map[string]wireDrive{
	// webhooklog.go, jobreference.go
	"InsertWebhookLog": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.InsertWebhookLog(ctx, filled(full, store.NewWebhookLogRow{Payload: "{}"}, map[string]any{"JobID": wireJob}))
		return err
	},
	"InsertWebhookLogs": func(ctx context.Context, s *Store, full bool) error {
		row := filled(full, store.NewWebhookLogRow{Payload: "{}"}, map[string]any{"JobID": wireJob})
		_, err := s.InsertWebhookLogs(ctx, []store.NewWebhookLogRow{row, row})
		return err
	},
	"GetWebhookLog": func(ctx context.Context, s *Store, full bool) error { _, err := s.GetWebhookLog(ctx, 1); return err },
	"GetWebhookLogUnprocessed": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.GetWebhookLogUnprocessed(ctx, opt(full, 50), opt(full, 5))
		return err
	},
	"GetWebhookLogUnpublished": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.GetWebhookLogUnpublished(ctx, opt(full, int64(3)), wireTime, 10)
		return err
	},
	"SetWebhookLogProcessed": func(ctx context.Context, s *Store, full bool) error {
		return s.SetWebhookLogProcessed(ctx, 1, opt(full, wireJob), opt(full, "Processed"))
	},
	"SetWebhookLogProcessedIfUnprocessed": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.SetWebhookLogProcessedIfUnprocessed(ctx, 1, opt(full, wireJob), opt(full, "Processed"))
		return err
	},
	"IncrementWebhookLogAttempt": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.IncrementWebhookLogAttempt(ctx, 1, opt(full, wireJob), opt(full, "boom"))
		return err
	},
	"SetWebhookLogPublished": func(ctx context.Context, s *Store, full bool) error {
		return s.SetWebhookLogPublished(ctx, []int64{1, 2}, wireTime)
	},
	"ResetWebhookLog": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.ResetWebhookLog(ctx, wireFilter(full))
		return err
	},
	"ListWebhookLog": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.ListWebhookLog(ctx, wireFilter(full))
		return err
	},
	"CountWebhookLog": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.CountWebhookLog(ctx, wireFilter(full))
		return err
	},
	"GetJobIDByReference": func(ctx context.Context, s *Store, full bool) error {
		_, _, err := s.GetJobIDByReference(ctx, 2402073)
		return err
	},
	"SaveJobReference": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.SaveJobReference(ctx, 2402073, wireJob)
		return err
	},
	// identify.go, outbox.go
	"IdentifyGuid": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.IdentifyGuid(ctx, wireJob, opt(full, store.TableJobs))
		return err
	},
	"InsertOutbox": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.InsertOutbox(ctx, []store.OutboxMessage{filled(full, store.OutboxMessage{Subject: "prime.webhook", Data: []byte("{}")},
			map[string]any{"ID": int64(0), "CreatedUTC": time.Time{}, "PublishedUTC": time.Time{}})})
		return err
	},
	"GetOutboxUnpublished": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.GetOutboxUnpublished(ctx, opt(full, int64(3)), wireTime, 10)
		return err
	},
	"SetOutboxPublished": func(ctx context.Context, s *Store, full bool) error {
		return s.SetOutboxPublished(ctx, []int64{1, 2}, wireTime)
	},
	"PurgeOutbox": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.PurgeOutbox(ctx, wireTime)
		return err
	},
	// child mirror
	"SaveAppointment": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.SaveAppointment(ctx, filled(full, store.Appointment{AppointmentID: wireJob}, map[string]any{"Attributes": "{}"}))
		return err
	},
	"GetAppointment": func(ctx context.Context, s *Store, full bool) error {
		_, _, err := s.GetAppointment(ctx, wireJob)
		return err
	},
	"SaveAllocation": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.SaveAllocation(ctx, filled(full, store.Allocation{AllocationID: wireJob}, map[string]any{"Attributes": "{}"}))
		return err
	},
	"GetAllocation": func(ctx context.Context, s *Store, full bool) error {
		_, _, err := s.GetAllocation(ctx, wireJob)
		return err
	},
	"ListJobAllocations": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.ListJobAllocations(ctx, wireJob)
		return err
	},
	"HasMakeSafeAllocation": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.HasMakeSafeAllocation(ctx, wireJob)
		return err
	},
	"ReplaceJobSiteForms": func(ctx context.Context, s *Store, full bool) error {
		return s.ReplaceJobSiteForms(ctx, wireJob, "job", []store.SiteForm{filled(full, store.SiteForm{SiteFormID: wireOther},
			map[string]any{"Attributes": "{}", "ObjectType": "job"})})
	},
	"GetSiteForm": func(ctx context.Context, s *Store, full bool) error {
		_, _, err := s.GetSiteForm(ctx, wireJob)
		return err
	},
	"ListJobSiteForms": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.ListJobSiteForms(ctx, wireJob)
		return err
	},
	"ReplaceJobEstimates": func(ctx context.Context, s *Store, full bool) error {
		return s.ReplaceJobEstimates(ctx, wireJob, []store.Estimate{filled(full, store.Estimate{EstimateID: wireOther},
			map[string]any{"Attributes": "{}", "Total": "700.80"})})
	},
	"ListJobEstimates": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.ListJobEstimates(ctx, wireJob)
		return err
	},
	"SaveContact": func(ctx context.Context, s *Store, full bool) error {
		return s.SaveContact(ctx, filled(full, store.Contact{ContactID: wireJob}, map[string]any{"Attributes": "{}"}))
	},
	"GetContact": func(ctx context.Context, s *Store, full bool) error {
		_, _, err := s.GetContact(ctx, wireJob)
		return err
	},
	"ReplaceJobContactRelationships": func(ctx context.Context, s *Store, full bool) error {
		return s.ReplaceJobContactRelationships(ctx, wireJob, []store.ContactRelationship{filled(full,
			store.ContactRelationship{ContactRelationshipID: wireOther}, map[string]any{"Attributes": "{}"})})
	},
	"ListJobContactRelationships": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.ListJobContactRelationships(ctx, wireJob)
		return err
	},
	"ReplaceJobStatusHistory": func(ctx context.Context, s *Store, full bool) error {
		return s.ReplaceJobStatusHistory(ctx, wireJob, []store.JobStatusHistory{filled(full,
			store.JobStatusHistory{StatusHistoryID: wireOther}, map[string]any{"Attributes": "{}"})})
	},
	"ListJobStatusHistory": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.ListJobStatusHistory(ctx, wireJob)
		return err
	},
	"QueueJobSummaryNow": func(ctx context.Context, s *Store, full bool) error { return s.QueueJobSummaryNow(ctx, wireJob) },
	"GetJobSummaryQueue": func(ctx context.Context, s *Store, full bool) error {
		_, _, err := s.GetJobSummaryQueue(ctx, wireJob)
		return err
	},
	// jobs
	"UpsertJob": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.UpsertJob(ctx, filled(full, store.Job{JobID: wireJob}, map[string]any{"Attributes": "{}", "SyncedUTC": time.Time{}}))
		return err
	},
	"GetJob": func(ctx context.Context, s *Store, full bool) error { _, _, err := s.GetJob(ctx, wireJob); return err },
	"ClaimFirstSeen": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.ClaimFirstSeen(ctx, wireJob, opt(full, int64(5)), opt(full, "webhook"))
		return err
	},
	"GetFirstSeen": func(ctx context.Context, s *Store, full bool) error {
		_, _, err := s.GetFirstSeen(ctx, wireJob)
		return err
	},
	"CompleteFirstSeen": func(ctx context.Context, s *Store, full bool) error {
		return s.CompleteFirstSeen(ctx, wireJob, opt(full, "Completed"))
	},
	"FailFirstSeen": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.FailFirstSeen(ctx, wireJob, opt(full, "boom"))
		return err
	},
	"ListFirstSeen": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.ListFirstSeen(ctx, opt(full, store.FirstSeenFailed), opt(full, 10))
		return err
	},
	"QueueClientWIPStatusChange": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.QueueClientWIPStatusChange(ctx, wireJob, store.ClientWIPSource(42))
		return err
	},
	"ListClientWIPTriggers": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.ListClientWIPTriggers(ctx, wireJob)
		return err
	},
	"QueueTriageInvite": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.QueueTriageInvite(ctx, wireJob, wireOther)
		return err
	},
	"ListTriageInvites": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.ListTriageInvites(ctx, wireJob)
		return err
	},
	"ListTriageInviteQueue": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.ListTriageInviteQueue(ctx, opt(full, store.InvitesFailed), opt(full, 10))
		return err
	},
	"ClaimTriageInvites": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.ClaimTriageInvites(ctx, wireTime, time.Minute, 5, 10)
		return err
	},
	"GetTriageInvite": func(ctx context.Context, s *Store, full bool) error { _, err := s.GetTriageInvite(ctx, 1); return err },
	"SetTriageInviteSent": func(ctx context.Context, s *Store, full bool) error {
		return s.SetTriageInviteSent(ctx, 1, 1, wireTime)
	},
	"SetTriageInviteLogged": func(ctx context.Context, s *Store, full bool) error {
		return s.SetTriageInviteLogged(ctx, 1, 1, wireTime)
	},
	"SetTriageInviteFailed": func(ctx context.Context, s *Store, full bool) error {
		return s.SetTriageInviteFailed(ctx, 1, 1, opt(full, "boom"), opt(full, wireTime), wireTime)
	},
	"ReleaseTriageInvite": func(ctx context.Context, s *Store, full bool) error {
		return s.ReleaseTriageInvite(ctx, 1, 1, wireTime)
	},
	"DeferTriageInvite": func(ctx context.Context, s *Store, full bool) error {
		return s.DeferTriageInvite(ctx, 1, 1, opt(full, "waiting for the primary contact"), opt(full, wireTime), wireTime)
	},
	"SetTriageInvitePayload": func(ctx context.Context, s *Store, full bool) error {
		return s.SetTriageInvitePayload(ctx, 1, 1, opt(full, `{"id":1}`))
	},
	"CountTriageInvites": func(ctx context.Context, s *Store, full bool) error { _, err := s.CountTriageInvites(ctx); return err },
	"NextTriageInviteDue": func(ctx context.Context, s *Store, full bool) error {
		_, _, err := s.NextTriageInviteDue(ctx)
		return err
	},
	"OldestTriageInviteWaiting": func(ctx context.Context, s *Store, full bool) error {
		_, _, err := s.OldestTriageInviteWaiting(ctx)
		return err
	},
	// sync queue
	"QueueMissingObjectsByJob": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.QueueMissingObjectsByJob(ctx, wireJob)
		return err
	},
	"UpsertSyncQueue": func(ctx context.Context, s *Store, full bool) error {
		return s.UpsertSyncQueue(ctx, "Allocations", wireJob)
	},
	"DeleteSyncQueue": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.DeleteSyncQueue(ctx, "Allocations", wireJob)
		return err
	},
	"ListSyncQueue": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.ListSyncQueue(ctx, filled(full, store.SyncQueueFilter{}, map[string]any{"Object": "Allocations", "JobID": wireJob}))
		return err
	},
	"ClaimSyncQueue": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.ClaimSyncQueue(ctx, filled(full, store.SyncQueueFilter{}, map[string]any{"Object": "Allocations", "JobID": wireJob}), wireTime)
		return err
	},
	"ReleaseSyncQueue": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.ReleaseSyncQueue(ctx, filled(full, store.SyncQueueItem{ID: 1}, map[string]any{"Object": "Allocations", "JobID": wireJob}))
		return err
	},
	"DeleteClaimedSyncQueue": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.DeleteClaimedSyncQueue(ctx, filled(full, store.SyncQueueItem{ID: 1}, map[string]any{"Object": "Allocations", "JobID": wireJob}))
		return err
	},
	"SyncQueueStats": func(ctx context.Context, s *Store, full bool) error { _, err := s.SyncQueueStats(ctx); return err },
	"GetJobObjectsQueued": func(ctx context.Context, s *Store, full bool) error {
		_, _, err := s.GetJobObjectsQueued(ctx, wireJob)
		return err
	},
	"SetJobObjectsQueued": func(ctx context.Context, s *Store, full bool) error {
		// A job Prime gives no version is recorded at version 0 by its
		// updatedAt; the zero updatedAt goes as year 1, never NULL.
		return s.SetJobObjectsQueued(ctx, wireJob, filled(full, store.JobVersion{}, map[string]any{"Version": int64(3), "UpdatedAt": wireTime}))
	},
	"RecordBackstopSeen": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.RecordBackstopSeen(ctx, []string{wireJob, wireOther}, wireTime)
		return err
	},
	// make-safe, SMS
	"UpsertMakeSafePhoneCallFromJob": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.UpsertMakeSafePhoneCallFromJob(ctx, filled(full, store.MakesafeDetection{JobID: wireJob, Now: wireTime},
			map[string]any{"SMSRecipient": "+61400000000"}))
		return err
	},
	"GetMakesafePhoneCall": func(ctx context.Context, s *Store, full bool) error {
		_, _, err := s.GetMakesafePhoneCall(ctx, wireJob)
		return err
	},
	"ListMakesafeChecks": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.ListMakesafeChecks(ctx, wireJob)
		return err
	},
	"ListDueMakesafeChecks": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.ListDueMakesafeChecks(ctx, wireTime, 10)
		return err
	},
	"SetMakesafeCheckFired": func(ctx context.Context, s *Store, full bool) error {
		return s.SetMakesafeCheckFired(ctx, wireJob, 1, opt(full, "fired"), wireTime)
	},
	"QueueSMS": func(ctx context.Context, s *Store, full bool) error {
		_, _, err := s.QueueSMS(ctx, filled(full, store.NewSMS{Recipient: "+61400000000", Body: "hello", Now: wireTime}, nil))
		return err
	},
	"ClaimSMS": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.ClaimSMS(ctx, wireTime, time.Minute, 5, 10)
		return err
	},
	"GetSMS":       func(ctx context.Context, s *Store, full bool) error { _, err := s.GetSMS(ctx, 1); return err },
	"SetSMSSent":   func(ctx context.Context, s *Store, full bool) error { return s.SetSMSSent(ctx, 1, 1, wireTime) },
	"SetSMSLogged": func(ctx context.Context, s *Store, full bool) error { return s.SetSMSLogged(ctx, 1, 1, wireTime) },
	"SetSMSFailed": func(ctx context.Context, s *Store, full bool) error {
		return s.SetSMSFailed(ctx, 1, 1, opt(full, "boom"), opt(full, wireTime), wireTime)
	},
	"ReleaseSMS": func(ctx context.Context, s *Store, full bool) error { return s.ReleaseSMS(ctx, 1, 1, wireTime) },
	"DeferSMS": func(ctx context.Context, s *Store, full bool) error {
		return s.DeferSMS(ctx, 1, 1, opt(full, "HTTP 503"), opt(full, wireTime), wireTime)
	},
	"CountSMS":   func(ctx context.Context, s *Store, full bool) error { _, err := s.CountSMS(ctx); return err },
	"NextSMSDue": func(ctx context.Context, s *Store, full bool) error { _, _, err := s.NextSMSDue(ctx); return err },
	"OldestSMSWaiting": func(ctx context.Context, s *Store, full bool) error {
		_, _, err := s.OldestSMSWaiting(ctx)
		return err
	},
	"GetSetting": func(ctx context.Context, s *Store, full bool) error {
		_, _, err := s.GetSetting(ctx, store.SettingMakesafeSMSRecipient)
		return err
	},
	"SetSetting": func(ctx context.Context, s *Store, full bool) error {
		return s.SetSetting(ctx, store.SettingMakesafeSMSRecipient, opt(full, "+61400000000"))
	},
	// OptimoRoute, work orders
	"GetAppointmentQueue": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.GetAppointmentQueue(ctx, wireTime, opt(full, wireJob), 50)
		return err
	},
	"GetWorkOrderQueue": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.GetWorkOrderQueue(ctx, opt(full, wireJob), 50)
		return err
	},
	"UpsertOrder": func(ctx context.Context, s *Store, full bool) error {
		return s.UpsertOrder(ctx, wireOrder(full))
	},
	"RecordOrderFailure": func(ctx context.Context, s *Store, full bool) error {
		return s.RecordOrderFailure(ctx, wireOrder(full))
	},
	"GetOrder": func(ctx context.Context, s *Store, full bool) error {
		_, _, err := s.GetOrder(ctx, wireJob)
		return err
	},
	"PlanUpsert":   func(ctx context.Context, s *Store, full bool) error { return s.PlanUpsert(ctx, wireDate) },
	"GetPlanQueue": func(ctx context.Context, s *Store, full bool) error { _, err := s.GetPlanQueue(ctx); return err },
	"SetPlanStatus": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.SetPlanStatus(ctx, filled(full, store.PlanStatusWrite{PlanDate: wireDate, Status: store.PlanPlanning},
			map[string]any{"OnlyIfStatus": store.PlanNotPlanned}))
		return err
	},
	"GetPlan": func(ctx context.Context, s *Store, full bool) error {
		_, _, err := s.GetPlan(ctx, wireDate)
		return err
	},
	"GetPlanningQueue": func(ctx context.Context, s *Store, full bool) error { _, err := s.GetPlanningQueue(ctx); return err },
	"GetRoutesRefreshQueue": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.GetRoutesRefreshQueue(ctx)
		return err
	},
	"SaveRoutes": func(ctx context.Context, s *Store, full bool) error {
		return s.SaveRoutes(ctx, wireDate, []store.OrderSchedule{filled(full, store.OrderSchedule{OrderNo: wireJob}, nil)}, wireTime)
	},
	"GetOrderRefreshQueue": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.GetOrderRefreshQueue(ctx, 10)
		return err
	},
	"SetOrderRefreshed": func(ctx context.Context, s *Store, full bool) error {
		return s.SetOrderRefreshed(ctx, wireJob, full, opt(full, "opt-1"), wireTime)
	},
	"SaveWorkOrder": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.SaveWorkOrder(ctx, filled(full, store.WorkOrder{WorkOrderID: wireOther}, map[string]any{"Attributes": "{}", "SyncedUTC": time.Time{}}))
		return err
	},
	// new-job path, email intake, coverage, status
	"ProcessNewPrimeJob": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.ProcessNewPrimeJob(ctx, wireJob, opt(full, int64(5)), "webhook",
			filled(full, store.OutboxMessage{Subject: "prime.job.new", Data: []byte("{}")},
				map[string]any{"ID": int64(0), "Header": map[string]string(nil), "CreatedUTC": time.Time{}, "PublishedUTC": time.Time{}}))
		return err
	},
	"RegisterEmail": func(ctx context.Context, s *Store, full bool) error {
		_, _, err := s.RegisterEmail(ctx, wireReceipt(full))
		return err
	},
	"GetEmailReceipt": func(ctx context.Context, s *Store, full bool) error {
		_, _, err := s.GetEmailReceipt(ctx, "<m1@example.com>")
		return err
	},
	"UpdateEmailReceipt": func(ctx context.Context, s *Store, full bool) error {
		r := wireReceipt(full)
		r.ID = 1
		return s.UpdateEmailReceipt(ctx, r)
	},
	"ListJobCoverage": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.ListJobCoverage(ctx, wireTime)
		return err
	},
	"CountEmailReceipts": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.CountEmailReceipts(ctx, wireTime)
		return err
	},
	"WebhookActionCoverage": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.WebhookActionCoverage(ctx, wireTime)
		return err
	},
	"GetSweepWatermark": func(ctx context.Context, s *Store, full bool) error {
		_, _, err := s.GetSweepWatermark(ctx, "jobs")
		return err
	},
	"SetSweepWatermark": func(ctx context.Context, s *Store, full bool) error {
		return s.SetSweepWatermark(ctx, "jobs", wireTime)
	},
	"StatusOverview": func(ctx context.Context, s *Store, full bool) error {
		_, err := s.StatusOverview(ctx, store.OverviewQuery{SyncQueuedSince: opt(full, wireTime)})
		return err
	},
}

func wireFilter(full bool) store.LogFilter {
	return filled(full, store.LogFilter{}, map[string]any{"IDs": []int64{1, 2}, "Action": "create-appointment",
		"JobID": wireJob, "State": store.Capped, "Limit": 5, "Newest": false})
}

func wireOrder(full bool) store.OptimoOrder {
	return filled(full, store.OptimoOrder{OrderNo: wireJob, State: store.OrderActive}, map[string]any{
		"AppointmentID": wireJob, "OrderDate": wireDate, "TimeFrom": "09:00", "TimeTo": "11:00",
		"RoutesUTC": time.Time{}, "RefreshedUTC": time.Time{}, "CreatedUTC": time.Time{}, "UpdatedUTC": time.Time{}})
}

func wireReceipt(full bool) store.EmailReceipt {
	return filled(full, store.EmailReceipt{InternetMessageID: "<m1@example.com>", ReceivedUTC: wireTime}, map[string]any{
		"ID": int64(0), "JobID": wireJob, "PrimeJobID": wireJob, "JobIDKind": "guid", "RegisteredUTC": time.Time{}, "UpdatedUTC": time.Time{}})
}

func TestEveryCallIsWellFormedOnTheWire(t *testing.T) {
	srv := startTDSServer(t)
	s := &Store{db: srv.db(t)}
	ctx := context.Background()
	mods := modules(t, loaded(t))
	types := tableTypes(t)

	var want []string
	for i := range reflect.TypeFor[store.Store]().NumMethod() {
		if m := reflect.TypeFor[store.Store]().Method(i).Name; !slices.Contains([]string{"InTx", "Ping", "Close"}, m) {
			want = append(want, m)
		}
	}
	var have []string
	for m := range wireDrives {
		have = append(have, m)
	}
	slices.Sort(have)
	if !slices.Equal(have, want) {
		t.Errorf("the drives are not store.Store's methods: want %v, have %v", want, have)
	}

	called := map[string]bool{}
	for _, method := range have {
		for _, full := range []bool{false, true} {
			name := method + "/nulls"
			if full {
				name = method + "/full"
			}
			t.Run(name, func(t *testing.T) {
				err := wireDrives[method](ctx, s, full)
				msgs := srv.take()
				n := 0
				for _, m := range msgs {
					if m.kind == tdsTransMgr {
						continue
					}
					n++
					for _, p := range checkWire(t, m, mods, types, called) {
						t.Error(p)
					}
				}
				if n == 0 {
					t.Errorf("%s sent nothing to the database (it returned %v): the drive must reach it", method, err)
				}
			})
		}
	}

	// Every procedure the adapter names went over the wire.
	for _, proc := range adapterProcs(t) {
		if !called[proc] {
			t.Errorf("no drive called %s", proc)
		}
	}
}

// tableTypes are the table types the scripts create, by their names as
// written.
func tableTypes(t *testing.T) map[string]bool {
	t.Helper()
	objs, err := migration.Objects(plainScripts(loaded(t)))
	if err != nil {
		t.Fatalf("read the scripts: %v", err)
	}
	out := map[string]bool{}
	for _, o := range objs {
		if o.Kind == migration.TableType {
			out["dbo."+o.Name] = true
		}
	}
	return out
}

// adapterProcs are the procedures the adapter's source names.
func adapterProcs(t *testing.T) []string {
	t.Helper()
	files, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		if !strings.HasSuffix(f.Name(), ".go") || strings.HasSuffix(f.Name(), "_test.go") {
			continue
		}
		b, err := os.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`"dbo\.(sp\w+)"`).FindAllStringSubmatch(string(b), -1) {
			seen[m[1]] = true
		}
	}
	return slices.Sorted(func(yield func(string) bool) {
		for p := range seen {
			if !yield(p) {
				return
			}
		}
	})
}

// checkWire decodes one request and lists what SQL Server would refuse in
// it; called collects the procedures it calls.
func checkWire(t *testing.T, m tdsMessage, mods map[string]module, types map[string]bool, called map[string]bool) []string {
	t.Helper()
	switch m.kind {
	case tdsSQLBatch:
		text, err := decodeBatch(m.data)
		if err != nil {
			return []string{"SQL batch: " + err.Error()}
		}
		return undeclared(text, nil)
	case tdsRPC:
	default:
		return []string{fmt.Sprintf("a request of packet type 0x%02x", m.kind)}
	}
	rpc, err := decodeRPC(m.data)
	if err != nil {
		return []string{err.Error()}
	}
	var probs []string
	var snt sent
	if rpc.proc == "sp_executesql" {
		if len(rpc.params) < 2 {
			return []string{"sp_executesql without its statement and declarations"}
		}
		stmt, decls := rpc.params[0], rpc.params[1]
		for _, p := range []wireParam{stmt, decls} {
			if p.name != "" || p.ti.id != tNVarChar || p.null {
				probs = append(probs, fmt.Sprintf("sp_executesql: %s where @stmt and @params belong", p))
			}
		}
		var declared []string
		for _, d := range splitTop(decls.text()) {
			if f := strings.Fields(d); len(f) > 0 {
				declared = append(declared, f[0])
			}
		}
		var sentNames []string
		for i, p := range rpc.params[2:] {
			sentNames = append(sentNames, p.name)
			snt.args = append(snt.args, driver.NamedValue{Ordinal: i + 1, Value: p})
		}
		if !slices.Equal(declared, sentNames) {
			probs = append(probs, fmt.Sprintf("sp_executesql declares %v and sends %v", declared, sentNames))
		}
		snt.query = stmt.text()
		probs = append(probs, undeclared(snt.query, declared)...)
	} else {
		if !strings.HasPrefix(rpc.proc, "dbo.") {
			probs = append(probs, fmt.Sprintf("%s: a procedure named without its schema dbo.", rpc.proc))
		}
		snt.query = rpc.proc
		for i, p := range rpc.params {
			if !strings.HasPrefix(p.name, "@") {
				return append(probs, fmt.Sprintf("%s: parameter %d (%q) without a name", rpc.proc, i+1, p.name))
			}
			snt.args = append(snt.args, driver.NamedValue{Name: p.name[1:], Ordinal: i + 1, Value: p})
		}
	}
	if len(probs) > 0 {
		return probs
	}
	for _, c := range calls(t, []sent{snt}) {
		called[c.proc] = true
		probs = append(probs, checkWireCall(c, mods, types)...)
	}
	return probs
}

// checkWireCall holds one procedure call against the procedure's
// declaration, names compared exactly (a case-sensitive instance compares
// them so).
func checkWireCall(c call, mods map[string]module, types map[string]bool) []string {
	m, ok := mods[c.proc]
	if !ok || m.kind != "PROCEDURE" {
		return []string{fmt.Sprintf("%s is not a procedure of the scripts (names compared exactly)", c.proc)}
	}
	var probs []string
	given := map[string]bool{}
	for name, v := range c.args {
		w := v.(wireParam)
		given[name] = true
		i := slices.IndexFunc(m.params, func(p procParam) bool { return p.name == name })
		if i < 0 {
			probs = append(probs, fmt.Sprintf("%s: @%s is not one of its parameters (names compared exactly)", c.proc, name))
			continue
		}
		if why := wireFits(m.params[i], w, types); why != "" {
			probs = append(probs, fmt.Sprintf("%s: @%s %s gets %s: %s", c.proc, name, m.params[i].typ, w, why))
		}
	}
	for _, p := range m.params {
		if !given[p.name] && !p.optional() {
			probs = append(probs, fmt.Sprintf("%s: the required @%s is left out", c.proc, p.name))
		}
	}
	slices.Sort(probs)
	return probs
}

// wireFits says why a parameter on the wire does not suit its declared
// type: "" when it does. A NULL of a character or binary type suits a
// UNIQUEIDENTIFIER (the server converts it); every other value must be of
// the declared type's family, fit its range or length, and a DATETIME2 or
// DATE get a DATETIMEOFFSET only at offset 0 (the server keeps the clock
// reading and drops the offset).
func wireFits(p procParam, w wireParam, types map[string]bool) string {
	if w.status != 0 {
		return fmt.Sprintf("status flags 0x%02x: the adapter sends input parameters only", w.status)
	}
	if w.ti.id == tNull {
		return "an untyped NULL (NULLTYPE 0x1F), whose type some servers refuse"
	}
	typ, size := p.typ, ""
	if i := strings.Index(typ, "("); i >= 0 {
		typ, size = typ[:i], strings.Trim(typ[i:], "()")
	}
	id := w.ti.id
	in := func(ids ...byte) bool { return slices.Contains(ids, id) }
	switch typ {
	case "UNIQUEIDENTIFIER":
		switch {
		case id == tGUID:
		case w.null && in(tNVarChar, tNChar, tVarChar, tChar, tVarBinary, tBinary):
		default:
			return "want a GUIDN, or a NULL of a type the server converts"
		}
	case "NVARCHAR", "SYSNAME":
		if !in(tNVarChar, tNChar) {
			return "want NVARCHAR"
		}
		if typ == "SYSNAME" {
			size = "128"
		}
		if n, err := strconv.Atoi(size); err == nil && !w.null && len(w.value)/2 > n {
			return fmt.Sprintf("%d characters, which the server cuts to %d", len(w.value)/2, n)
		}
	case "TINYINT", "SMALLINT", "INT", "BIGINT":
		if !in(tIntN, tInt1, tInt2, tInt4, tInt8) {
			return "want an integer type"
		}
		if w.null {
			break
		}
		var v int64
		switch len(w.value) {
		case 1:
			v = int64(w.value[0])
		case 2:
			v = int64(int16(binary.LittleEndian.Uint16(w.value)))
		case 4:
			v = int64(int32(binary.LittleEndian.Uint32(w.value)))
		case 8:
			v = int64(binary.LittleEndian.Uint64(w.value))
		}
		r := intRange[typ]
		if v < r[0] || v > r[1] {
			return fmt.Sprintf("%d, out of the type's range", v)
		}
	case "BIT":
		if !in(tBitN, tBit) {
			return "want BIT"
		}
	case "DATETIME2", "DATE", "DATETIMEOFFSET":
		if !in(tDTO, tDateTime2, tDate, tDateTimeN, tDateTime) {
			return "want a date and time type"
		}
		if id == tDTO && !w.null && typ != "DATETIMEOFFSET" {
			if off := int16(binary.LittleEndian.Uint16(w.value[len(w.value)-2:])); off != 0 {
				return fmt.Sprintf("an offset of %d minutes, which the server drops, keeping the clock reading", off)
			}
		}
		if typ == "DATE" && id == tDTO && !w.null {
			return "a time where a DATE belongs (the server drops the time of day)"
		}
	default:
		if !p.readonly {
			return "a declared type this check does not know: teach wireFits it"
		}
		if id != tTVP {
			return "want a TVP"
		}
		if !types[w.ti.tvpName] || !strings.EqualFold(w.ti.tvpName, p.typ) {
			return fmt.Sprintf("the table type %s, not the declared one as the scripts name it", w.ti.tvpName)
		}
	}
	return ""
}

var intRange = map[string][2]int64{"TINYINT": {0, math.MaxUint8}, "SMALLINT": {math.MinInt16, math.MaxInt16},
	"INT": {math.MinInt32, math.MaxInt32}, "BIGINT": {math.MinInt64, math.MaxInt64}}

// undeclared lists the variables a statement uses and neither declares
// itself nor has in params: SQL Server answers "Must declare the scalar
// variable". An EXEC's parameter names (@Name = …) are not variables.
func undeclared(stmt string, params []string) []string {
	c := code(stmt)
	have := map[string]bool{}
	for _, p := range params {
		have[p] = true
	}
	for _, m := range regexp.MustCompile(`(?i)\bDECLARE\s+(@\w+)`).FindAllStringSubmatch(c, -1) {
		have[m[1]] = true
	}
	c = regexp.MustCompile(`@@\w+`).ReplaceAllString(c, "")
	execArgs := regexp.MustCompile(`(?is)\bEXEC(UTE)?\s+[\w.\[\]]+\s+[^;]*`)
	c = execArgs.ReplaceAllStringFunc(c, func(s string) string {
		return regexp.MustCompile(`@\w+\s*=`).ReplaceAllString(s, "=")
	})
	var out []string
	for _, v := range regexp.MustCompile(`@\w+`).FindAllString(c, -1) {
		if !have[v] {
			out = append(out, fmt.Sprintf("the statement uses %s, which it does not declare (Must declare the scalar variable %q): %.120s", v, v, stmt))
			have[v] = true
		}
	}
	return out
}
