package config

import (
	"fmt"
	"strings"
	"time"
)

// ParseInterval reads a schedule's interval setting: a duration ("15m"), or
// "off" (any case) or "0" for none, which off reports. A negative duration
// is refused.
func ParseInterval(v string) (d time.Duration, off bool, err error) {
	v = strings.TrimSpace(v)
	if strings.EqualFold(v, "off") {
		return 0, true, nil
	}
	d, err = time.ParseDuration(v)
	switch {
	case err != nil:
		return 0, false, fmt.Errorf("not a duration or \"off\": %w", err)
	case d < 0:
		return 0, false, fmt.Errorf("%s: a negative interval", v)
	}
	return d, d == 0, nil
}
