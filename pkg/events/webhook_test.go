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
