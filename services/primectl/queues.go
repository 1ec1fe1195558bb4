package primectl

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
)

// syncQueue is `primectl syncqueue`: ethSyncQueue by object (items, held by
// a drain, the oldest's age), then the items themselves, oldest first. The
// counts by object are the whole queue's, so --object keeps only its own
// row of them and --job, whose items are all there is of the job, leaves
// them out.
func (c *cli) syncQueue(ctx context.Context, args []string) error {
	fs := c.flags("syncqueue")
	object := fs.String("object", "", "only this object (primeJobStatusHistory, primeContacts, primeAllocations, primeContactRelationships)")
	job := fs.String("job", "", "only this job's items (without the counts by object, which are the whole queue's)")
	limit := fs.Int("limit", 100, "at most this many items, oldest first")
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		fmt.Fprintln(c.stderr, "primectl syncqueue: takes no arguments")
		return ErrUsage
	}
	st, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	stats, err := st.SyncQueueStats(ctx)
	if err != nil {
		return err
	}
	if *object != "" {
		// MissingObjects', and any other the queue holds, by the name it
		// holds them under: SQLite compares names case by case.
		var objects []string
		for _, s := range stats {
			objects = append(objects, s.Object)
		}
		i := slices.IndexFunc(objects, func(o string) bool { return strings.EqualFold(o, *object) })
		if i < 0 {
			fmt.Fprintf(c.stderr, "primectl syncqueue: --object %s: the queue has no such object (%s)\n", Printable(*object), strings.Join(objects, ", "))
			return ErrUsage
		}
		*object = objects[i]
	}
	items, err := st.ListSyncQueue(ctx, store.SyncQueueFilter{Object: *object, JobID: *job, Limit: *limit})
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	if *job == "" {
		now := c.now()
		fmt.Fprintln(tw, "OBJECT\tITEMS\tHELD BY A DRAIN\tOLDEST WAITING")
		for _, s := range stats {
			if *object == "" || s.Object == *object {
				writeRow(tw, s.Object, strconv.Itoa(s.Items), strconv.Itoa(s.Claimed), waited(now, s.OldestQueuedUTC))
			}
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintln(tw, "OBJECT\tJOB\tQUEUED (UTC)\tCLAIMED (UTC)")
	for _, it := range items {
		writeRow(tw, it.Object, it.JobID, it.QueuedUTC.Format(timeLayout), utc(it.ClaimedUTC))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "%d items\n", len(items))
	return nil
}

// waited is how long ago since was, to the second; "-" for none.
func waited(now, since time.Time) string {
	if since.IsZero() {
		return "-"
	}
	return now.Sub(since).Truncate(time.Second).String()
}
