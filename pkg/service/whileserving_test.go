package service_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/pkg/service"
	"github.com/matryer/is"
	"github.com/nats-io/nats.go/micro"
)

// The micro service answers while run runs — with a live context even
// after ctx ends, while run drains — and is stopped when run returns, whose
// error WhileServing returns; a service that cannot start runs nothing.
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
		return svc, svc.AddEndpoint("echo", micro.ContextHandler(ctx, func(ctx context.Context, r micro.Request) {
			r.Respond([]byte(fmt.Sprint(ctx.Err())))
		}), micro.WithEndpointSubject("test.echo"))
	}
	ctx, cancel := context.WithCancel(context.Background())
	boom := errors.New("consumer failed")
	err := service.WhileServing(ctx, slog.New(slog.DiscardHandler), serve, func(ctx context.Context) error {
		msg, err := nc.Request("test.echo", nil, 5*time.Second)
		is.NoErr(err)                       // answered while run runs
		is.Equal(string(msg.Data), "<nil>") // with a live context
		cancel()
		<-ctx.Done() // shutting down: run drains
		msg, err = nc.Request("test.echo", nil, 5*time.Second)
		is.NoErr(err)                       // still answered
		is.Equal(string(msg.Data), "<nil>") // and the handler's context still live
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
