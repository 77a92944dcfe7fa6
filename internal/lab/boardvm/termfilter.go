package boardvm

import (
	"io"
	"strings"
)

// TermFilter passes the guest's console to the user's terminal without
// the escape sequences that would change the terminal itself: the
// firmware's kernel and shell send ESC c (full reset: the build summary
// above is wiped) and ESC[?7l (auto-wrap off: long lines stay cut until
// `reset`). It keeps text, colours (SGR), cursor movement and line
// erasing, and drops everything else:
//
//   - ESC c and every other ESC sequence but ESC 7, 8, D, E, M (cursor
//     save/restore, index, next line, reverse index): keypad modes,
//     character set designations (ESC ( 0 turns text into line drawing),
//     ESC # 8;
//   - CSI sequences with a private marker (CSI ?...h/l and the like:
//     wrap, cursor, alternate screen, mouse), with intermediates, and
//     with final bytes other than SGR, cursor movement and editing: modes
//     (h, l), scroll regions (r), device queries the terminal would
//     answer (c, n), window operations (t); CSI 2J and 3J (erase the
//     screen or the scrollback) but not CSI J / 0J / 1J;
//   - OSC, DCS, SOS, PM and APC strings (titles, clipboard writes);
//   - SO and SI (switching to the G1 character set).
//
// A sequence split across writes is caught: the filter keeps its state
// between Write calls.
type TermFilter struct {
	w     io.Writer
	state filterState
	seq   []byte // the escape sequence so far
}

type filterState int

const (
	ground   filterState = iota
	escape               // after ESC
	escInter             // ESC and intermediate bytes: dropped at its final byte
	csi                  // ESC [ and parameters
	csiDrop              // an overlong CSI sequence, dropped up to its final byte
	str                  // OSC, DCS, SOS, PM or APC string, dropped
	strEsc               // ESC inside a string: ST (ESC \) ends it
)

// maxSequence bounds a CSI sequence held back; a longer one is garbage.
const maxSequence = 64

// NewTermFilter returns a TermFilter writing to w.
func NewTermFilter(w io.Writer) *TermFilter { return &TermFilter{w: w} }

// Write filters p and writes what is kept. It reports all of p written
// (a partial escape sequence is held until the rest comes).
func (f *TermFilter) Write(p []byte) (int, error) {
	out := make([]byte, 0, len(p))
	for i := 0; i < len(p); i++ {
		out = f.step(out, p[i])
	}
	if len(out) > 0 {
		if _, err := f.w.Write(out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// step feeds one byte to the state machine, appending what it lets
// through to out.
func (f *TermFilter) step(out []byte, c byte) []byte {
	const esc, bel, can, sub, so, si = 0x1b, 0x07, 0x18, 0x1a, 0x0e, 0x0f
	switch f.state {
	case ground:
		switch c {
		case esc:
			f.state, f.seq = escape, append(f.seq[:0], c)
		case so, si:
		default:
			out = append(out, c)
		}
		return out
	case str:
		switch c {
		case bel, can, sub:
			f.state = ground // BEL ends an OSC string; CAN and SUB cancel
		case esc:
			f.state = strEsc
		}
		return out
	case strEsc:
		if c == '\\' {
			f.state = ground
			return out
		}
		// The string ended without ST: the ESC starts a new sequence.
		f.state, f.seq = escape, append(f.seq[:0], esc)
		return f.step(out, c)
	}
	// Inside ESC or CSI: CAN and SUB cancel the sequence, ESC starts a
	// new one, other C0 controls act at once (as terminals do).
	switch {
	case c == can || c == sub:
		f.state = ground
		return out
	case c == esc:
		f.state, f.seq = escape, append(f.seq[:0], c)
		return out
	case c < 0x20 || c == 0x7f:
		if c == so || c == si || c == 0x7f {
			return out
		}
		return append(out, c)
	}
	switch f.state {
	case escape:
		f.seq = append(f.seq, c)
		switch {
		case c == '[':
			f.state = csi
		case c == ']' || c == 'P' || c == 'X' || c == '^' || c == '_':
			f.state = str
		case c >= 0x20 && c <= 0x2f:
			f.state = escInter
		default:
			f.state = ground
			switch c {
			case '7', '8', 'D', 'E', 'M':
				out = append(out, f.seq...)
			}
		}
	case escInter:
		if c >= 0x30 {
			f.state = ground // a designation or other setting: dropped
		}
	case csi:
		f.seq = append(f.seq, c)
		if c >= 0x40 && c <= 0x7e {
			f.state = ground
			if keepCSI(f.seq[2:len(f.seq)-1], c) {
				out = append(out, f.seq...)
			}
		} else if len(f.seq) > maxSequence {
			f.state = csiDrop
		}
	case csiDrop:
		if c >= 0x40 && c <= 0x7e {
			f.state = ground
		}
	}
	return out
}

// keepCSI says whether CSI params final leaves the terminal's settings
// alone: SGR, cursor movement, erasing within the screen, editing.
func keepCSI(params []byte, final byte) bool {
	for i, b := range params {
		if b < 0x30 || b > 0x3f { // an intermediate byte: CSI ! p, CSI SP q, ...
			return false
		}
		if i == 0 && b >= '<' { // a private marker: < = > ?
			return false
		}
	}
	switch final {
	case 'm', // SGR: colours and attributes
		'A', 'B', 'C', 'D', 'E', 'F', 'G', 'H', 'f', 'd', 'e', 'a', '`', // cursor
		'K', 'X', '@', 'P', 'L', 'M', 'S', 'T': // erase in line, edit, scroll
		return true
	case 'J': // erase below or above the cursor, not the screen or the scrollback
		p := string(params)
		return p == "" || p == "0" || p == "1"
	case 's', 'u': // save and restore the cursor
		return len(params) == 0
	}
	return false
}

// Sanitize is s with what TermFilter drops removed, for console text
// quoted in messages.
func Sanitize(s string) string {
	var b strings.Builder
	NewTermFilter(&b).Write([]byte(s))
	return b.String()
}
