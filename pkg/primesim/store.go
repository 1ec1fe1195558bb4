package primesim

import (
	"bytes"
	"cmp"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Kind names a collection of Prime records; it is also the collection's
// path in Prime's API and the resource type in its answers.
type Kind string

// The collections the simulator serves, one per record type of pkg/prime.
const (
	KindJobs                 Kind = "jobs"
	KindAppointments         Kind = "appointments"
	KindAllocations          Kind = "allocations"
	KindSiteForms            Kind = "site-forms"
	KindEstimates            Kind = "estimates"
	KindContacts             Kind = "contacts"
	KindContactRelationships Kind = "contact-relationships"
	KindStatusHistories      Kind = "status-histories"
)

// Kinds lists every collection.
func Kinds() []Kind {
	return []Kind{KindJobs, KindAppointments, KindAllocations, KindSiteForms, KindEstimates,
		KindContacts, KindContactRelationships, KindStatusHistories}
}

func validKind(k Kind) bool { return slices.Contains(Kinds(), k) }

// Record is one record as Prime serves it: its id and its attributes object.
// Jobs also carry the numeric reference that Prime's webhooks send as jobId
// (§4.1) and that /jobs/{identifier} accepts.
type Record struct {
	ID               string          `json:"id"`
	NumericReference int64           `json:"numericReference,omitempty"`
	Attributes       json.RawMessage `json:"attributes"`
}

// Fixture is a set of records by collection: the JSON form is
// {"jobs":[{"id","numericReference","attributes"}], "appointments":[…], …}.
type Fixture map[Kind][]Record

//go:embed fixture.json
var defaultFixture []byte

// DefaultFixture returns the small, realistic fixture shipped with the
// simulator (fixture.json): a handful of jobs with their appointments,
// allocations (one Make Safe), site forms, estimates, contacts and status
// histories.
func DefaultFixture() (Fixture, error) {
	return LoadFixture(bytes.NewReader(defaultFixture))
}

// LoadFixture reads a fixture in its JSON form.
func LoadFixture(r io.Reader) (Fixture, error) {
	var f Fixture
	dec := json.NewDecoder(r)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("primesim: fixture: %w", err)
	}
	for k := range f {
		if !validKind(k) {
			return nil, fmt.Errorf("primesim: fixture: unknown collection %q", k)
		}
	}
	return f, nil
}

// entry is a stored record with what serving it needs worked out once.
type entry struct {
	id    string
	seq   int64          // insertion order, the order lists are served in
	jobID string         // the jobId attribute, for the jobId filter
	attrs map[string]any // decoded attributes, for other filters
	raw   json.RawMessage
	doc   []byte // the encoded resource object
}

type collection struct {
	byID  map[string]*entry
	byJob map[string][]*entry
}

// store holds the records. It is not safe for concurrent use; Sim guards it.
type store struct {
	seq   int64
	cols  map[Kind]*collection
	refs  map[int64]string // numeric reference → job id
	jobRe map[string]int64 // job id → numeric reference
}

func newStore() *store {
	s := &store{cols: make(map[Kind]*collection), refs: make(map[int64]string), jobRe: make(map[string]int64)}
	for _, k := range Kinds() {
		s.cols[k] = &collection{byID: make(map[string]*entry), byJob: make(map[string][]*entry)}
	}
	return s
}

func (s *store) load(f Fixture) error {
	for _, k := range Kinds() {
		for _, r := range f[k] {
			if err := s.put(k, r); err != nil {
				return err
			}
		}
	}
	return nil
}

// put adds or replaces a record.
func (s *store) put(k Kind, r Record) error {
	if !validKind(k) {
		return fmt.Errorf("primesim: unknown collection %q", k)
	}
	if strings.TrimSpace(r.ID) == "" {
		return fmt.Errorf("primesim: %s: record has no id", k)
	}
	if strings.Contains(r.ID, "/") {
		return fmt.Errorf("primesim: %s: id %q contains a slash", k, r.ID)
	}
	raw := bytes.TrimSpace(r.Attributes)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		raw = []byte("{}")
	}
	var attrs map[string]any
	if err := json.Unmarshal(raw, &attrs); err != nil {
		return fmt.Errorf("primesim: %s %s: attributes: %w", k, r.ID, err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return fmt.Errorf("primesim: %s %s: attributes: %w", k, r.ID, err)
	}
	doc, err := json.Marshal(struct {
		Type       Kind            `json:"type"`
		ID         string          `json:"id"`
		Attributes json.RawMessage `json:"attributes"`
	}{k, r.ID, compact.Bytes()})
	if err != nil {
		return fmt.Errorf("primesim: %s %s: %w", k, r.ID, err)
	}
	if k == KindJobs {
		if err := s.setRef(r.ID, r.NumericReference); err != nil {
			return err
		}
	}

	c := s.cols[k]
	e := &entry{id: r.ID, jobID: attrString(attrs["jobId"]), attrs: attrs, raw: compact.Bytes(), doc: doc}
	if old, ok := c.byID[r.ID]; ok {
		e.seq = old.seq
		c.unindex(old)
	} else {
		s.seq++
		e.seq = s.seq
	}
	c.byID[r.ID] = e
	if e.jobID != "" {
		i, _ := slices.BinarySearchFunc(c.byJob[e.jobID], e.seq, func(x *entry, seq int64) int { return cmp.Compare(x.seq, seq) })
		c.byJob[e.jobID] = slices.Insert(c.byJob[e.jobID], i, e)
	}
	return nil
}

// unindex takes an entry out of the jobId index.
func (c *collection) unindex(e *entry) {
	if e.jobID == "" {
		return
	}
	c.byJob[e.jobID] = slices.DeleteFunc(c.byJob[e.jobID], func(x *entry) bool { return x == e })
	if len(c.byJob[e.jobID]) == 0 {
		delete(c.byJob, e.jobID)
	}
}

// setRef records a job's numeric reference; like ethPrimeJobReference the
// pairing never changes (§4.1). Every job has one: a job put again without
// one keeps the one it has.
func (s *store) setRef(jobID string, ref int64) error {
	if ref == 0 {
		if _, ok := s.jobRe[jobID]; !ok {
			return fmt.Errorf("primesim: job %s: no numeric reference", jobID)
		}
		return nil
	}
	if ref < 0 {
		return fmt.Errorf("primesim: job %s: negative numeric reference %d", jobID, ref)
	}
	if other, ok := s.refs[ref]; ok && other != jobID {
		return fmt.Errorf("primesim: numeric reference %d already belongs to job %s", ref, other)
	}
	if old, ok := s.jobRe[jobID]; ok && old != ref {
		return fmt.Errorf("primesim: job %s already has numeric reference %d", jobID, old)
	}
	s.refs[ref] = jobID
	s.jobRe[jobID] = ref
	return nil
}

func (s *store) get(k Kind, id string) (*entry, bool) {
	c, ok := s.cols[k]
	if !ok {
		return nil, false
	}
	e, ok := c.byID[id]
	return e, ok
}

// job finds a job by its GUID or its numeric reference.
func (s *store) job(identifier string) (*entry, bool) {
	if ref, err := strconv.ParseInt(identifier, 10, 64); err == nil {
		if id, ok := s.refs[ref]; ok {
			identifier = id
		}
	}
	return s.get(KindJobs, identifier)
}

func (s *store) delete(k Kind, id string) bool {
	c, ok := s.cols[k]
	if !ok {
		return false
	}
	e, ok := c.byID[id]
	if !ok {
		return false
	}
	delete(c.byID, id)
	c.unindex(e)
	// The numeric reference stays: Prime never reuses one.
	return true
}

// filter is one term of Prime's q syntax: 'field'.op('value').
type filter struct{ field, op, value string }

// The operators the simulator knows. The ordering ones compare text, which
// orders Prime's timestamps ("2025-02-07 04:14:33") as time.
const (
	opEq  = "eq"
	opGt  = "gt"
	opGte = "gte"
	opLt  = "lt"
	opLte = "lte"
)

// parseQuery reads q: terms joined by "," (AND). Only eq, gt, gte, lt and
// lte are simulated; any other term is refused.
func parseQuery(q string) ([]filter, error) {
	if q == "" {
		return nil, nil
	}
	var out []filter
	for _, term := range strings.Split(q, ",") {
		f, ok := parseTerm(strings.TrimSpace(term))
		if !ok {
			return nil, fmt.Errorf("unsupported filter term %q: the simulator knows 'field'.op('value') with op eq, gt, gte, lt or lte", term)
		}
		out = append(out, f)
	}
	return out, nil
}

func parseTerm(term string) (filter, bool) {
	field, rest, ok := strings.Cut(term, ".")
	if !ok || len(field) < 2 || field[0] != '\'' || field[len(field)-1] != '\'' {
		return filter{}, false
	}
	op, arg, ok := strings.Cut(rest, "(")
	if !ok || !strings.HasPrefix(arg, "'") || !strings.HasSuffix(arg, "')") || len(arg) < len("'')") {
		return filter{}, false
	}
	switch op {
	case opEq, opGt, opGte, opLt, opLte:
	default:
		return filter{}, false
	}
	return filter{field: field[1 : len(field)-1], op: op, value: arg[1 : len(arg)-len("')")]}, true
}

// matches reports whether an attribute's text passes the filter.
func (f filter) matches(v string) bool {
	switch f.op {
	case opGt:
		return v != "" && v > f.value
	case opGte:
		return v != "" && v >= f.value
	case opLt:
		return v != "" && v < f.value
	case opLte:
		return v != "" && v <= f.value
	default:
		return v == f.value
	}
}

// list returns the records that match every filter, in insertion order.
func (s *store) list(k Kind, filters []filter) []*entry {
	c := s.cols[k]
	var candidates []*entry
	rest := filters
	if i := slices.IndexFunc(filters, func(f filter) bool { return f.field == "jobId" && f.op == opEq }); i >= 0 {
		candidates = c.byJob[filters[i].value]
		rest = slices.Delete(slices.Clone(filters), i, i+1)
	} else {
		candidates = slices.SortedFunc(maps.Values(c.byID), func(a, b *entry) int { return cmp.Compare(a.seq, b.seq) })
	}
	if len(rest) == 0 {
		return candidates
	}
	var out []*entry
	for _, e := range candidates {
		if !slices.ContainsFunc(rest, func(f filter) bool { return !f.matches(attrString(e.attrs[f.field])) }) {
			out = append(out, e)
		}
	}
	return out
}

// order is Prime's order parameter: field|ASC or field|DESC (order=createdAt|DESC).
type order struct {
	field string
	desc  bool
}

// parseOrder reads order; "" keeps insertion order.
func parseOrder(v string) (order, error) {
	if v == "" {
		return order{}, nil
	}
	field, dir, _ := strings.Cut(v, "|")
	switch {
	case field == "":
	case strings.EqualFold(dir, "asc") || dir == "":
		return order{field: field}, nil
	case strings.EqualFold(dir, "desc"):
		return order{field: field, desc: true}, nil
	}
	return order{}, fmt.Errorf("unsupported order %q: the simulator knows field|ASC and field|DESC", v)
}

// sort orders records by the field's text (time order for Prime's
// timestamps), keeping insertion order among equals; records without the
// field come last either way.
func (o order) sort(es []*entry) []*entry {
	if o.field == "" {
		return es
	}
	out := slices.Clone(es)
	slices.SortStableFunc(out, func(a, b *entry) int {
		x, y := attrString(a.attrs[o.field]), attrString(b.attrs[o.field])
		switch {
		case x == y:
			return 0
		case x == "":
			return 1
		case y == "":
			return -1
		case o.desc:
			return strings.Compare(y, x)
		}
		return strings.Compare(x, y)
	})
	return out
}

// attrString is an attribute as filter text: strings as they are, numbers
// and booleans as JSON writes them, null as "".
func attrString(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return ""
		}
		return string(b)
	}
}

// record renders a stored entry as a Record.
func (s *store) record(k Kind, e *entry) Record {
	r := Record{ID: e.id, Attributes: slices.Clone(e.raw)}
	if k == KindJobs {
		r.NumericReference = s.jobRe[e.id]
	}
	return r
}

// encodeRecord turns a typed pkg/prime record into a Record: its attributes
// are the record's raw attributes (so attributes the type does not know
// survive) overlaid with its typed fields, encoded through pkg/prime's json
// tags, the one definition of each shape.
func encodeRecord(id string, typed any, raw json.RawMessage) (Record, error) {
	b, err := json.Marshal(typed)
	if err != nil {
		return Record{}, fmt.Errorf("primesim: encode %s: %w", id, err)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return Record{ID: id, Attributes: b}, nil
	}
	var merged, over map[string]json.RawMessage
	if err := json.Unmarshal(raw, &merged); err != nil || merged == nil {
		return Record{}, errors.Join(fmt.Errorf("primesim: %s: raw attributes are not an object", id), err)
	}
	if err := json.Unmarshal(b, &over); err != nil {
		return Record{}, fmt.Errorf("primesim: encode %s: %w", id, err)
	}
	maps.Copy(merged, over)
	out, err := json.Marshal(merged)
	if err != nil {
		return Record{}, fmt.Errorf("primesim: encode %s: %w", id, err)
	}
	return Record{ID: id, Attributes: out}, nil
}

// decodeRecord reads a stored record into a typed pkg/prime record, the way
// the client does.
func decodeRecord(r Record, into any) error {
	if err := json.Unmarshal(r.Attributes, into); err != nil {
		return fmt.Errorf("primesim: decode %s: %w", r.ID, err)
	}
	return nil
}
