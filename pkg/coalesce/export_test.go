package coalesce

import "time"

// SetAfter replaces the Loop's time.After, for a test that ends a window
// by hand.
func (l *Loop) SetAfter(after func(time.Duration) <-chan time.Time) { l.after = after }
