package jobemail

import (
	"html"
	"strings"
)

// Text reduces an HTML body to its text: tags and comments go, the contents
// of head, title, style and script go, block elements and <br> become line
// breaks, character references are decoded and no-break spaces become
// spaces. It is meant for reading a notification, not for rendering one:
// anything it cannot read as a tag stays as text.
func Text(s string) string {
	var out strings.Builder
	out.Grow(len(s))
	skip := "" // the element whose contents are being skipped
	for len(s) > 0 {
		i := strings.IndexByte(s, '<')
		if i < 0 {
			i = len(s)
		}
		if skip == "" {
			out.WriteString(s[:i])
		}
		s = s[i:]
		if s == "" {
			break
		}
		if strings.HasPrefix(s, "<!--") {
			end := strings.Index(s[4:], "-->")
			if end < 0 {
				break // an unterminated comment runs to the end
			}
			s = s[4+end+3:]
			continue
		}
		name, closing, n, ok := tag(s)
		if !ok {
			if skip == "" {
				out.WriteByte('<')
			}
			s = s[1:]
			continue
		}
		s = s[n:]
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

// tag reads the tag that s starts with ("<name …>", "</name>", "<!…>",
// "<?…>") and returns its lower-case name, whether it closes an element and
// its length. Quoted attribute values may hold '>'. ok is false when s does
// not start a tag, or the tag does not end within maxTag bytes (so that a
// stray quote cannot make every later '<' read to the end of the body).
func tag(s string) (name string, closing bool, n int, ok bool) {
	s = s[:min(len(s), maxTag)]
	if len(s) < 2 {
		return "", false, 0, false
	}
	i := 1
	switch c := s[1]; {
	case c == '/':
		closing = true
		i = 2
	case c == '!' || c == '?':
		end := strings.IndexByte(s, '>')
		return "", false, end + 1, end > 0
	case !isLetter(c):
		return "", false, 0, false
	}
	start := i
	for i < len(s) && (isLetter(s[i]) || '0' <= s[i] && s[i] <= '9') {
		i++
	}
	if i == start {
		return "", false, 0, false
	}
	name = strings.ToLower(s[start:i])
	var quote byte
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '>':
			return name, closing, i + 1, true
		}
	}
	return "", false, 0, false
}

// maxTag is the longest tag read as one.
const maxTag = 4096

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
