package config

import (
	"errors"
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
		return 0, false, errors.New(`not a duration (15m) or "off"`)
	case d < 0:
		return 0, false, errors.New("a negative interval")
	}
	return d, d == 0, nil
}
