package optimoplan_test

import (
	"context"
	"encoding/json"
	"log"
	"os"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A portal asks for planning after it wrote an order (AdminPortal
// BookingAdvanced, FormsPortal Estimator, §8.2): the order write already
// marked its date NotPlanned, so the request carries no dates (§10.7). The
// publish is acknowledged once the OPTIMO stream holds it; bursts coalesce
// into one planning run. The same from a shell:
//
//	nats pub --jetstream optimo.plan.requested '{"source":"AdminPortal","reason":"booking"}'
func Example_portalRequestsPlanning() {
	// The portals' user may publish this subject and nothing else
	// (compose/nats/users.conf); its password is NATS_PORTALS_PASSWORD, and
	// it reads JetStream's ack on its own inbox prefix, _INBOX_portals.
	nc, err := nats.Connect("nats://127.0.0.1:4222", nats.UserInfo("portals", os.Getenv("NATS_PORTALS_PASSWORD")),
		nats.CustomInboxPrefix(events.RolePortals.InboxPrefix()))
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	body, _ := json.Marshal(events.PlanRequested{Source: "AdminPortal", Reason: "booking"})
	if _, err := js.Publish(ctx, events.SubjectOptimoPlan, body); err != nil {
		log.Fatal(err) // not stored: try again, or rely on optimo-plan's schedule
	}
}
