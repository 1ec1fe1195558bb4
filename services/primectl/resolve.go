package primectl

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
)

// What waits for a person — a Failed SMS or triage invite, a new-job email
// given up on — is listed by `primectl sms`, `invites` and `emails`, and
// resolved, one row at a time, by `primectl sms|invites requeue ID…`
// (sent again, every attempt back) and `primectl sms|invites|emails
// dismiss ID… --reason …` (closed unsent: the person dealt with it another
// way). Each resolution is recorded with who and why (store.Resolutions),
// and the row stays, in its new state; primectl status counts it no more.

// resolveVerbs are the subcommands that resolve rows, and what each does.
var resolveVerbs = map[string]store.ResolveAction{"requeue": store.ResolveRequeue, "dismiss": store.ResolveDismiss}

// resolving runs `primectl name requeue|dismiss ID…` when args start with
// a verb; ok is false when they do not (the command lists).
func (c *cli) resolving(ctx context.Context, name string, table store.Resolvable, args []string) (ok bool, err error) {
	if len(args) == 0 {
		return false, nil
	}
	action, ok := resolveVerbs[args[0]]
	if !ok {
		return false, nil
	}
	return true, c.resolve(ctx, name, args[0], table, action, args[1:])
}

// resolve resolves each row named, saying what became of it; it fails when
// any was not resolved (the others are).
func (c *cli) resolve(ctx context.Context, name, verb string, table store.Resolvable, action store.ResolveAction, args []string) error {
	fs := c.flags(name)
	reason := fs.String("reason", "", "why, recorded with who and when (required to dismiss)")
	by := fs.String("by", "", "who resolves it, recorded (default: the OS user @ this host)")
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if action == store.ResolveRequeue && table == store.ResolvableEmailReceipt {
		fmt.Fprintf(c.stderr, "primectl %s %s: an email is tried again when a person moves it back into MAIL_FOLDER (mail-intake reopens its receipt); primectl cannot move it\n", name, verb)
		return ErrUsage
	}
	var ids []int64
	for _, p := range pos {
		id, err := strconv.ParseInt(p, 10, 64)
		if err != nil || id <= 0 {
			fmt.Fprintf(c.stderr, "primectl %s %s: %q is not an id (primectl %s --failed lists them)\n", name, verb, Printable(p), name)
			return ErrUsage
		}
		ids = append(ids, id)
	}
	switch {
	case len(ids) == 0:
		fmt.Fprintf(c.stderr, "primectl %s %s: name the ids to %s (primectl %s --failed lists them)\n", name, verb, verb, name)
		return ErrUsage
	case action == store.ResolveDismiss && strings.TrimSpace(*reason) == "":
		fmt.Fprintf(c.stderr, "primectl %s %s: say why with --reason (\"phoned the on-call\", \"junk\"): it is recorded\n", name, verb)
		return ErrUsage
	}
	who := cmp.Or(strings.TrimSpace(*by), currentUser())
	st, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	failed := 0
	for _, id := range ids {
		r := store.Resolution{Table: table, RowID: id, Action: action, By: who, Reason: strings.TrimSpace(*reason), ResolvedUTC: c.now()}
		rid, err := st.Resolve(ctx, r)
		if err != nil {
			failed++
			fmt.Fprintf(c.stderr, "primectl %s %s: %s\n", name, verb, Printable(err.Error()))
			continue
		}
		fmt.Fprintf(c.stdout, "%s %d %s by %s (resolution %d): %s\n", table.Noun(), id, strings.ToLower(string(action)),
			Printable(who), rid, afterResolving(table, action))
	}
	if failed > 0 {
		return fmt.Errorf("%s %s: %d of %d not resolved (said above)", name, verb, failed, len(ids))
	}
	return nil
}

// afterResolving says what becomes of a row resolved so.
func afterResolving(table store.Resolvable, action store.ResolveAction) string {
	switch {
	case action == store.ResolveDismiss && table == store.ResolvableEmailReceipt:
		return "it stays in " + string(table) + " as Dismissed, waiting for nobody; moved back into MAIL_FOLDER, the email is tried afresh"
	case action == store.ResolveDismiss:
		return "it stays in " + string(table) + " as Dismissed, never sent, waiting for nobody"
	case table == store.ResolvableSMS:
		return "queued again, due now, with every attempt (SMS_MAX_ATTEMPTS): makesafe sends it"
	}
	return "queued again, due now, with every attempt (TRIAGE_INVITE_MAX_ATTEMPTS): job-mirror sends it"
}

// currentUser is who runs primectl, as far as it knows: the OS user at
// this host.
func currentUser() string {
	name := "unknown user"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		name += "@" + h
	}
	return name
}

// listFlags reads a queue list's flags (--failed, --all, --limit) and its
// state: what waits (not sent, not done) by default.
func (c *cli) listFlags(name, what string, args []string) (store.InviteListState, int, error) {
	fs := c.flags(name)
	failed := fs.Bool("failed", false, "only the "+what+" given up on, which wait for a person")
	all := fs.Bool("all", false, "every one, done and dismissed too")
	limit := fs.Int("limit", 100, "at most this many, oldest first")
	pos, err := c.parse(fs, args)
	if err != nil {
		return 0, 0, err
	}
	if len(pos) > 0 || (*failed && *all) {
		fmt.Fprintf(c.stderr, "primectl %s: takes --failed or --all, or requeue|dismiss ID…\n", name)
		return 0, 0, ErrUsage
	}
	switch {
	case *failed:
		return store.InvitesFailed, *limit, nil
	case *all:
		return store.InvitesAll, *limit, nil
	}
	return store.InvitesPending, *limit, nil
}

// newestResolutions reads the newest resolution of each of these rows.
func newestResolutions(ctx context.Context, st store.Store, table store.Resolvable, ids []int64) (map[int64]store.Resolution, error) {
	out := map[int64]store.Resolution{}
	for chunk := range slices.Chunk(ids, store.MaxArchiveBatch) {
		recs, err := st.ListResolutions(ctx, table, chunk)
		if err != nil {
			return nil, err
		}
		for _, r := range recs { // oldest first: the newest stays
			out[r.RowID] = r
		}
	}
	return out, nil
}

// resolvedText is a row's newest resolution on one line; "-" for none.
func resolvedText(r store.Resolution, ok bool) string {
	if !ok {
		return "-"
	}
	s := strings.ToLower(string(r.Action)) + " " + utc(r.ResolvedUTC) + " by " + r.By
	if r.Reason != "" {
		s += ": " + r.Reason
	}
	return cut(s, 80)
}

// sendWhen is when a send queue's row is next due, or was done: sent, given
// up on (or dismissed after), or its claim lapses.
func sendWhen(state store.SendState, next, sent, failed, claimedUntil time.Time) string {
	switch state {
	case store.SendSent, store.SendLogged:
		return utc(sent)
	case store.SendFailed, store.SendDismissed:
		return utc(failed)
	case store.SendSending:
		return utc(claimedUntil)
	}
	return utc(next)
}

// lastErrorText is a row's last error as a list prints it, cut to n: as
// it is while the row waits on it (Queued for its retry, Sending it again,
// Failed for a person; an email Pending, Failed or Rejected); on a row done
// since (sent, logged, processed, dismissed) it is an earlier attempt's,
// and says so; "-" for none.
func lastErrorText(done bool, err string, n int) string {
	if done && err != "" {
		err = "earlier attempt: " + err
	}
	return dash(cut(err, n))
}

// sendDone reports whether a send queue's row is done: nothing is tried
// again until a person requeues it.
func sendDone(state store.SendState) bool {
	return state == store.SendSent || state == store.SendLogged || state == store.SendDismissed
}

// queueList is a list command of rows that may wait for a person: `primectl
// sms`, `invites` and `emails`. Without a verb it lists the rows not done
// (--failed: only those given up on; --all: every one), oldest first, each
// with its newest resolution; with requeue or dismiss it resolves them.
type queueList[T any] struct {
	name, what string
	table      store.Resolvable
	list       func(st store.Store, ctx context.Context, state store.InviteListState, limit int) ([]T, error)
	id         func(T) int64
	// header names the columns row gives, before RESOLVED.
	header string
	row    func(T) []string
}

func (q queueList[T]) run(ctx context.Context, c *cli, args []string) error {
	if ok, err := c.resolving(ctx, q.name, q.table, args); ok {
		return err
	}
	want, limit, err := c.listFlags(q.name, q.what, args)
	if err != nil {
		return err
	}
	st, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	rows, err := q.list(st, ctx, want, limit)
	if err != nil {
		return err
	}
	var ids []int64
	for _, r := range rows {
		ids = append(ids, q.id(r))
	}
	res, err := newestResolutions(ctx, st, q.table, ids)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, q.header+"\tRESOLVED")
	for _, r := range rows {
		rec, ok := res[q.id(r)]
		writeRow(tw, append(q.row(r), resolvedText(rec, ok))...)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(c.stdout, count(len(rows), strings.TrimSuffix(q.what, "s")))
	return nil
}

// sms is `primectl sms`: the SMS not sent (Queued, Sending, Failed).
func (c *cli) sms(ctx context.Context, args []string) error {
	return queueList[store.SMSMessage]{name: "sms", what: "messages", table: store.ResolvableSMS,
		list: store.Store.ListSMSQueue, id: func(m store.SMSMessage) int64 { return m.ID },
		header: "ID\tSOURCE\tSTATE\tATTEMPTS\tQUEUED (UTC)\tNEXT OR DONE (UTC)\tBODY\tLAST ERROR",
		row: func(m store.SMSMessage) []string {
			return []string{strconv.FormatInt(m.ID, 10), dash(m.Source), string(m.State), strconv.Itoa(m.Attempts), m.QueuedUTC.Format(timeLayout),
				sendWhen(m.State, m.NextAttemptUTC, m.SentUTC, m.FailedUTC, m.ClaimedUntilUTC), cut(m.Body, 40), lastErrorText(sendDone(m.State), m.LastError, 60)}
		}}.run(ctx, c, args)
}

// invites is `primectl invites`: the triage invites not sent (Queued,
// Sending, Failed).
func (c *cli) invites(ctx context.Context, args []string) error {
	return queueList[store.TriageInvite]{name: "invites", what: "invites", table: store.ResolvableTriageInvite,
		list: store.Store.ListTriageInviteQueue, id: func(t store.TriageInvite) int64 { return t.ID },
		header: "ID\tJOB\tSTATE\tATTEMPTS\tQUEUED (UTC)\tNEXT OR DONE (UTC)\tLAST ERROR",
		row: func(t store.TriageInvite) []string {
			return []string{strconv.FormatInt(t.ID, 10), t.JobID, string(t.State), strconv.Itoa(t.Attempts), t.QueuedUTC.Format(timeLayout),
				sendWhen(t.State, t.NextAttemptUTC, t.SentUTC, t.FailedUTC, t.ClaimedUntilUTC), lastErrorText(sendDone(t.State), t.LastError, 80)}
		}}.run(ctx, c, args)
}

// emails is `primectl emails`: the new-job emails not done (Pending: in
// the folder, or about to be; Failed).
func (c *cli) emails(ctx context.Context, args []string) error {
	return queueList[store.EmailReceipt]{name: "emails", what: "emails", table: store.ResolvableEmailReceipt,
		list: store.Store.ListEmailReceipts, id: func(r store.EmailReceipt) int64 { return r.ID },
		header: "ID\tRECEIVED (UTC)\tSUBJECT\tOUTCOME\tATTEMPTS\tMOVED TO\tLAST ERROR",
		row: func(r store.EmailReceipt) []string {
			moved := "- (in MAIL_FOLDER)"
			if !r.MovedUTC.IsZero() {
				moved = r.MovedTo + " " + utc(r.MovedUTC)
			}
			return []string{strconv.FormatInt(r.ID, 10), utc(r.ReceivedUTC), dash(cut(r.Subject, 40)), r.Outcome, strconv.Itoa(r.Attempts),
				moved, lastErrorText(r.Outcome == store.EmailProcessed || r.Outcome == store.EmailDismissed, r.LastError, 60)}
		}}.run(ctx, c, args)
}
