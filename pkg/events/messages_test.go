package events_test

import (
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/matryer/is"
)

// What a user can have the server publish on a run request's subject, by
// setting it as a request's reply subject (issue 27's review), is JSON the
// server made: none of it names a source, so none is a request.
func TestDecodeRunRequestRefusesTheServersAnswers(t *testing.T) {
	is := is.New(t)
	for _, body := range []string{
		`{"stream":"OPTIMO","seq":3}`,
		`{"stream":"OPTIMO","seq":3,"duplicate":true}`,
		`{"type":"io.nats.jetstream.api.v1.stream_msg_get_response","message":{"subject":"$KV.locks.optimo-plan","seq":2,"data":"e30=","time":"2026-12-02T00:00:00Z"}}`,
		`{"type":"io.nats.jetstream.api.v1.stream_info_response","config":{"name":"SMS"}}`,
		`{"error":{"code":503,"err_code":10039,"description":"jetstream not enabled"}}`,
		``, `not json`, `{}`,
	} {
		_, _, err := events.DecodeRunRequest([]byte(body))
		is.True(err != nil) // not a request
	}
	source, reason, err := events.DecodeRunRequest([]byte(`{"source":"AdminPortal","reason":"booking"}`))
	is.NoErr(err)
	is.Equal(source, "AdminPortal")
	is.Equal(reason, "booking")
}
