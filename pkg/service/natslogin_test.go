package service_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/pkg/service"
	"github.com/matryer/is"
)

// A password NATS refuses is the configuration's: Connect gives up and
// names the variables, for a role that applies streams and for one that
// applies none (mail-intake), instead of waiting for ever for a server
// that will never let it in. The right password connects.
func TestARefusedNATSLoginStopsNamingTheVariables(t *testing.T) {
	ns := natstest.ServerWithUsers(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, role := range []events.Role{events.RoleResolver, events.RoleMailIntake} {
		t.Run(role.Name, func(t *testing.T) {
			is := is.New(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, _, err := service.Connect(ctx, service.NATS{URL: ns.ClientURL(), User: role.Name, Password: "wrong", Name: role.Name}, log)
			is.True(err != nil)                                     // refused
			is.True(ctx.Err() == nil)                               // before the deadline: it did not wait it out
			is.True(strings.Contains(err.Error(), "NATS_PASSWORD")) // naming the variable
			is.True(!strings.Contains(err.Error(), "wrong"))        // and never the password

			nc, _, err := service.Connect(ctx, service.NATS{URL: ns.ClientURL(), User: role.Name, Password: role.Name, Name: role.Name}, log)
			is.NoErr(err) // natstest's password is the role's name
			nc.Close()
		})
	}
}

// A NATS_URL nats.go cannot read — an unescaped % in its password — is
// refused without its password, or a piece of it, in the error (issue 27
// §8); so is each URL of a list.
func TestANATSURLItCannotReadIsNotEchoed(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, url := range []string{
		"nats://primeflow:s3%cret@127.0.0.1:4222",
		"nats://primeflow:ok@127.0.0.1:4222,nats://primeflow:s3%cret@127.0.0.1:4223",
		"primeflow:s3%cret@127.0.0.1:4222",
	} {
		t.Run(url, func(t *testing.T) {
			is := is.New(t)
			_, _, err := service.Connect(context.Background(), service.NATS{URL: url}, log)
			is.True(err != nil)                                 // refused
			is.True(!strings.Contains(err.Error(), "s3%cret"))  // without the password
			is.True(!strings.Contains(err.Error(), "%cr"))      // or the escape that gives it away
			is.True(strings.Contains(err.Error(), "127.0.0.1")) // naming the server
			is.True(strings.Contains(err.Error(), "%25"))       // and how to write a %
		})
	}
}
