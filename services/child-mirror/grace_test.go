package childmirror_test

import (
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/status"
	childmirror "github.com/ethosbuilding/primeflow/services/child-mirror"
	"github.com/matryer/is"
)

// primectl status reads SYNC_DRAIN_EMPTY_GRACE with the drains' default, to
// tell their grace from trouble (status.Consumer.Kept).
func TestTheGraceDefaultIsStatus(t *testing.T) {
	is := is.New(t)
	is.Equal(childmirror.DefaultConfig().Drain.EmptyGrace, status.DefaultSyncGrace) // one default on both sides
}
