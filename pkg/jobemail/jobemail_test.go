package jobemail

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/matryer/is"
)

// realBody is a Prime notification as the spec quotes it (§7).
const realBody = `{ "JobID": '2262480', "JobNumber": 'J014370' }`

const guid = "0f8e3c1a-5b7d-4e2f-9a6c-1d3e5f7a9b01"

func TestExtract(t *testing.T) {
	numeric := Job{JobID: "2262480", Kind: KindNumeric, NumericReference: 2262480, JobNumber: "J014370"}
	for _, tc := range []struct {
		name  string
		email Email
		want  Job
	}{
		{"the real body", Email{Body: realBody}, numeric},
		{"the real body as Outlook's HTML", Email{HTML: true, Body: `<html><head><meta http-equiv="Content-Type" content="text/html; charset=utf-8"><style>p {margin:0}</style></head>` +
			`<body><div dir="ltr"><p>{ &quot;JobID&quot;: &#39;2262480&#39;, &quot;JobNumber&quot;: &#39;J014370&#39; }</p></div></body></html>`}, numeric},
		{"HTML with the label and value in elements of their own", Email{HTML: true, Body: `<table><tr><td><b>"JobID"</b>:</td><td><span style="color:red">'2262480'</span></td></tr>` +
			`<tr><td>"JobNumber":</td><td>'J014370'</td></tr></table>`}, numeric},
		{"line-broken between label and value", Email{Body: "{\r\n  \"JobID\":\r\n    '2262480',\r\n  \"JobNumber\":\r\n 'J014370'\r\n}"}, numeric},
		{"double quotes", Email{Body: `{"JobID": "2262480", "JobNumber": "J014370"}`}, numeric},
		{"unquoted, another label style", Email{Body: "New job registered\nJob ID: 2262480\nJob Number: J014370\n"}, numeric},
		{"no-break spaces from HTML", Email{HTML: true, Body: `<p>JobID:&nbsp;2262480&nbsp;JobNumber:&nbsp;J014370</p>`}, numeric},
		{"a labelled GUID", Email{Body: `{ "JobID": '` + strings.ToUpper(guid) + `', "JobNumber": 'J014370' }`},
			Job{JobID: guid, Kind: KindGUID, JobNumber: "J014370"}},
		{"a labelled GUID in braces", Email{Body: `JobID = {` + guid + `}`}, Job{JobID: guid, Kind: KindGUID}},
		{"a bare GUID only", Email{Body: "Please look at https://www.primeeco.tech/jobs/" + guid + " today."}, Job{JobID: guid, Kind: KindGUID}},
		{"a labelled JobID wins over an earlier bare GUID", Email{Body: "Ref " + guid + "\n" + realBody}, numeric},
		{"two JobIDs: the first", Email{Body: realBody + "\n> " + `{ "JobID": '2262999', "JobNumber": 'J014371' }`}, numeric},
		{"a JobID label inside another word is not one", Email{Body: `PrimeJobID: 99 ` + realBody}, numeric},
		{"a number that runs into letters is not a reference", Email{Body: `JobID: 2262480x ` + guid}, Job{JobID: guid, Kind: KindGUID}},
		{"the body has none: bodyPreview", Email{HTML: true, Body: "<p>See the attachment</p>", Preview: realBody}, numeric},
		{"an empty body: bodyPreview", Email{Preview: `{ "JobID": '2262480' }`}, Job{JobID: "2262480", Kind: KindNumeric, NumericReference: 2262480}},
		{"a GUID only in a link's href: the markup's bare GUID", Email{HTML: true, Subject: "New Job J014370",
			Body: `<p>A job was registered: <a href="https://www.primeeco.tech/jobs/` + guid + `">J014370</a></p>`, Preview: "A job was registered: J014370"},
			Job{JobID: guid, Kind: KindGUID}},
		{"a GUID in the text wins over one in the markup", Email{HTML: true,
			Body: `<a href="https://x/0f8e3c1a-0000-4e2f-9a6c-1d3e5f7a9b01">see</a> ` + guid}, Job{JobID: guid, Kind: KindGUID}},
		{"the comment in the HTML is not read", Email{HTML: true, Body: `<!-- JobID: 1 -->{ "JobID": '2262480', "JobNumber": 'J014370' }`}, numeric},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			got, err := Extract(tc.email)
			is.NoErr(err)
			is.Equal(got, tc.want) // JobID, JobIDKind, NumericReference, JobNumber
		})
	}
}

func TestExtractFailureNamesSubjectAndStart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		email   Email
		excerpt string
	}{
		{"no JobID at all", Email{Subject: "New Job J014370", Body: "Hello,\n\na job was registered."}, "Hello, a job was registered."},
		{"a JobID that is neither a GUID nor a number", Email{Subject: "x", Body: `{ "JobID": 'pending' }`}, `{ "JobID": 'pending' }`},
		{"a zero reference", Email{Subject: "x", Body: `JobID: 0`}, `JobID: 0`},
		{"an empty body quotes bodyPreview", Email{Subject: "empty", Preview: "nothing here"}, "nothing here"},
		{"a long HTML body: its text, cut", Email{Subject: "long", HTML: true, Body: "<p>" + strings.Repeat("abcde ", 100) + "</p>"},
			strings.Repeat("abcde ", 50)[:ExcerptLen]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			_, err := Extract(tc.email)
			var e *Error
			is.True(errors.As(err, &e))                                             // the failure is an *Error
			is.Equal(e.Subject, tc.email.Subject)                                   // it names the subject line
			is.Equal(e.Excerpt, tc.excerpt)                                         // and the start of the text
			is.True(utf8.RuneCountInString(e.Excerpt) <= ExcerptLen)                // no more than 300 characters
			is.True(strings.Contains(err.Error(), strconv.Quote(tc.email.Subject))) // the message says both
			is.True(strings.Contains(err.Error(), strconv.Quote(tc.excerpt)))
		})
	}
}

func TestText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`<p>a</p><p>b</p>`, "\na\n\nb\n"},
		{`a<br>b<br/>c`, "a\nb\nc"},
		{`<a href="x>y">link</a>`, "link"},
		{`1 < 2 &amp; 3 &gt; 2`, "1 < 2 & 3 > 2"},
		{`<style>p{color:red}</style><script>var x="<p>";</script>text`, "text"},
		{`<!--[if mso]><p>hidden</p><![endif]-->shown`, "shown"},
		{`x<!-- never closed`, "x"},
		{`<HEAD><TITLE>t</TITLE></HEAD><BODY>b</BODY>`, "\nb\n"},
		{`&lt;p&gt; is text`, "<p> is text"},
		{`<a title='x>shown`, "shown"}, // a stray quote: the tag ends at its first '>'
		{`<a title='x>` + strings.Repeat(" ", maxTag) + `<b>shown</b>`, strings.Repeat(" ", maxTag) + "shown"},
		{`<a` + strings.Repeat("<a", 3000) + `x`, strings.Repeat("<a", 3001) + "x"},
	} {
		if got := Text(tc.in); got != tc.want {
			t.Errorf("Text(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// Extract and Text read the first MaxRead bytes of a body, and no more.
func TestReadsAtMostMaxRead(t *testing.T) {
	is := is.New(t)
	for _, e := range []Email{{Body: realBody}, {HTML: true, Body: realBody}, {HTML: true, Body: `<a href="/jobs/` + guid + `">`}} {
		// the JobID starts before MaxRead and ends after it
		at := strings.IndexAny(e.Body, "0123456789")
		e.Body = strings.Repeat("x", MaxRead-at-2) + e.Body
		_, err := Extract(e)
		is.True(err != nil) // neither it nor the part of it before MaxRead is read
	}
	j, err := Extract(Email{Body: strings.Repeat(" ", MaxRead-len(realBody)) + realBody})
	is.NoErr(err) // one that ends at MaxRead is
	is.Equal(j.NumericReference, int64(2262480))
	is.Equal(len(Text(strings.Repeat("a ", 3*MaxRead))), MaxRead) // Text reads MaxRead bytes
}

var digits = regexp.MustCompile(`^[1-9][0-9]*$`)

func FuzzExtract(f *testing.F) {
	for _, seed := range []string{
		realBody, `JobID: ` + guid, guid, `<p>JobID&nbsp;=&nbsp;"7"</p>`, `{"JobID":"{` + guid + `}"}`,
		`JobID: 99999999999999999999`, `<a title='x>`, `<!--`, `< p>`, `JobID:'-1'`, "JobID:\xff7",
	} {
		f.Add(seed, true, "")
		f.Add(seed, false, seed)
	}
	f.Fuzz(func(t *testing.T, body string, isHTML bool, preview string) {
		j, err := Extract(Email{Subject: "s", Body: body, HTML: isHTML, Preview: preview})
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || utf8.RuneCountInString(e.Excerpt) > ExcerptLen {
				t.Fatalf("failure %v is not an *Error with at most %d characters", err, ExcerptLen)
			}
			return
		}
		text := strings.ToLower(preview + " " + body + " " + Text(body))
		switch j.Kind {
		case KindNumeric:
			if !digits.MatchString(j.JobID) || strconv.FormatInt(j.NumericReference, 10) != j.JobID {
				t.Fatalf("numeric JobID %q with NumericReference %d", j.JobID, j.NumericReference)
			}
		case KindGUID:
			if id, err := uuid.Parse(j.JobID); err != nil || id.String() != j.JobID || j.NumericReference != 0 {
				t.Fatalf("GUID JobID %q is not canonical, or has a NumericReference %d", j.JobID, j.NumericReference)
			}
		default:
			t.Fatalf("JobIDKind %q", j.Kind)
		}
		if !strings.Contains(text, j.JobID) {
			t.Fatalf("JobID %q is not in the email", j.JobID)
		}
		if j.JobNumber != "" && !strings.Contains(text, strings.ToLower(j.JobNumber)) {
			t.Fatalf("JobNumber %q is not in the email", j.JobNumber)
		}
	})
}
