package events

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ethosbuilding/primeflow/streams"
)

// FuzzStreamFile feeds stream files to the loader: a file it accepts
// defines the stream it is named after, with NATS_STREAM_REPLICAS's
// replicas when that is above zero, and writes back as JSON; a file it
// refuses is named in the error.
func FuzzStreamFile(f *testing.F) {
	names, err := streams.FS.ReadDir(".")
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range names {
		if b, err := streams.FS.ReadFile(e.Name()); err == nil && strings.HasSuffix(e.Name(), ".json") {
			f.Add(e.Name(), b, 3)
		}
	}
	f.Add("X.json", []byte(`{"name":"Y"}`), 0)
	f.Add("X.json", []byte(`{"name":"X","max_age":"1h","num_replicas":-1}`), -2)
	f.Add("X.json", []byte(`{"name":"X","retention":"sometimes"}`), 1)
	f.Fuzz(func(t *testing.T, name string, b []byte, replicas int) {
		cfg, err := streamConfig(name, b, replicas)
		if err != nil {
			if !strings.Contains(err.Error(), "streams/"+name) {
				t.Fatalf("an error that does not name the file %s: %v", name, err)
			}
			return
		}
		if cfg.Name != strings.TrimSuffix(name, ".json") {
			t.Fatalf("%s defines %q", name, cfg.Name)
		}
		if replicas > 0 && cfg.Replicas != replicas {
			t.Fatalf("replicas %d: the stream has %d", replicas, cfg.Replicas)
		}
		out, err := json.Marshal(cfg)
		if err != nil {
			t.Fatalf("%s: accepted, but not written back: %v", name, err)
		}
		var again jetstream.StreamConfig
		if err := json.Unmarshal(out, &again); err != nil || again.Name != cfg.Name {
			t.Fatalf("%s written back as %s, which reads as %q: %v", name, out, again.Name, err)
		}
	})
}

// FuzzWebhookHeaders: the headers of a webhook's message read as they were
// written. A Nats-Msg-Id that WebhookMsgGeneration accepts is the one
// WebhookMsgID makes for that row and replay; a Primeflow-Log-Id is a
// positive id written in digits; a payload GUID is the property's own
// text, canonical and in lower case.
func FuzzWebhookHeaders(f *testing.F) {
	for _, seed := range []struct {
		msgID string
		logID int64
		hdr   string
		guid  string
	}{
		{"ethPrimeWebhookLog:12", 12, "12", `"0f8e3c1a-5b7d-4e2f-9a6c-1d3e5f7a9b01"`},
		{"ethPrimeWebhookLog:12:replay3", 12, "+12", `"0F8E3C1A-5B7D-4E2F-9A6C-1D3E5F7A9B01"`},
		{"ethPrimeWebhookLog:123", 12, "-1", `"{0f8e3c1a-5b7d-4e2f-9a6c-1d3e5f7a9b01}"`},
		{"ethPrimeWebhookLog:12:replay03", 12, "012", `"urn:uuid:0f8e3c1a-5b7d-4e2f-9a6c-1d3e5f7a9b01"`},
		{"ethPrimeWebhookLog:12:replay0", 12, "9223372036854775808", `259047`},
		{"resolved:1:2:3:4", 1, "", `null`},
	} {
		f.Add(seed.msgID, seed.logID, seed.hdr, []byte(seed.guid))
	}
	f.Fuzz(func(t *testing.T, msgID string, logID int64, hdr string, raw []byte) {
		if n, ok := WebhookMsgGeneration(msgID, logID); ok && WebhookMsgID(logID, n) != msgID {
			t.Fatalf("%q read as row %d, replay %d, which is %q", msgID, logID, n, WebhookMsgID(logID, n))
		}
		h := nats.Header{}
		h.Set(HeaderLogID, hdr)
		if id, err := LogID(h); err == nil && (id <= 0 || strings.TrimLeft(strings.TrimPrefix(hdr, "+"), "0") != strconv.FormatInt(id, 10)) {
			t.Fatalf("header %q read as row %d", hdr, id)
		}
		if id := PayloadGUID(raw); id != "" {
			var s string
			if json.Unmarshal(raw, &s) != nil || strings.ToLower(s) != id {
				t.Fatalf("%s read as the GUID %s", raw, id)
			}
		}
	})
}
