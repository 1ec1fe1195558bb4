package primebudget

import (
	"time"

	"github.com/ethosbuilding/primeflow/pkg/prime"
)

// SetWindow has b count PRIME_RATE_PER_MINUTE over d instead of a minute
// and the margin, for tests that cannot wait minutes. Call it before the
// budget is used.
func SetWindow(b *Budget, d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.window = d
}

// GrantedAt is when the budget let p out, as it recorded it in the window.
func GrantedAt(b *Budget, p prime.Permit) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return time.UnixMilli(b.mine[p.(*permit).id])
}
