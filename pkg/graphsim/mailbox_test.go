package graphsim_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/graph"
	"github.com/ethosbuilding/primeflow/pkg/graphsim"
	"github.com/ethosbuilding/primeflow/pkg/simcontrol"
	"github.com/matryer/is"
)

// What the mail intake's tests need, over HTTP: a message's headers and its
// size given through the control API, and a folder deleted under a client
// that resolved it.
func TestHeadersSizesAndDeletedFolders(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	sim := graphsim.New(graphsim.Options{})
	srv := httptest.NewServer(sim)
	defer srv.Close()
	c, err := graph.New(sim.ClientConfig(srv.URL), nil)
	is.NoErr(err)
	in, err := c.ResolveFolder(ctx, sim.User(), graphsim.DefaultFolders[0])
	is.NoErr(err)
	processed, err := c.ResolveFolder(ctx, sim.User(), graphsim.DefaultFolders[1])
	is.NoErr(err)

	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/_sim/messages", strings.NewReader(`{"subject":"big","body":"<p>JobID: 7</p>","padTo":100000,
		"from":"noreply@primeeco.tech","headers":[{"name":"Authentication-Results","value":"dmarc=pass header.from=primeeco.tech"}]}`))
	simcontrol.Authorize(req, sim.ControlToken())
	resp, err := http.DefaultClient.Do(req)
	is.NoErr(err)
	resp.Body.Close()
	is.Equal(resp.StatusCode, http.StatusCreated)
	page, err := c.ListPage(ctx, sim.User(), in.ID, 10, "")
	is.NoErr(err)
	is.Equal(len(page.Messages), 1)
	m := page.Messages[0]
	is.Equal(m.From.EmailAddress.Address, "noreply@primeeco.tech")
	auth, ok := m.Authentication()
	is.True(ok) // the header given, as Graph serves internetMessageHeaders
	is.Equal(auth[0].Result, "pass")
	body, err := c.GetBody(ctx, sim.User(), m.ID, 1<<20)
	is.NoErr(err)
	is.Equal(len(body.Content), 100000) // padded to its size
	is.True(strings.HasPrefix(body.Content, "<p>JobID: 7</p><!--"))
	at, err := c.Locate(ctx, sim.User(), m.ID)
	is.NoErr(err)
	is.Equal(at, in.ID) // where it is

	req, _ = http.NewRequest(http.MethodDelete, srv.URL+"/_sim/folders?path=Inbox/Prime%20Jobs/Processed", nil)
	simcontrol.Authorize(req, sim.ControlToken())
	resp, err = http.DefaultClient.Do(req)
	is.NoErr(err)
	resp.Body.Close()
	is.Equal(resp.StatusCode, http.StatusNoContent)
	err = c.Move(ctx, sim.User(), m.ID, processed.ID)
	is.True(errors.Is(err, graph.ErrNotFound)) // a move to a deleted folder is a 404 too
	at, err = c.Locate(ctx, sim.User(), m.ID)
	is.NoErr(err)
	is.Equal(at, in.ID) // and the message is where it was
	_, err = c.ResolveFolder(ctx, sim.User(), graphsim.DefaultFolders[1])
	is.True(errors.Is(err, graph.ErrNotFound)) // the folder is gone
	_, err = sim.DeleteFolder("Inbox")
	is.True(err != nil) // but not the inbox

	is.NoErr(sim.MakeFolder(graphsim.DefaultFolders[1])) // made again: a new id
	again, err := c.ResolveFolder(ctx, sim.User(), graphsim.DefaultFolders[1])
	is.NoErr(err)
	is.True(again.ID != processed.ID)
	is.NoErr(c.Move(ctx, sim.User(), m.ID, again.ID))
}
