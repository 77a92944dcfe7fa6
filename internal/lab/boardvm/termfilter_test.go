package boardvm

import (
	"bytes"
	"testing"
)

var filterCases = []struct {
	name, in, want string
}{
	{"text", "Linux version 6.1.0\r\nocfw: boot\r\n", "Linux version 6.1.0\r\nocfw: boot\r\n"},
	{"full reset", "summary\x1bcafter", "summaryafter"},
	{"auto-wrap off", "a\x1b[?7lb", "ab"},
	{"private modes", "\x1b[?25l\x1b[?1049h\x1b[?1000;1006h\x1b[?7h\x1b[>4;1m\x1b[=5u", ""},
	{"colours kept", "\x1b[0m\x1b[1;32mPASS\x1b[0m \x1b[38;5;196mFAIL\x1b[m", "\x1b[0m\x1b[1;32mPASS\x1b[0m \x1b[38;5;196mFAIL\x1b[m"},
	{"clear screen and scrollback", "x\x1b[2J\x1b[3J\x1b[H\x1b[Jy", "x\x1b[H\x1b[Jy"},
	{"erase kept", "\x1b[0J\x1b[1J\x1b[K\x1b[2K", "\x1b[0J\x1b[1J\x1b[K\x1b[2K"},
	{"cursor moves kept", "\x1b[10;20H\x1b[3A\x1b[2C\x1b7\x1b8\x1bM", "\x1b[10;20H\x1b[3A\x1b[2C\x1b7\x1b8\x1bM"},
	{"modes, regions, queries", "\x1b[4h\x1b[20l\x1b[1;24r\x1b[6n\x1b[c\x1b[8;50;100t\x1b[!p\x1b[2 q", ""},
	{"keypad and charsets", "\x1b=\x1b>\x1b(0\x1b)B\x1b#8line\x0e\x0fdrawing", "linedrawing"},
	{"OSC title and clipboard", "\x1b]0;title\x07a\x1b]52;c;Zm9v\x1b\\b", "ab"},
	{"DCS", "\x1bP1$r0m\x1b\\c", "c"},
	{"cancelled", "\x1b[?7\x18l", "l"},
	{"newline inside a sequence", "\x1b[?7\nl", "\n"},
	{"overlong CSI", "\x1b[" + string(bytes.Repeat([]byte("1;"), 50)) + "mz", "z"},
	{"string without ST", "\x1b]0;t\x1b[1mB", "\x1b[1mB"},
	{"UTF-8", "§ – ü\r\n", "§ – ü\r\n"},
}

// Each stream comes out the same whole, split in two at every byte, and
// one byte per write.
func TestTermFilter(t *testing.T) {
	for _, tc := range filterCases {
		t.Run(tc.name, func(t *testing.T) {
			in := []byte(tc.in)
			var whole bytes.Buffer
			NewTermFilter(&whole).Write(in)
			if whole.String() != tc.want {
				t.Fatalf("%q -> %q, want %q", tc.in, whole.String(), tc.want)
			}
			for i := 1; i < len(in); i++ {
				var out bytes.Buffer
				f := NewTermFilter(&out)
				if n, err := f.Write(in[:i]); n != i || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
				f.Write(in[i:])
				if out.String() != tc.want {
					t.Errorf("split at %d (%q | %q): %q, want %q", i, in[:i], in[i:], out.String(), tc.want)
				}
			}
			var bytewise bytes.Buffer
			f := NewTermFilter(&bytewise)
			for i := range in {
				f.Write(in[i : i+1])
			}
			if bytewise.String() != tc.want {
				t.Errorf("byte by byte: %q, want %q", bytewise.String(), tc.want)
			}
		})
	}
}

// The console as the firmware prints it: the reset and the wrap-off at
// the start of the shell, split across reads as QEMU's pipe delivers.
func TestTermFilterConsole(t *testing.T) {
	var out bytes.Buffer
	f := NewTermFilter(&out)
	for _, chunk := range []string{"ocfw: boot sequence done; shell on console\r\n\x1b", "c\x1b[?", "7l$ ", "ls\r\n"} {
		f.Write([]byte(chunk))
	}
	if want := "ocfw: boot sequence done; shell on console\r\n$ ls\r\n"; out.String() != want {
		t.Errorf("%q, want %q", out.String(), want)
	}
	if got := Sanitize("a\x1bc\x1b[?7lb\x1b[31mc"); got != "ab\x1b[31mc" {
		t.Errorf("Sanitize: %q", got)
	}
}
