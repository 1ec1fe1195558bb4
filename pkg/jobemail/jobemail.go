// Package jobemail reads Prime's new-job notification emails: the "Extract
// JobID" step of the email flow (§7). A real body is
//
//	{ "JobID": '2262480', "JobNumber": 'J014370' }
//
// with mixed quotes, not JSON, and the JobID is the job's numeric reference
// (§4.1). Extract reads body.content (HTML reduced to text), falling back to
// bodyPreview, and accepts a labelled JobID that is a GUID or a numeric
// reference, quoted with either quote or unquoted; with no labelled JobID it
// takes the first bare GUID in the text, and then in the HTML itself (a link's
// href: n8n read the raw body.content). It reads the first MaxRead bytes of
// a body.
package jobemail

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Kind is what a JobID is (the flow's JobIDKind).
type Kind string

// The kinds of JobID.
const (
	// KindNumeric: the job's numeric reference, what Prime's own emails carry.
	KindNumeric Kind = "numeric"
	// KindGUID: the job's GUID.
	KindGUID Kind = "guid"
)

// Email is what Extract reads of a message (Microsoft Graph's subject, body
// and bodyPreview).
type Email struct {
	Subject string
	// Body is body.content; HTML says whether its contentType is "html".
	Body string
	HTML bool
	// Preview is bodyPreview, Graph's first ~255 characters as plain text.
	Preview string
}

// Job is what the flow's Extract JobID outputs.
type Job struct {
	// JobID is the labelled value as found: digits, or a GUID in lower-case
	// canonical form.
	JobID string
	Kind  Kind
	// NumericReference is JobID as a number when Kind is KindNumeric, else 0.
	NumericReference int64
	// JobNumber is the labelled JobNumber (J014370), empty when the email has none.
	JobNumber string
}

// ExcerptLen is how much of the text an extraction failure quotes (§7: "the
// first 300 characters").
const ExcerptLen = 300

// Error is an email with no JobID: it names the subject line and the first
// ExcerptLen characters of the text that was searched.
type Error struct {
	Subject string
	Excerpt string
}

func (e *Error) Error() string {
	return fmt.Sprintf("no JobID in the email with subject %q: first %d characters: %q", e.Subject, ExcerptLen, e.Excerpt)
}

const guidPattern = `[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}`

var (
	// labelled is a JobID label — JobID, jobId, Job ID, the label itself in
	// either quote or none — then ":" or "=", then the value in either quote
	// or none. The label must start a word, and a GUID value must end one;
	// a number's end is checked by the caller (digits run on otherwise).
	labelled = regexp.MustCompile(`(?i)(?:^|[^0-9A-Za-z_])["']?job[ \t]?id["']?\s*[:=]\s*["']?(?:\{?(` + guidPattern + `)\}?|([0-9]{1,18}))`)
	// jobNumber is a JobNumber label and its value (J014370), as written.
	jobNumber = regexp.MustCompile(`(?i)(?:^|[^0-9A-Za-z_])["']?job[ \t]?number["']?\s*[:=]\s*["']?([0-9A-Za-z][0-9A-Za-z_/-]{0,49})`)
	// bareGUID is any GUID standing as a word of its own.
	bareGUID = regexp.MustCompile(`(?:^|[^0-9A-Za-z])(` + guidPattern + `)`)
)

// Extract finds the JobID of a notification email (§7). It reads the body —
// reduced to text when it is HTML — and then, when that has none,
// bodyPreview; last, the HTML's markup for a bare GUID. The error is an
// *Error.
func Extract(e Email) (Job, error) {
	raw := clip(e.Body)
	body := raw
	if e.HTML {
		body = text(raw)
	}
	for _, text := range []string{body, e.Preview} {
		if j, ok := find(text); ok {
			return j, nil
		}
	}
	if e.HTML {
		// A GUID only in the markup, such as a link to the job: n8n's
		// Extract JobID read the raw body.content, and found it there.
		if id, ok := firstBareGUID(raw); ok {
			j := Job{JobID: id, Kind: KindGUID}
			if m := jobNumber.FindStringSubmatch(body); m != nil {
				j.JobNumber = m[1]
			}
			return j, nil
		}
	}
	searched := body
	if strings.TrimSpace(searched) == "" {
		searched = e.Preview
	}
	return Job{}, &Error{Subject: e.Subject, Excerpt: excerpt(searched)}
}

// find looks for a labelled JobID, then the first bare GUID.
func find(text string) (Job, bool) {
	var j Job
	found := false
	for _, m := range labelled.FindAllStringSubmatchIndex(text, -1) {
		if guid := submatch(text, m, 1); guid != "" {
			if !wordEnds(text, m[3]) {
				continue
			}
			j, found = Job{JobID: strings.ToLower(guid), Kind: KindGUID}, true
			break
		}
		digits := submatch(text, m, 2)
		if !wordEnds(text, m[5]) {
			continue // a longer number, or digits run into letters: not a reference
		}
		ref, err := strconv.ParseInt(digits, 10, 64)
		if err != nil || ref <= 0 {
			continue
		}
		j, found = Job{JobID: strconv.FormatInt(ref, 10), Kind: KindNumeric, NumericReference: ref}, true
		break
	}
	if !found {
		var id string
		if id, found = firstBareGUID(text); found {
			j = Job{JobID: id, Kind: KindGUID}
		}
	}
	if !found {
		return Job{}, false
	}
	if m := jobNumber.FindStringSubmatch(text); m != nil {
		j.JobNumber = m[1]
	}
	return j, true
}

// firstBareGUID is the first GUID standing as a word of its own in text, in
// lower case.
func firstBareGUID(text string) (string, bool) {
	for _, m := range bareGUID.FindAllStringSubmatchIndex(text, -1) {
		if wordEnds(text, m[3]) {
			return strings.ToLower(text[m[2]:m[3]]), true
		}
	}
	return "", false
}

func submatch(s string, m []int, i int) string {
	if m[2*i] < 0 {
		return ""
	}
	return s[m[2*i]:m[2*i+1]]
}

// wordEnds reports whether a value ending at i is not followed by another
// letter, digit, underscore or hyphen (which would make it part of a longer
// token).
func wordEnds(s string, i int) bool {
	if i >= len(s) {
		return true
	}
	c := s[i]
	return !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || c == '-')
}

// excerpt is the first ExcerptLen characters of s, on one line's worth of
// spaces.
func excerpt(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= ExcerptLen {
		return s
	}
	return string([]rune(s)[:ExcerptLen])
}
