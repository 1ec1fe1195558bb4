package primectl_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/natsauth"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/matryer/is"
)

// streams apply is the operators' step for NATS: with the operators' user
// it makes every stream and consumer, and a second run changes nothing;
// the read-only user may check them, and status read them, but not apply.
func TestStreamsApplyAndCheck(t *testing.T) {
	is := is.New(t)
	w := emptyWorld(t)
	w.env["NATS_URL"] = natstest.ServerWithUsers(t).ClientURL()
	as := func(user string) {
		w.env["NATS_USER"], w.env["NATS_PASSWORD"] = user, user // natstest's passwords
	}

	as(natsauth.OperatorsReadOnly)
	out, _, err := w.run("", "streams", "check")
	is.True(err != nil)                                               // nothing applied yet
	is.True(strings.Contains(err.Error(), "primectl streams apply"))  // says what to run
	is.True(strings.Contains(out, "stream PRIME_WEBHOOK is missing")) // and what is missing
	is.True(strings.Contains(out, "consumer MAKESAFE_DETECT/makesafe-detect is missing"))
	_, _, err = w.run("", "streams", "apply", "--wait", "5s")
	is.True(err != nil) // the read-only user may not apply
	is.True(strings.Contains(err.Error(), "permissions violation"))

	as(natsauth.Operators)
	out, _, err = w.run("", "streams", "apply")
	is.NoErr(err)
	is.True(strings.Contains(out, "stream MAKESAFE_DETECT created"))
	is.True(strings.Contains(out, "consumer PRIME_WEBHOOK/resolver created"))
	out, _, err = w.run("", "streams", "apply")
	is.NoErr(err)
	is.Equal(out, "NATS held every stream and consumer as defined already: nothing changed\n")

	as(natsauth.OperatorsReadOnly)
	ingest := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})) // answers /livez
	defer ingest.Close()
	w.env["INGEST_URL"] = ingest.URL
	out, _, err = w.run("", "streams", "check")
	is.NoErr(err)
	is.Equal(out, "NATS holds every stream and consumer as defined\n")
	out, _, err = w.run("", "status")
	is.NoErr(err)                                                              // status as the read-only user
	is.True(hasLine(out, "resolver", "PRIME_WEBHOOK/resolver", "0", "0", "0")) // reads the consumers
	is.True(strings.Contains(out, "optimo-plan: free"))                        // and the locks
	is.True(!strings.Contains(out, "missing"))

	_, _, err = w.run("", "streams", "drop")
	is.True(err != nil) // a verb it does not know
}
