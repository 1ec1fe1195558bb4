package migration

import "strings"

// token is a piece of SQL text as a lexer sees it.
type token struct {
	kind tokenKind
	text string
}

type tokenKind int

const (
	tokCode    tokenKind = iota // words, numbers, punctuation and spaces
	tokComment                  // -- to the end of the line, or /* */ (which nest)
	tokString                   // '…', with '' standing for a quote
	tokQuoted                   // an identifier in [] or ""
)

// lex splits SQL (T-SQL or SQLite) into code, comments, string literals and
// quoted identifiers. An unterminated comment, string or identifier runs to
// the end of the text.
func lex(text string) []token {
	var out []token
	start := 0
	emit := func(kind tokenKind, end int) {
		if end > start {
			out = append(out, token{kind, text[start:end]})
		}
		start = end
	}
	for i := 0; i < len(text); {
		c := text[i]
		next := byte(0)
		if i+1 < len(text) {
			next = text[i+1]
		}
		switch {
		case c == '-' && next == '-':
			emit(tokCode, i)
			j := strings.IndexByte(text[i:], '\n')
			if j < 0 {
				j = len(text) - i
			}
			i += j
			emit(tokComment, i)
		case c == '/' && next == '*':
			emit(tokCode, i)
			depth := 0
			for i < len(text) {
				if strings.HasPrefix(text[i:], "/*") {
					depth++
					i += 2
				} else if strings.HasPrefix(text[i:], "*/") {
					depth--
					i += 2
					if depth == 0 {
						break
					}
				} else {
					i++
				}
			}
			emit(tokComment, i)
		case c == '\'' || c == '"' || c == '[':
			emit(tokCode, i)
			closer := c
			if c == '[' {
				closer = ']'
			}
			i++
			for i < len(text) {
				if text[i] == closer {
					if i+1 < len(text) && text[i+1] == closer {
						i += 2 // a doubled closer stands for itself
						continue
					}
					i++
					break
				}
				i++
			}
			kind := tokQuoted
			if c == '\'' {
				kind = tokString
			}
			emit(kind, i)
		default:
			i++
		}
	}
	emit(tokCode, len(text))
	return out
}

// Code returns SQL with its comments removed (a line comment leaves its line
// end, a block comment a space) and its string literals emptied (”), so
// that searches for keywords and names see only code. Quoted identifiers
// keep their quotes.
func Code(text string) string {
	var b strings.Builder
	for _, t := range lex(text) {
		switch t.kind {
		case tokComment:
			if strings.HasPrefix(t.text, "--") {
				continue // the newline after it is code
			}
			b.WriteByte(' ')
		case tokString:
			b.WriteString("''")
		default:
			b.WriteString(t.text)
		}
	}
	return b.String()
}

// NormaliseDefinition is the form in which two definitions of a module are
// compared: comments removed, runs of white space one space, code in lower
// case (names are compared the way a case-insensitive instance compares
// them), brackets dropped from identifiers that do not need them, the head
// (CREATE, CREATE OR ALTER or ALTER, PROC or PROCEDURE) made one, and
// semicolons (optional in T-SQL) dropped. String literals are kept as they
// are.
func NormaliseDefinition(def string) string {
	var b strings.Builder
	for _, t := range lex(def) {
		switch t.kind {
		case tokComment:
			b.WriteByte(' ')
		case tokString:
			b.WriteString(t.text)
		case tokQuoted:
			if inner, ok := unquote(t.text); ok && isPlainIdentifier(inner) {
				b.WriteString(strings.ToLower(inner))
			} else {
				b.WriteString(strings.ToLower(t.text))
			}
		default:
			// Statement terminators are optional in T-SQL: they do not
			// make two definitions differ.
			b.WriteString(strings.ReplaceAll(strings.ToLower(t.text), ";", " "))
		}
	}
	s := strings.Join(strings.Fields(b.String()), " ")
	s = spaceAroundPunct(s)
	for _, head := range []string{"create or alter procedure ", "create or alter proc ", "create procedure ", "create proc ",
		"alter procedure ", "alter proc "} {
		if strings.HasPrefix(s, head) {
			return "create procedure " + s[len(head):]
		}
	}
	for _, kind := range []string{"function ", "view ", "trigger "} {
		for _, head := range []string{"create or alter ", "create ", "alter "} {
			if strings.HasPrefix(s, head+kind) {
				return "create " + kind + s[len(head+kind):]
			}
		}
	}
	return s
}

// spaceAroundPunct drops the spaces beside punctuation, so "f (a, b)" and
// "f(a,b)" compare equal. Strings were already kept apart by the lexer and
// hold no unbalanced quote here.
func spaceAroundPunct(s string) string {
	var b strings.Builder
	inString := false
	prev := byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\'' {
			inString = !inString
		}
		if !inString && c == ' ' {
			next := byte(0)
			if i+1 < len(s) {
				next = s[i+1]
			}
			if isPunct(prev) || isPunct(next) {
				continue
			}
		}
		b.WriteByte(c)
		prev = c
	}
	return b.String()
}

func isPunct(c byte) bool { return strings.IndexByte("(),=<>+-*/%.", c) >= 0 }

// unquote strips the [] or "" around a quoted identifier; ok is false for
// one that never closes.
func unquote(q string) (string, bool) {
	if len(q) < 2 {
		return q, false
	}
	closer := q[0]
	if closer == '[' {
		closer = ']'
	}
	if q[len(q)-1] != closer {
		return q, false
	}
	return q[1 : len(q)-1], true
}

// isPlainIdentifier reports whether s can stand without brackets.
func isPlainIdentifier(s string) bool {
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r == '@' || r == '#' || r == '$' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}
