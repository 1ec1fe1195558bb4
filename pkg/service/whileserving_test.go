package service_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/pkg/service"
	"github.com/matryer/is"
	"github.com/nats-io/nats.go/micro"
)

// The micro service answers while run runs and is stopped when run
// returns, whose error WhileServing returns; a service that cannot start
// runs nothing.
func TestWhileServing(t *testing.T) {
	is := is.New(t)
	nc, _ := natstest.Connect(t, natstest.Server(t))
	var svc micro.Service
	serve := func(ctx context.Context) (micro.Service, error) {
		var err error
		svc, err = micro.AddService(nc, micro.Config{Name: "echo", Version: "1.0.0"})
		if err != nil {
			return nil, err
		}
		return svc, svc.AddEndpoint("echo", micro.HandlerFunc(func(r micro.Request) { r.Respond(r.Data()) }),
			micro.WithEndpointSubject("test.echo"))
	}
	boom := errors.New("consumer failed")
	err := service.WhileServing(context.Background(), slog.New(slog.DiscardHandler), serve, func(ctx context.Context) error {
		msg, err := nc.Request("test.echo", []byte("hi"), 5*time.Second)
		is.NoErr(err) // answered while run runs
		is.Equal(string(msg.Data), "hi")
		return boom
	})
	is.True(errors.Is(err, boom)) // run's error
	is.True(svc.Stopped())        // and the service stopped

	ran := false
	err = service.WhileServing(context.Background(), slog.New(slog.DiscardHandler),
		func(context.Context) (micro.Service, error) { return nil, boom },
		func(context.Context) error { ran = true; return nil })
	is.True(errors.Is(err, boom))
	is.True(!ran) // nothing runs without the service
}
