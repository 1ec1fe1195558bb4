package sms

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/ethosbuilding/primeflow/pkg/delivery"
)

// Payload is the JSON body HTTPSender posts, the same on every attempt (the
// attempt goes in delivery.AttemptHeader). The existing SMS flow's shape
// was not available: this is the reading, kept in one place to correct.
type Payload struct {
	// ID is the smsQueue row; Reference is "primeflow-sms-<id>".
	ID        int64  `json:"id"`
	Reference string `json:"reference"`
	To        string `json:"to"`
	Message   string `json:"message"`
	Source    string `json:"source,omitempty"`
}

// HTTPSender posts each message as JSON to SMS_SEND_URL (delivery.Poster),
// with its Reference as the Idempotency-Key.
type HTTPSender struct{ p *delivery.Poster }

// NewHTTPSender makes a sender for cfg (SMS_SEND_*). hc nil is a client with
// cfg's timeout.
func NewHTTPSender(cfg delivery.HTTPConfig, hc *http.Client) (*HTTPSender, error) {
	p, err := delivery.NewPoster(cfg, Kind.Prefix, hc)
	if err != nil {
		return nil, fmt.Errorf("sms: %w", err)
	}
	return &HTTPSender{p: p}, nil
}

// Reference is the reference and idempotency key of a message.
func Reference(id int64) string { return "primeflow-sms-" + strconv.FormatInt(id, 10) }

// Send posts one message.
func (s *HTTPSender) Send(ctx context.Context, m Message) error {
	if strings.TrimSpace(m.To) == "" {
		return delivery.Permanent(fmt.Errorf("sms %d: no recipient", m.ID))
	}
	body, err := json.Marshal(Payload{ID: m.ID, Reference: Reference(m.ID), To: m.To, Message: m.Body, Source: m.Source})
	if err != nil {
		return delivery.Permanent(fmt.Errorf("sms %d: %w", m.ID, err))
	}
	if err := s.p.Post(ctx, Reference(m.ID), m.Attempt, body); err != nil {
		return fmt.Errorf("sms %d: %w", m.ID, err)
	}
	return nil
}
