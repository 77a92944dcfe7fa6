package kcrypto

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// The crypto user configuration API (include/uapi/linux/cryptouser.h,
// crypto/crypto_user.c; module crypto_user, CONFIG_CRYPTO_USER).
const (
	msgUpdateAlg = 0x12 // CRYPTO_MSG_UPDATEALG
	msgGetAlg    = 0x13 // CRYPTO_MSG_GETALG

	attrPriority = 1 // CRYPTOCFGA_PRIORITY_VAL, __u32
	// CRYPTOCFGA_REPORT_LARVAL (2) to CRYPTOCFGA_REPORT_ACOMP (11) each
	// start with char type[64]: "skcipher", "shash", "cipher", ...
	attrReportFirst = 2
	attrReportLast  = 11

	maxName = 64 // CRYPTO_MAX_NAME in the uapi struct (the kernel's own limit may be larger)

	// struct crypto_user_alg: three char[64] names, then four __u32
	// (type, mask, refcnt, flags). No pointers and no 64-bit fields, so
	// the layout is the same on 386, arm and amd64.
	userAlgSize = 3*maxName + 4*4
	offType     = 3 * maxName
	offMask     = offType + 4
	offRefcnt   = offType + 8
	offFlags    = offType + 12

	nlmsgHdrLen = unix.SizeofNlMsghdr // 16
	nlattrLen   = unix.SizeofNlAttr   // 4
)

// Flags of a crypto_alg (include/linux/crypto.h) as GETALG reports them.
const (
	FlagTypeMask       = 0x0000000f
	FlagLarval         = 0x00000010
	FlagDead           = 0x00000020
	FlagDying          = 0x00000040
	FlagAsync          = 0x00000080
	FlagNeedFallback   = 0x00000100
	FlagTested         = 0x00000400
	FlagInstance       = 0x00000800 // built from a template, e.g. cbc(aes-generic)
	FlagKernDriverOnly = 0x00001000 // hardware reached only through a driver
	FlagInternal       = 0x00002000
)

// netlinkCrypto is NETLINK_CRYPTO (include/uapi/linux/netlink.h).
const netlinkCrypto = unix.NETLINK_CRYPTO

// All the boards are little-endian (the firmware refuses big-endian ARM
// kernels), as is every host the tests run on: netlink uses host order.
var order = binary.LittleEndian

// putName writes s NUL-terminated into a char[64] field.
func putName(b []byte, s string) error {
	if len(s) >= maxName {
		return fmt.Errorf("%q is %d bytes; the crypto user API takes names under %d", s, len(s), maxName)
	}
	copy(b, s)
	return nil
}

// updateMsg is an UPDATEALG request for driver: with prio set, the new
// priority; without, it only drops the instances built on driver.
func updateMsg(seq uint32, driver string, prio *uint32) ([]byte, error) {
	n := nlmsgHdrLen + userAlgSize
	if prio != nil {
		n += nlattrLen + 4
	}
	b := make([]byte, n)
	order.PutUint32(b[0:], uint32(n))
	order.PutUint16(b[4:], msgUpdateAlg)
	order.PutUint16(b[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	order.PutUint32(b[8:], seq)
	alg := b[nlmsgHdrLen : nlmsgHdrLen+userAlgSize]
	if err := putName(alg[maxName:2*maxName], driver); err != nil {
		return nil, err
	}
	if prio != nil {
		a := b[nlmsgHdrLen+userAlgSize:]
		order.PutUint16(a[0:], nlattrLen+4)
		order.PutUint16(a[2:], attrPriority)
		order.PutUint32(a[4:], *prio)
	}
	return b, nil
}

// getMsg is a GETALG request for one algorithm by driver name.
func getMsg(seq uint32, driver string) ([]byte, error) {
	n := nlmsgHdrLen + userAlgSize
	b := make([]byte, n)
	order.PutUint32(b[0:], uint32(n))
	order.PutUint16(b[4:], msgGetAlg)
	order.PutUint16(b[6:], unix.NLM_F_REQUEST)
	order.PutUint32(b[8:], seq)
	if err := putName(b[nlmsgHdrLen+maxName:nlmsgHdrLen+2*maxName], driver); err != nil {
		return nil, err
	}
	return b, nil
}

func cstring(b []byte) string {
	if i := strings.IndexByte(string(b), 0); i >= 0 {
		return string(b[:i])
	}
	return string(b)
}

// parseAlg reads a GETALG reply's payload: struct crypto_user_alg, then
// attributes.
func parseAlg(p []byte) (Alg, error) {
	if len(p) < userAlgSize {
		return Alg{}, fmt.Errorf("GETALG reply of %d bytes, want at least %d", len(p), userAlgSize)
	}
	a := Alg{
		Name:   cstring(p[0:maxName]),
		Driver: cstring(p[maxName : 2*maxName]),
		Module: cstring(p[2*maxName : 3*maxName]),
		Refcnt: int(order.Uint32(p[offRefcnt:])),
		Flags:  order.Uint32(p[offFlags:]),
	}
	a.Async = a.Flags&FlagAsync != 0
	a.Internal = a.Flags&FlagInternal != 0
	if a.Flags&FlagTested != 0 {
		a.SelfTest = "passed"
	} else {
		a.SelfTest = "unknown"
	}
	for rest := p[userAlgSize:]; len(rest) >= nlattrLen; {
		l := int(order.Uint16(rest[0:]))
		typ := order.Uint16(rest[2:]) & 0x3fff // without NLA_F_NESTED/NET_BYTEORDER
		if l < nlattrLen || l > len(rest) {
			return a, fmt.Errorf("GETALG reply: attribute %d has length %d of %d left", typ, l, len(rest))
		}
		val := rest[nlattrLen:l]
		switch {
		case typ == attrPriority && len(val) >= 4:
			a.Priority = int(order.Uint32(val))
		case typ >= attrReportFirst && typ <= attrReportLast:
			a.Type = cstring(val[:min(len(val), maxName)])
		}
		al := (l + 3) &^ 3
		if al > len(rest) {
			break
		}
		rest = rest[al:]
	}
	return a, nil
}

// ErrNoCryptoUser is returned when the kernel has no crypto user API:
// module crypto_user not loaded (or CONFIG_CRYPTO_USER off).
var ErrNoCryptoUser = errors.New("the kernel crypto user API (NETLINK_CRYPTO) is missing: load module crypto_user (CONFIG_CRYPTO_USER)")

// Error is a refused crypto user API request, with what was asked and
// what the errno means here.
type Error struct {
	Op     string // e.g. "set priority of cbc-aes-geode to 1"
	Errno  unix.Errno
	Driver string
}

func (e *Error) Error() string {
	var why string
	switch e.Errno {
	case unix.EPERM:
		why = "permission denied: changing the kernel's crypto priorities needs CAP_NET_ADMIN (run as root)"
	case unix.ENOENT:
		why = fmt.Sprintf("the kernel has no algorithm with driver name %q (exact driver names are in /proc/crypto; `ocf engines` lists them)", e.Driver)
	case unix.EINVAL:
		why = "the kernel refused the request as malformed (EINVAL)"
	default:
		why = e.Errno.Error()
	}
	return "kcrypto: " + e.Op + ": " + why
}

func (e *Error) Unwrap() error { return e.Errno }

// conn is a NETLINK_CRYPTO socket.
type conn struct {
	fd  int
	seq uint32
}

func dial() (*conn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, netlinkCrypto)
	if err != nil {
		if errors.Is(err, unix.EPROTONOSUPPORT) {
			return nil, ErrNoCryptoUser
		}
		return nil, fmt.Errorf("kcrypto: netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("kcrypto: bind netlink socket: %w", err)
	}
	// Replies come at once; a bound wait keeps a kernel that never
	// answers from hanging the boot.
	tv := unix.Timeval{Sec: 5}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("kcrypto: netlink socket timeout: %w", err)
	}
	return &conn{fd: fd, seq: uint32(os.Getpid())}, nil
}

func (c *conn) close() { unix.Close(c.fd) }

// do sends one request and returns the first reply that is not an
// acknowledgement (nil for a plain ack); a kernel error comes back as
// *Error.
func (c *conn) do(msg []byte, op, driver string) ([]byte, error) {
	c.seq++
	order.PutUint32(msg[8:], c.seq)
	if err := unix.Sendto(c.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("kcrypto: %s: send: %w", op, err)
	}
	buf := make([]byte, 16<<10)
	for {
		n, _, err := unix.Recvfrom(c.fd, buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("kcrypto: %s: receive: %w", op, err)
		}
		msgs, err := parseMessages(buf[:n])
		if err != nil {
			return nil, fmt.Errorf("kcrypto: %s: %w", op, err)
		}
		for _, m := range msgs {
			if m.seq != c.seq {
				continue
			}
			switch m.typ {
			case unix.NLMSG_ERROR:
				if len(m.data) < 4 {
					return nil, fmt.Errorf("kcrypto: %s: short netlink error message", op)
				}
				if code := int32(order.Uint32(m.data)); code != 0 {
					return nil, &Error{Op: op, Errno: unix.Errno(-code), Driver: driver}
				}
				return nil, nil
			case unix.NLMSG_DONE:
				return nil, nil
			default:
				return m.data, nil
			}
		}
	}
}

// SetPriority sets the priority of the algorithm registered under the
// exact driver name. The kernel also drops every instance built on it
// (cbc(aes-generic) when aes-generic changes, authenc(...) on top of
// those), so the next user of a generic name gets an instance built on
// whatever is then the best: existing users keep what they hold.
func SetPriority(driver string, prio uint32) error {
	return update(driver, &prio, fmt.Sprintf("set priority of %s to %d", driver, prio))
}

// Flush drops the instances the kernel built on driver (template
// instances such as cbc(...) over it, authenc(...) over those) without
// changing its priority, so that they are rebuilt on the current best
// implementation at the next lookup.
func Flush(driver string) error {
	return update(driver, nil, "drop instances built on "+driver)
}

func update(driver string, prio *uint32, op string) error {
	if driver == "" {
		return fmt.Errorf("kcrypto: %s: empty driver name", op)
	}
	msg, err := updateMsg(0, driver, prio)
	if err != nil {
		return fmt.Errorf("kcrypto: %s: %w", op, err)
	}
	c, err := dial()
	if err != nil {
		return err
	}
	defer c.close()
	_, err = c.do(msg, op, driver)
	return err
}

// Get asks the kernel for the algorithm registered under driver (by
// exact driver name) as the crypto user API reports it, flags included.
func Get(driver string) (Alg, error) {
	op := "get " + driver
	msg, err := getMsg(0, driver)
	if err != nil {
		return Alg{}, fmt.Errorf("kcrypto: %s: %w", op, err)
	}
	c, err := dial()
	if err != nil {
		return Alg{}, err
	}
	defer c.close()
	p, err := c.do(msg, op, driver)
	if err != nil {
		return Alg{}, err
	}
	if p == nil {
		return Alg{}, fmt.Errorf("kcrypto: %s: no reply", op)
	}
	return parseAlg(p)
}

type message struct {
	typ  uint16
	seq  uint32
	data []byte
}

// parseMessages splits a netlink datagram into its messages.
func parseMessages(b []byte) ([]message, error) {
	var out []message
	for len(b) >= nlmsgHdrLen {
		l := int(order.Uint32(b[0:]))
		if l < nlmsgHdrLen || l > len(b) {
			return out, fmt.Errorf("netlink message of length %d with %d bytes left", l, len(b))
		}
		out = append(out, message{typ: order.Uint16(b[4:]), seq: order.Uint32(b[8:]), data: b[nlmsgHdrLen:l]})
		al := (l + 3) &^ 3
		if al >= len(b) {
			break
		}
		b = b[al:]
	}
	return out, nil
}
