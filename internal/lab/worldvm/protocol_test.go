package worldvm

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestSplitWords(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		err  bool
	}{
		{"tcp lan 10.0.0.1:7 hello", []string{"tcp", "lan", "10.0.0.1:7", "hello"}, false},
		{`  tcp  lan "two words" x `, []string{"tcp", "lan", "two words", "x"}, false},
		{`ssh "a \"q\" \\ b"`, []string{"ssh", `a "q" \ b`}, false},
		{`x "unterminated`, nil, true},
		{`x "a"b`, nil, true},
		{"", nil, false},
	}
	for _, tt := range tests {
		got, err := SplitWords(tt.in)
		if (err != nil) != tt.err || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("SplitWords(%q) = %q, %v; want %q (error %v)", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestQuoteRoundTrip(t *testing.T) {
	for _, s := range []string{"plain", "two words", `q"uote`, `back\slash`, "", "tab\there", "new\nline", "ünï"} {
		q := Quote(s)
		got, err := SplitWords("cmd " + q + " end")
		if err != nil || len(got) != 3 || got[1] != s {
			t.Errorf("Quote(%q) = %s: split back %q, %v", s, q, got, err)
		}
		if strings.ContainsAny(q, "\n\r") {
			t.Errorf("Quote(%q) = %q spans lines", s, q)
		}
	}
	if Quote("plain") != "plain" {
		t.Error("a plain word is quoted")
	}
}

func TestParseRequest(t *testing.T) {
	r, err := ParseRequest(`7 timeout=3s tcp lan 10.0.0.1:7 "a b"`)
	if err != nil {
		t.Fatal(err)
	}
	want := Request{Seq: 7, Timeout: 3 * time.Second, Words: []string{"tcp", "lan", "10.0.0.1:7", "a b"}}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("got %+v, want %+v", r, want)
	}
	for _, bad := range []string{"", "x help", "3", "3 timeout=x help", "3 timeout=1s"} {
		if _, err := ParseRequest(bad); err == nil {
			t.Errorf("ParseRequest(%q) accepted", bad)
		}
	}
	// A bad request that has a number can still be answered.
	if r, _ := ParseRequest("4 timeout=x help"); r.Seq != 4 {
		t.Errorf("seq %d", r.Seq)
	}
}

// The host's reply pattern (as in Do) finds exactly the reply lines
// FormatReply makes, whatever the text holds.
func TestReplyFormat(t *testing.T) {
	for _, tc := range []struct {
		text string
		err  error
	}{
		{"from 10.0.0.2:4000\nhello", nil},
		{`quote " and \ backslash`, nil},
		{"", errors.New(`refused: dial tcp: "x"`)},
		{"ünïcode\x00", nil},
	} {
		line := FormatReply(12, tc.text, tc.err)
		if strings.ContainsAny(line, "\r\n") || strings.IndexFunc(line, func(r rune) bool { return r > 127 }) >= 0 {
			t.Errorf("reply %q is not one ASCII line", line)
		}
		re := regexp.MustCompile(`(` + MarkOK + `|` + MarkErr + `) 12 ("(?:[^"\\\r\n]|\\.)*")\r?\n`)
		m := re.FindStringSubmatch("noise WORLD-OK 1 \"x\"\r\n" + line + "\r\n")
		if m == nil {
			t.Fatalf("no match in %q", line)
		}
		got, err := strconv.Unquote(m[2])
		if err != nil {
			t.Fatal(err)
		}
		want := tc.text
		if tc.err != nil {
			want = tc.err.Error()
		}
		if got != want || (m[1] == MarkErr) != (tc.err != nil) {
			t.Errorf("reply %q read back as %s %q", line, m[1], got)
		}
	}
}

func TestErrorKind(t *testing.T) {
	err := fmt.Errorf("step: %w", &ReplyError{Command: "tcp lan x", Text: "refused: dial tcp: connection refused"})
	if k := ErrorKind(err); k != "refused" {
		t.Errorf("kind %q", k)
	}
	if k := ErrorKind(errors.New("other")); k != "" {
		t.Errorf("kind %q", k)
	}
}
