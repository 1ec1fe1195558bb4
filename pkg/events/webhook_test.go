package events_test

import (
	"encoding/json"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/matryer/is"
)

func TestPayloadGUID(t *testing.T) {
	for _, tc := range []struct {
		name, raw, want string
	}{
		{"a GUID, lower-cased", `"0B6A3C52-3E0F-4A57-9A39-2F1D7C1E4B10"`, "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10"},
		{"a numeric reference as a string", `"2402073"`, ""},
		{"a numeric reference as a number", `2402073`, ""},
		{"a GUID in braces", `"{0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10}"`, ""},
		{"36 characters that are no GUID", `"0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4bzz"`, ""},
		{"null", `null`, ""},
		{"absent", ``, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			var raw json.RawMessage
			if tc.raw != "" {
				raw = json.RawMessage(tc.raw)
			}
			is.Equal(events.PayloadGUID(raw), tc.want) // only a GUID is one, canonical and lower-case
		})
	}
}

func TestWebhookMsgGeneration(t *testing.T) {
	for _, tc := range []struct {
		name, msgID string
		wantGen     int
		wantOK      bool
	}{
		{"ingest's first publish", events.WebhookMsgID(42, 0), 0, true},
		{"ingest's publish of a replay", events.WebhookMsgID(42, 3), 3, true},
		{"another row's id", events.WebhookMsgID(421, 0), 0, false},
		{"another row's replay", events.WebhookMsgID(4, 2), 0, false},
		{"no Nats-Msg-Id (the nats CLI)", "", 0, false},
		{"an id of someone else's", "replay-42", 0, false},
		{"a replay count that is no number", "ethPrimeWebhookLog:42:replayx", 0, false},
		{"a replay count of zero", "ethPrimeWebhookLog:42:replay0", 0, false},
		{"a replay count with a leading zero", "ethPrimeWebhookLog:42:replay07", 0, false},
		{"something after the id", "ethPrimeWebhookLog:42:x", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			gen, ok := events.WebhookMsgGeneration(tc.msgID, 42)
			is.Equal(ok, tc.wantOK)   // ingest's id for the row, or not
			is.Equal(gen, tc.wantGen) // the generation it was published under
		})
	}
}

func TestActionLabel(t *testing.T) {
	for _, tc := range []struct{ action, want string }{
		{"change-job-status", "change-job-status"},
		{"create-allocation", "create-allocation"},
		{"", "_none"},
		{"create-invoice", "_other"},      // a new action Prime may send one day
		{"made-up-1234", "_other"},        // or anything a sender makes up
		{"has space", "_other"},           // not a subject token either
		{"_none", "_other"},               // a sender cannot pose as a label
		{"Change-Job-Status", "_other"},   // actions are compared as sent
		{"change-job-status\n", "_other"}, // exactly
	} {
		t.Run(tc.want+" "+tc.action, func(t *testing.T) {
			is := is.New(t)
			is.Equal(events.ActionLabel(tc.action), tc.want) // the known actions, or a label of a few
		})
	}
}
