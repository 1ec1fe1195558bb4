package mailintake

import "time"

// SetMessageWait sets the bound of one message's Graph calls (messageWait),
// so a test need not wait its 10 s; call it before Run.
func (in *Intake) SetMessageWait(d time.Duration) { in.messageWait = d }
