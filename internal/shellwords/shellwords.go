// Package shellwords turns a command line into words and back as a POSIX shell would for
// the plain cases: --client-cmd 'python3 "my lock.py"' is read into its words, and a
// spec's words are written back into a command a shell runs as they were. It quotes and
// splits; it never expands anything ($, *, ~ stay as they are).
package shellwords

import (
	"errors"
	"strings"
)

// Quote leaves a word of plain characters as it is and puts anything else in single
// quotes, the one quoting a POSIX shell takes literally.
func Quote(word string) string {
	plain := word != "" && strings.IndexFunc(word, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.,:/=+@%", r))
	}) < 0
	if plain {
		return word
	}
	return "'" + strings.ReplaceAll(word, "'", `'\''`) + "'"
}

// Join quotes each word and joins them with spaces: Split(Join(words)) is words.
func Join(words []string) string {
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = Quote(w)
	}
	return strings.Join(quoted, " ")
}

// Split reads a command line into words: blanks separate words, single quotes keep
// everything up to the next single quote, double quotes everything up to the next
// unescaped double quote (a backslash escapes \, " and $ in them), and a backslash
// outside quotes keeps the character after it.
func Split(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words, inWord = append(words, w.String()), false
				w.Reset()
			}
			continue
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, errors.New("a single quote is not closed")
			}
			w.WriteString(s[i+1 : i+1+end])
			i += end + 1
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\\\"$`", s[i+1]) >= 0 {
					i++
				}
				w.WriteByte(s[i])
			}
			if i == len(s) {
				return nil, errors.New("a double quote is not closed")
			}
		case c == '\\':
			if i+1 == len(s) {
				return nil, errors.New("a backslash ends the line")
			}
			i++
			w.WriteByte(s[i])
		default:
			w.WriteByte(c)
		}
		inWord = true
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}
