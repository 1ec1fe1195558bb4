package store

import (
	"context"
	"time"
)

// Settings are the primeflowSettings rows: values that procedures called by
// other systems read, because those callers do not pass them (§11,
// sql/README.md), and the little state a service keeps between its runs
// (the jobs-by-date backstop's checkpoint).
type Settings interface {
	// SetSetting writes a setting (at most MaxSettingLen characters).
	SetSetting(ctx context.Context, name, value string) error
	// GetSetting reads a setting; found is false when it was never written.
	GetSetting(ctx context.Context, name string) (value string, found bool, err error)
}

// MaxSettingLen is the longest setting value (primeflowSettings.value).
const MaxSettingLen = 4000

// SettingMakesafeSMSRecipient is who a make-safe SMS goes to when the
// detection names nobody: the spec's two-parameter call of
// spMakesafeUpsertPhoneCallFromPrimeJob (§7's email flow) passes no
// recipient. primectl migrate writes it from MAKESAFE_SMS_TO.
const SettingMakesafeSMSRecipient = "MakesafeSMSRecipient"

// DefaultMakesafeLadder is the re-check ladder a detection queues when it is
// asked to queue checks and gives no offsets of its own (§6: +1, +4, +10 and
// +15 minutes), as the spec's callers of spMakesafeUpsertPhoneCallFromPrimeJob
// do. makesafe's MAKESAFE_LADDER defaults to the same rungs.
var DefaultMakesafeLadder = []time.Duration{time.Minute, 4 * time.Minute, 10 * time.Minute, 15 * time.Minute}
