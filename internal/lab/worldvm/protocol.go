package worldvm

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// The serial-console protocol between World.Do and the agent.
//
// The host types one request line: a sequence number, optionally
// "timeout=DURATION", then the command and its arguments, separated by
// spaces; an argument with spaces or quotes is written as a Go string
// literal (Quote). The agent answers with exactly one line,
//
//	WORLD-OK SEQ "text"
//	WORLD-ERR SEQ "text"
//
// where the text is a Go string literal (ASCII only), so a reply of many
// lines still takes one console line and cannot be confused with kernel
// messages or with another reply. An error's text starts with a one-word
// kind (ErrorKind) followed by a colon.
const (
	MarkReady = "WORLD-READY" // the agent serves commands; followed by the kernel uptime
	MarkFail  = "WORLD-FAIL"  // the agent could not start; followed by why
	MarkOK    = "WORLD-OK"
	MarkErr   = "WORLD-ERR"
)

// FormatReply is the agent's reply line (without the newline) to the
// request with number seq.
func FormatReply(seq int, text string, err error) string {
	if err != nil {
		return fmt.Sprintf("%s %d %s", MarkErr, seq, strconv.QuoteToASCII(err.Error()))
	}
	return fmt.Sprintf("%s %d %s", MarkOK, seq, strconv.QuoteToASCII(text))
}

// Request is a parsed request line.
type Request struct {
	Seq     int
	Timeout time.Duration // 0: the command's default
	Words   []string      // the command and its arguments
}

// ParseRequest parses a request line.
func ParseRequest(line string) (Request, error) {
	words, err := SplitWords(line)
	if err != nil {
		return Request{}, err
	}
	if len(words) == 0 {
		return Request{}, errors.New("empty request")
	}
	seq, err := strconv.Atoi(words[0])
	if err != nil || seq < 0 {
		return Request{}, fmt.Errorf("request %q: want a sequence number first", line)
	}
	r := Request{Seq: seq, Words: words[1:]}
	if len(r.Words) > 0 && strings.HasPrefix(r.Words[0], "timeout=") {
		d, err := time.ParseDuration(strings.TrimPrefix(r.Words[0], "timeout="))
		if err != nil || d <= 0 {
			return r, fmt.Errorf("request %q: bad %s", line, r.Words[0])
		}
		r.Timeout, r.Words = d, r.Words[1:]
	}
	if len(r.Words) == 0 {
		return r, fmt.Errorf("request %q: no command", line)
	}
	return r, nil
}

// SplitWords splits a command line into words at spaces; a word that
// starts with a double quote is a Go string literal.
func SplitWords(s string) ([]string, error) {
	var words []string
	for {
		s = strings.TrimLeftFunc(s, unicode.IsSpace)
		if s == "" {
			return words, nil
		}
		if s[0] == '"' {
			lit, err := strconv.QuotedPrefix(s)
			if err != nil {
				return nil, fmt.Errorf("unterminated or bad quoted word in %q", s)
			}
			w, _ := strconv.Unquote(lit)
			words = append(words, w)
			s = s[len(lit):]
			if s != "" && !unicode.IsSpace(rune(s[0])) {
				return nil, fmt.Errorf("a quoted word must end at a space: %q", s)
			}
			continue
		}
		i := strings.IndexFunc(s, unicode.IsSpace)
		if i < 0 {
			i = len(s)
		}
		words = append(words, s[:i])
		s = s[i:]
	}
}

// Quote returns s as one word of a command line: unchanged when it is a
// plain word, else as a Go string literal.
func Quote(s string) string {
	if s != "" && !strings.ContainsAny(s, "\"\\") && strings.IndexFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || !unicode.IsPrint(r) || r > unicode.MaxASCII
	}) < 0 {
		return s
	}
	return strconv.QuoteToASCII(s)
}

// ReplyError is a command the agent ran and reported as failed.
type ReplyError struct {
	Command string
	Text    string // "kind: details"
}

func (e *ReplyError) Error() string { return fmt.Sprintf("world: %s: %s", e.Command, e.Text) }

// Kind is the error's first word: refused, timeout, no-route,
// unreachable, auth, usage, ... (see the agent's documentation).
func (e *ReplyError) Kind() string {
	k, _, _ := strings.Cut(e.Text, ":")
	return k
}

// ErrorKind returns the kind of a *ReplyError in err's chain, or "".
func ErrorKind(err error) string {
	var re *ReplyError
	if errors.As(err, &re) {
		return re.Kind()
	}
	return ""
}
