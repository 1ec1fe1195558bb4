package service_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/pkg/service"
	"github.com/matryer/is"
)

// A password NATS refuses is the configuration's: Connect gives up and
// names the variables, for a role that checks streams and for one that
// checks none (mail-intake), instead of waiting for ever for a server
// that will never let it in. The right password connects.
func TestARefusedNATSLoginStopsNamingTheVariables(t *testing.T) {
	ns := natstest.ServerWithUsers(t)
	natstest.ApplyAsOperators(t, ns)
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

// A service started before the operators' step waits, saying what NATS
// lacks and the command that makes it, and starts once it has run; it
// makes nothing itself (its user may not).
func TestAServiceWaitsForTheOperatorsStep(t *testing.T) {
	is := is.New(t)
	ns := natstest.ServerWithUsers(t)
	logs := &flowtest.Buffer{}
	role := events.RoleMakesafe
	done := make(chan error, 1)
	go func() {
		nc, _, err := service.Connect(context.Background(), service.NATS{URL: ns.ClientURL(), User: role.Name, Password: role.Name, Name: role.Name},
			slog.New(slog.NewTextHandler(logs, nil)))
		if err == nil {
			nc.Close()
		}
		done <- err
	}()
	flowtest.Eventually(t, "the wait logged", func() bool {
		return strings.Contains(logs.String(), "stream MAKESAFE_DETECT is missing") && strings.Contains(logs.String(), events.ApplyCommand)
	})
	select {
	case err := <-done:
		t.Fatalf("Connect returned before the streams were made: %v", err)
	default:
	}
	natstest.ApplyAsOperators(t, ns)
	is.NoErr(<-done)                                                                    // and it connects
	is.True(!strings.Contains(strings.ToLower(logs.String()), "permissions violation")) // having tried nothing it may not do
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

			err = service.CheckNATSURL(url) // what a binary checks before it binds or connects
			is.True(err != nil && strings.HasPrefix(err.Error(), "NATS_URL: "))
			is.True(!strings.Contains(err.Error(), "s3%cret") && !strings.Contains(err.Error(), "%cr")) // as Connect's, without the password
			is.True(strings.Contains(err.Error(), "127.0.0.1") && strings.Contains(err.Error(), "%25"))
		})
	}
	is := is.New(t)
	is.NoErr(service.CheckNATSURL("nats://a:1, 127.0.0.1:4222,tls://u:p%25w@b:4222")) // what nats.go reads
}
