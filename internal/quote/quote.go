// Package quote quotes values in error messages: whole when they are short, and when they
// are long only their first few hundred characters and how long they were, so that a
// 100 KB field in a history line, a flag or a suite file gives a one-line error and not
// a 100 KB one. Every message that shows a value it was given quotes it through here.
package quote

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// limit is how many characters of a value's quoted form a message shows.
const limit = 200

// ellipsis ends a value that was cut.
const ellipsis = "…"

// Short is v quoted as %q quotes it, or, when that would take more than a few hundred
// characters, its start and its length: "aaaa…" (102400 bytes). An escape (\x00, \u202e)
// counts as the characters it prints and is never cut in two.
func Short[S ~string](v S) string {
	s := string(v)
	if len(s) <= limit { // a longer s quotes longer still: no need to quote it whole
		if q := strconv.Quote(s); len(q) <= limit+2 {
			return q
		}
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); {
		_, n := utf8.DecodeRuneInString(s[i:])
		// Quote escapes one rune (or one invalid byte) as it does inside the whole of s.
		q := strconv.Quote(s[i : i+n])
		q = q[1 : len(q)-1]
		if b.Len()-1+len(q) > limit {
			break
		}
		b.WriteString(q)
		i += n
	}
	fmt.Fprintf(&b, "%s\" (%d bytes)", ellipsis, len(s))
	return b.String()
}

// ShortenAll shortens as Short does every quoted string and every other word in msg that
// would show more than a few hundred characters. It is for messages other packages wrote,
// which quote a value whole (encoding/json's unknown field, flag's invalid value, time's
// invalid duration) or show it unquoted (a number too long for an int).
func ShortenAll(msg string) string {
	if len(msg) <= limit { // nothing in it can be too long
		return msg
	}
	var b strings.Builder
	for len(msg) > 0 {
		if q, ok := quotedPrefix(msg); ok {
			if len(q) > limit+len(`""`+ellipsis) { // longer than what Short gives
				v, _ := strconv.Unquote(q)
				b.WriteString(Short(v))
			} else {
				b.WriteString(q)
			}
			msg = msg[len(q):]
			continue
		}
		if msg[0] == ' ' {
			b.WriteByte(' ')
			msg = msg[1:]
			continue
		}
		// A word runs to the next space or quote.
		n := len(msg)
		if i := strings.IndexAny(msg[1:], " \""); i >= 0 {
			n = i + 1
		}
		if word := msg[:n]; len(word) > limit {
			b.WriteString(Short(word))
		} else {
			b.WriteString(word)
		}
		msg = msg[n:]
	}
	return b.String()
}

// quotedPrefix is the string in double quotes msg begins with, if it begins with one.
func quotedPrefix(msg string) (string, bool) {
	if msg[0] != '"' {
		return "", false
	}
	q, err := strconv.QuotedPrefix(msg)
	return q, err == nil
}
