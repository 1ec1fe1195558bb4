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

// A NATS_URL nats.go cannot read as it is meant — an unescaped %, /, # or ?
// in its password — is refused without its password, or a piece of it, in
// the error (issue 27 §8, and its review: a / or # quoted the password's
// start as an "invalid port", and a password starting with digits parsed,
// as the port of a host named after the user); so is each URL of a list.
func TestANATSURLItCannotReadIsNotEchoed(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		url, how string
		secret   []string // pieces of the password none of the errors may hold
	}{
		{"nats://primeflow:s3%cret@127.0.0.1:4222", "%25", []string{"s3%cret", "%cr"}},
		{"nats://primeflow:ok@127.0.0.1:4222,nats://primeflow:s3%cret@127.0.0.1:4223", "%25", []string{"s3%cret", "%cr", ":ok"}},
		{"primeflow:s3%cret@127.0.0.1:4222", "%25", []string{"s3%cret", "%cr"}},
		{"nats://primeflow:s3cr/et@127.0.0.1:4222", "%2F", []string{"s3cr", "/et"}},
		{"nats://primeflow:s3cr#et@127.0.0.1:4222", "%23", []string{"s3cr", "#et"}},
		{"nats://primeflow:s3cr?et@127.0.0.1:4222", "%3F", []string{"s3cr", "?et"}},
		{"nats://primeflow:4711/et@127.0.0.1:4222", "%2F", []string{"4711", "/et"}},
		{"nats://primeflow:4711#et@127.0.0.1:4222", "%23", []string{"4711", "#et"}},
		{"nats://primeflow:4711?et@127.0.0.1:4222", "%3F", []string{"4711", "?et"}},
		{"nats://primeflow:ok@127.0.0.1:4222, primeflow:4711#et@127.0.0.1:4223", "%23", []string{"4711", "#et", ":ok"}},
	} {
		t.Run(tc.url, func(t *testing.T) {
			is := is.New(t)
			_, _, err := service.Connect(context.Background(), service.NATS{URL: tc.url}, log)
			is.True(err != nil)                  // refused
			cerr := service.CheckNATSURL(tc.url) // what a binary checks before it binds or connects
			is.True(cerr != nil && strings.HasPrefix(cerr.Error(), "NATS_URL: "))
			for _, e := range []error{err, cerr} {
				for _, piece := range tc.secret {
					is.True(!strings.Contains(e.Error(), piece)) // without the password, or a piece of it
				}
				is.True(strings.Contains(e.Error(), "127.0.0.1")) // naming the server
				is.True(strings.Contains(e.Error(), tc.how))      // and how to write the character
			}
		})
	}
	is := is.New(t)
	is.NoErr(service.CheckNATSURL("nats://a:1, 127.0.0.1:4222,tls://u:p%25w@b:4222")) // what nats.go reads
}
