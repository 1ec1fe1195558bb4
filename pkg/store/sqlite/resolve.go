package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
)

// resolvable is how a person's answer changes a Resolvable's row: the
// column its state is in, the condition of a row that waits for a person,
// the SET of each action the table takes (each ? the answer's time), and
// what says a row is still in MAIL_FOLDER ("" for none). SQLite reads a
// column's name in any case, so the send queues share theirs, as
// sendTable's statements do.
type resolvable struct {
	state, waits string
	set          map[store.ResolveAction]string
	inFolder     string
}

var (
	sendResolvable = resolvable{
		state: "state",
		waits: `state = '` + string(store.SendFailed) + `' AND sentUTC IS NULL`,
		set: map[store.ResolveAction]string{
			store.ResolveRequeue: `state = '` + string(store.SendQueued) + `', attempts = 0, queuedUTC = ?, nextAttemptUTC = ?,
				claimedUntilUTC = NULL, updatedUTC = ?`,
			store.ResolveDismiss: `state = '` + string(store.SendDismissed) + `', claimedUntilUTC = NULL, updatedUTC = ?`,
		},
		inFolder: "0",
	}
	resolvables = map[store.Resolvable]resolvable{
		store.ResolvableSMS:          sendResolvable,
		store.ResolvableTriageInvite: sendResolvable,
		store.ResolvableEmailReceipt: {
			state: "outcome",
			waits: `outcome = '` + store.EmailFailed + `' AND movedUTC IS NOT NULL`,
			set: map[store.ResolveAction]string{
				store.ResolveDismiss: `outcome = '` + store.EmailDismissed + `', updatedUTC = ?`,
			},
			inFolder: "movedUTC IS NULL",
		},
	}
)

// Resolve applies a person's answer to a row that waits for one, and
// records it, in one transaction.
func (s *Store) Resolve(ctx context.Context, r store.Resolution) (int64, error) {
	if err := r.Check(); err != nil {
		return 0, fmt.Errorf("sqlite: resolve: %w", err)
	}
	t := resolvables[r.Table]
	set, ok := t.set[r.Action]
	if !ok { // Check refuses what no table takes
		return 0, fmt.Errorf("sqlite: resolve: %s does not take %s", r.Table, r.Action)
	}
	now := r.ResolvedUTC
	if now.IsZero() {
		now = time.Now()
	}
	at := formatTime(now)
	var times []any
	for range strings.Count(set, "?") {
		times = append(times, at)
	}
	var id int64
	err := s.inTx(ctx, func(tx *Store) error {
		n, err := tx.execCount(ctx, `UPDATE `+string(r.Table)+` SET `+set+` WHERE id = ? AND `+t.waits, append(times, r.RowID)...)
		if err != nil {
			return err
		}
		if n == 0 {
			var state string
			var inFolder bool
			err := tx.w().QueryRowContext(ctx, `SELECT `+t.state+`, `+t.inFolder+` FROM `+string(r.Table)+` WHERE id = ?`, r.RowID).
				Scan(&state, &inFolder)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			return store.Unresolved(r, err == nil, state, inFolder)
		}
		return tx.w().QueryRowContext(ctx, `INSERT INTO primeflowResolution (tableName, rowId, action, resolvedBy, reason, resolvedUTC)
			VALUES (?, ?, ?, ?, ?, ?) RETURNING id`, string(r.Table), r.RowID, string(r.Action), r.By, nullString(r.Reason), at).Scan(&id)
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: resolve: %w", err)
	}
	return id, nil
}

// ListResolutions returns the resolutions of table's rows with these ids.
func (s *Store) ListResolutions(ctx context.Context, table store.Resolvable, rowIDs []int64) ([]store.Resolution, error) {
	if len(rowIDs) == 0 {
		return nil, nil
	}
	if len(rowIDs) > store.MaxArchiveBatch {
		return nil, fmt.Errorf("sqlite: list resolutions: %d ids, more than %d a call", len(rowIDs), store.MaxArchiveBatch)
	}
	list, err := json.Marshal(rowIDs)
	if err != nil {
		return nil, err
	}
	return queryAll(ctx, s.r(), "list resolutions", `SELECT id, tableName, rowId, action, resolvedBy, reason, resolvedUTC
		FROM primeflowResolution WHERE tableName = ? AND rowId IN (SELECT value FROM json_each(?)) ORDER BY id`,
		scanResolution, string(table), string(list))
}

func scanResolution(sc sqlrows.Scanner) (store.Resolution, error) {
	var r store.Resolution
	var table, action string
	err := sc.Scan(&r.ID, &table, &r.RowID, &action, &r.By, scanString{&r.Reason}, scanTime{&r.ResolvedUTC})
	r.Table, r.Action = store.Resolvable(table), store.ResolveAction(action)
	return r, err
}

// ListSMSQueue lists messages in a state, oldest first.
func (s *Store) ListSMSQueue(ctx context.Context, state store.InviteListState, limit int) ([]store.SMSMessage, error) {
	where := listWhere(state, `State IN ('`+string(store.SendQueued)+`', '`+string(store.SendSending)+`', '`+string(store.SendFailed)+`')`,
		`State = '`+string(store.SendFailed)+`'`)
	return queryAll(ctx, s.r(), "list sms queue", `SELECT `+smsColumns+` FROM smsQueue`+where+` ORDER BY ID LIMIT ?`,
		scanSMS, listLimit(limit))
}

// ListEmailReceipts lists receipts in a state, oldest first.
func (s *Store) ListEmailReceipts(ctx context.Context, state store.InviteListState, limit int) ([]store.EmailReceipt, error) {
	where := listWhere(state, `outcome IN ('`+store.EmailPending+`', '`+store.EmailFailed+`')`, `outcome = '`+store.EmailFailed+`'`)
	return queryAll(ctx, s.r(), "list email receipts", `SELECT `+emailColumns+` FROM PrimeEmailJobRegistered`+where+` ORDER BY id LIMIT ?`,
		scanEmail, listLimit(limit))
}

// listWhere is the WHERE of a list in state: pending's, failed's, or none
// for every row.
func listWhere(state store.InviteListState, pending, failed string) string {
	switch state {
	case store.InvitesPending:
		return ` WHERE ` + pending
	case store.InvitesFailed:
		return ` WHERE ` + failed
	}
	return ""
}

// listLimit is a list's limit: 100 when it is not above zero.
func listLimit(limit int) int {
	if limit <= 0 {
		return 100
	}
	return limit
}
