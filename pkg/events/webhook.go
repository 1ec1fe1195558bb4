package events

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
)

// WebhookMsgID is the Nats-Msg-Id of a log row's message: derived from its id,
// so JetStream drops a second publish of the same row (the relay after a
// publish whose bookkeeping failed), and new for each replay of the row.
func WebhookMsgID(logID int64, replayCount int) string {
	if replayCount == 0 {
		return webhookMsgIDPrefix + strconv.FormatInt(logID, 10)
	}
	return fmt.Sprintf("%s%d%s%d", webhookMsgIDPrefix, logID, webhookMsgIDReplay, replayCount)
}

const (
	webhookMsgIDPrefix = "ethPrimeWebhookLog:"
	webhookMsgIDReplay = ":replay"
)

// WebhookMsgGeneration reads msgID as WebhookMsgID(logID, replayCount) made
// it: the replay count the row was published under, and ok when msgID is
// such an id for logID at all. A message published by hand (the nats CLI)
// has no Nats-Msg-Id, or one of its own, and is not ok.
func WebhookMsgGeneration(msgID string, logID int64) (replayCount int, ok bool) {
	rest, found := strings.CutPrefix(msgID, webhookMsgIDPrefix+strconv.FormatInt(logID, 10))
	if !found {
		return 0, false
	}
	if rest == "" {
		return 0, true
	}
	n, found := strings.CutPrefix(rest, webhookMsgIDReplay)
	if !found {
		return 0, false
	}
	replayCount, err := strconv.Atoi(n)
	if err != nil || replayCount <= 0 || strconv.Itoa(replayCount) != n {
		return 0, false
	}
	return replayCount, true
}

// NewWebhookMsg is the message for one stored webhook: the payload as
// received, the log id and eventAction in headers.
func NewWebhookMsg(logID int64, replayCount int, action, payload string) *nats.Msg {
	m := nats.NewMsg(WebhookSubject(action))
	m.Data = []byte(payload)
	m.Header.Set(nats.MsgIdHdr, WebhookMsgID(logID, replayCount))
	m.Header.Set(HeaderLogID, strconv.FormatInt(logID, 10))
	m.Header.Set(HeaderEventAction, action)
	return m
}

// ErrNoLogID: a message carries no valid Primeflow-Log-Id header.
var ErrNoLogID = errors.New("message has no valid " + HeaderLogID + " header")

// LogID reads the log row id a message is about.
func LogID(h nats.Header) (int64, error) {
	id, err := strconv.ParseInt(http.Header(h).Get(HeaderLogID), 10, 64)
	if err != nil || id <= 0 {
		return 0, ErrNoLogID
	}
	return id, nil
}

// IsGUID reports whether s is a GUID in its 36-character form, as Prime's
// ids are.
func IsGUID(s string) bool {
	_, err := uuid.Parse(s)
	return err == nil && len(s) == 36
}

// PayloadGUID is the lower-case canonical GUID a webhook payload property
// holds as a JSON string, or "" when it holds anything else: jobId carries a
// GUID or Prime's numeric reference (§4.1), and only a GUID is one.
func PayloadGUID(raw json.RawMessage) string {
	var s string
	if raw == nil || json.Unmarshal(raw, &s) != nil || !IsGUID(s) {
		return ""
	}
	return strings.ToLower(s)
}
