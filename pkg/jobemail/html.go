package jobemail

import (
	"html"
	"strings"
)

// MaxRead is how much of a body Extract and Text read: its first 256 KiB.
// A notification is a few hundred bytes; what lies beyond is not Prime's,
// and reading it would only let one huge mail cost the intake its time.
const MaxRead = 256 << 10

// Text reduces an HTML body to its text: tags and comments go, the contents
// of head, title, style and script go, block elements and <br> become line
// breaks, character references are decoded and no-break spaces become
// spaces. It is meant for reading a notification, not for rendering one:
// anything it cannot read as a tag stays as text. It reads the first
// MaxRead bytes of s, and its time is linear in them.
func Text(s string) string { return text(clip(s)) }

// clip is the first MaxRead bytes of s, less the word cut in two at the
// end, if any: a number or a GUID cut short would be another one.
func clip(s string) string {
	if len(s) <= MaxRead {
		return s
	}
	n := MaxRead
	for n > 0 && !wordEnds(s, n) && !wordEnds(s, n-1) {
		n-- // s[n-1] and s[n] are of one word
	}
	return s[:n]
}

// text is Text of the whole of s. Every byte is looked at a bounded number
// of times: a tag's end is found by one scan with its quotes (tags.tag), and
// a tag that starts inside a scan that failed is read without them.
func text(s string) string {
	var out strings.Builder
	out.Grow(len(s))
	t := tags{s: s, gt: -1}
	skip := "" // the element whose contents are being skipped
	for i := 0; i < len(s); {
		j := strings.IndexByte(s[i:], '<')
		if j < 0 {
			j = len(s)
		} else {
			j += i
		}
		if skip == "" {
			out.WriteString(s[i:j])
		}
		if i = j; i == len(s) {
			break
		}
		if strings.HasPrefix(s[i:], "<!--") {
			end := strings.Index(s[i+4:], "-->")
			if end < 0 {
				break // an unterminated comment runs to the end
			}
			i += 4 + end + 3
			continue
		}
		name, closing, n, ok := t.tag(i)
		if !ok {
			if skip == "" {
				out.WriteByte('<')
			}
			i++
			continue
		}
		i += n
		switch {
		case skip != "":
			if closing && name == skip {
				skip = ""
			}
		case !closing && skipped[name]:
			skip = name
		case blocks[name]:
			out.WriteByte('\n')
		case name == "td" || name == "th":
			out.WriteByte(' ')
		}
	}
	return strings.ReplaceAll(html.UnescapeString(out.String()), "\u00a0", " ")
}

// skipped are the elements whose contents are not text of the message.
var skipped = map[string]bool{"head": true, "title": true, "style": true, "script": true}

// blocks are the elements that break a line.
var blocks = map[string]bool{
	"br": true, "p": true, "div": true, "tr": true, "li": true, "ul": true, "ol": true, "table": true,
	"h1": true, "h2": true, "h3": true, "h4": true, "h5": true, "h6": true, "hr": true, "blockquote": true,
	"pre": true, "body": true,
}

// maxTag is the longest tag read as one.
const maxTag = 4096

// tags reads the tags of one body, front to back.
type tags struct {
	s string
	// gt is the first '>' at or after the last position nextGT was asked
	// about (len(s) when there is none; -1 before the first question).
	gt int
	// plain: a tag that starts before it is read up to its first '>',
	// quotes aside, because a scan with quotes ran there without an end.
	plain int
}

// nextGT is the index of the first '>' at or after i, or -1. The positions
// asked about never go back, so the body is scanned for '>' once.
func (t *tags) nextGT(i int) int {
	if t.gt < i {
		if k := strings.IndexByte(t.s[i:], '>'); k >= 0 {
			t.gt = i + k
		} else {
			t.gt = len(t.s)
		}
	}
	if t.gt == len(t.s) {
		return -1
	}
	return t.gt
}

// tag reads the tag that starts at s[i] ("<name …>", "</name>", "<!…>",
// "<?…>") and returns its lower-case name, whether it closes an element and
// its length. A tag ends at its first '>' outside quoted attribute values;
// when its quotes run on past maxTag bytes or the end of the body (a stray
// quote), at its first '>'. ok is false when s[i] does not start a tag, or
// the tag does not end within maxTag bytes.
func (t *tags) tag(i int) (name string, closing bool, n int, ok bool) {
	s := t.s[i:]
	if len(s) < 2 {
		return "", false, 0, false
	}
	k := 1
	switch c := s[1]; {
	case c == '/':
		closing = true
		k = 2
	case c == '!' || c == '?':
		n, ok = t.plainEnd(i, 2)
		return "", false, n, ok
	case !isLetter(c):
		return "", false, 0, false
	}
	start := k
	for k < len(s) && (isLetter(s[k]) || '0' <= s[k] && s[k] <= '9') {
		k++
	}
	if k == start {
		return "", false, 0, false
	}
	name = strings.ToLower(s[start:k])
	if i >= t.plain {
		limit := min(len(s), maxTag)
		var quote byte
		for j := k; j < limit; j++ {
			switch c := s[j]; {
			case quote != 0:
				if c == quote {
					quote = 0
				}
			case c == '"' || c == '\'':
				quote = c
			case c == '>':
				return name, closing, j + 1, true
			}
		}
		t.plain = i + limit
	}
	n, ok = t.plainEnd(i, k)
	return name, closing, n, ok
}

// plainEnd is the length of the tag at s[i] read up to its first '>' at or
// after s[i+from], and whether that is within maxTag.
func (t *tags) plainEnd(i, from int) (int, bool) {
	end := t.nextGT(i + from)
	if end < 0 || end-i >= maxTag {
		return 0, false
	}
	return end - i + 1, true
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
