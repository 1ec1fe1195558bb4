package status

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Livez asks whether ingest answers at base: its /livez, which every
// primeflow process serves without a login, answers 200.
func Livez(base string) func(context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/livez", nil)
		if err != nil {
			return err
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			var uerr *url.Error
			if errors.As(err, &uerr) {
				err = uerr.Err // the URL is said below
			}
			return fmt.Errorf("does not answer at %s (INGEST_URL, or OPS_ADDR/HTTP_ADDR when it is unset): %w", base, err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("%s/livez answered %s, not a primeflow process's 200", base, res.Status)
		}
		return nil
	}
}
