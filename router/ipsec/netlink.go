package ipsec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/internal/cabi"
)

// Handle is a NETLINK_XFRM socket. It opens that family only: a handle
// that also opened NETLINK_NETFILTER (as netlink.NewHandle() does by
// default) would fail on a box where nfnetlink is not loaded yet. A
// Handle is safe for use by several goroutines (requests are serialised).
type Handle struct {
	mu   sync.Mutex
	fd   int
	seq  uint32
	arch cabi.Arch
}

// replyTimeout bounds the wait for the kernel's answer to one request.
const replyTimeout = 10 * time.Second

// Open opens an XFRM socket in the calling thread's network namespace.
// It fails with EPROTONOSUPPORT when xfrm_user is not loaded.
func Open() (*Handle, error) {
	a, err := HostArch()
	if err != nil {
		return nil, err
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_XFRM)
	if err != nil {
		return nil, fmt.Errorf("ipsec: opening the XFRM netlink socket: %w%s", err, hint(err, "socket"))
	}
	h := &Handle{fd: fd, arch: a}
	if err := h.setup(); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return h, nil
}

// OpenInNetNS opens an XFRM socket in the network namespace the open
// file descriptor nsFD refers to (/proc/PID/ns/net); the socket stays
// there, whichever thread uses it.
func OpenInNetNS(nsFD int) (*Handle, error) {
	type result struct {
		h   *Handle
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			done <- result{err: fmt.Errorf("ipsec: %w", err)}
			return
		}
		defer unix.Close(orig)
		if err := unix.Setns(nsFD, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("ipsec: entering the network namespace: %w", err)}
			return
		}
		h, err := Open()
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			// The thread stays locked and ends with this goroutine
			// rather than serve others from the wrong namespace.
			if h != nil {
				h.Close()
			}
			done <- result{err: fmt.Errorf("ipsec: back to the original network namespace: %w", err)}
			return
		}
		runtime.UnlockOSThread()
		done <- result{h, err}
	}()
	r := <-done
	return r.h, r.err
}

func (h *Handle) setup() error {
	if err := unix.Bind(h.fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("ipsec: binding the XFRM socket: %w", err)
	}
	tv := unix.NsecToTimeval(replyTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(h.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return fmt.Errorf("ipsec: %w", err)
	}
	// Extended acks carry the kernel's reason for a refusal, where it
	// gives one; kernels without them ignore the option.
	_ = unix.SetsockoptInt(h.fd, unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, 1)
	_ = unix.SetsockoptInt(h.fd, unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1)
	return nil
}

// Close closes the socket.
func (h *Handle) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fd < 0 {
		return nil
	}
	err := unix.Close(h.fd)
	h.fd = -1
	return err
}

// KernelError is the kernel's refusal of one request: the errno and,
// where the kernel said, why.
type KernelError struct {
	Errno   unix.Errno
	Message string // the extended ack's message, often ""
}

func (e *KernelError) Error() string {
	if e.Message != "" {
		return e.Errno.Error() + ": " + e.Message
	}
	return e.Errno.Error()
}

func (e *KernelError) Unwrap() error { return e.Errno }

// request sends one message and waits for its answer. With ack, the
// answer is the kernel's acknowledgement and nil is returned; without,
// it is the body of the first reply message of type replyType.
func (h *Handle) request(typ uint16, body []byte, ack bool, replyType uint16) ([]byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fd < 0 {
		return nil, errors.New("ipsec: handle is closed")
	}
	h.seq++
	seq := h.seq
	flags := uint16(unix.NLM_F_REQUEST)
	if ack {
		flags |= unix.NLM_F_ACK
	}
	msg := make([]byte, unix.NLMSG_HDRLEN, unix.NLMSG_HDRLEN+len(body))
	binary.LittleEndian.PutUint32(msg[0:], uint32(unix.NLMSG_HDRLEN+len(body)))
	binary.LittleEndian.PutUint16(msg[4:], typ)
	binary.LittleEndian.PutUint16(msg[6:], flags)
	binary.LittleEndian.PutUint32(msg[8:], seq)
	msg = append(msg, body...)
	if err := unix.Sendto(h.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, err
	}
	buf := make([]byte, os.Getpagesize()*4)
	for {
		n, _, err := unix.Recvfrom(h.fd, buf, 0)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) {
				return nil, fmt.Errorf("no answer from the kernel within %v", replyTimeout)
			}
			return nil, err
		}
		msgs, err := parseMessages(buf[:n])
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			if m.seq != seq {
				continue // a late answer to an earlier request
			}
			switch m.typ {
			case unix.NLMSG_ERROR:
				return nil, ackError(m)
			case replyType:
				if !ack {
					return m.data, nil
				}
			}
		}
	}
}

// message is one netlink message: the header fields used and the body.
type message struct {
	typ, flags uint16
	seq        uint32
	data       []byte
}

func parseMessages(b []byte) ([]message, error) {
	var out []message
	for len(b) >= unix.NLMSG_HDRLEN {
		n := int(binary.LittleEndian.Uint32(b))
		if n < unix.NLMSG_HDRLEN || n > len(b) {
			return nil, fmt.Errorf("netlink message of length %d in %d bytes", n, len(b))
		}
		out = append(out, message{
			typ:   binary.LittleEndian.Uint16(b[4:]),
			flags: binary.LittleEndian.Uint16(b[6:]),
			seq:   binary.LittleEndian.Uint32(b[8:]),
			data:  b[unix.NLMSG_HDRLEN:n],
		})
		if nlAlign(n) >= len(b) {
			break
		}
		b = b[nlAlign(n):]
	}
	return out, nil
}

// ackError reads an NLMSG_ERROR: nil for an acknowledgement, else the
// errno and the extended ack's message if there is one.
func ackError(m message) error {
	if len(m.data) < 4 {
		return errors.New("short netlink error message")
	}
	code := int32(binary.LittleEndian.Uint32(m.data))
	if code == 0 {
		return nil
	}
	kerr := &KernelError{Errno: unix.Errno(-code)}
	if m.flags&unix.NLM_F_ACK_TLVS == 0 || len(m.data) < 4+unix.NLMSG_HDRLEN {
		return kerr
	}
	// Then the request's header (and, unless capped, its body), then
	// the TLVs.
	off := 4 + unix.NLMSG_HDRLEN
	if m.flags&unix.NLM_F_CAPPED == 0 {
		off = 4 + int(binary.LittleEndian.Uint32(m.data[4:]))
	}
	if off > len(m.data) {
		return kerr
	}
	attrs, err := parseAttrs(m.data[nlAlign(off):])
	if err == nil {
		if s, ok := attrs[unix.NLMSGERR_ATTR_MSG]; ok {
			for i, c := range s {
				if c == 0 {
					s = s[:i]
					break
				}
			}
			kerr.Message = string(s)
		}
	}
	return kerr
}

// hint says which kernel module a refusal most likely points at. Without
// modprobe, a missing module shows up as one of these errnos.
func hint(err error, op string) string {
	var errno unix.Errno
	if !errors.As(err, &errno) {
		return ""
	}
	switch {
	case errno == unix.EPROTONOSUPPORT && op == "socket":
		return " (kernel module xfrm_user loaded?)"
	case errno == unix.EPROTONOSUPPORT:
		return " (kernel module esp4 loaded?)"
	case errno == unix.ENOSYS:
		return " (algorithm unknown to the kernel: modules xfrm_algo and the cipher's loaded?)"
	case errno == unix.ENOENT && op == "add SA":
		return " (the kernel could not build the ESP transform: modules esp4, authenc (authencesn for ESN), echainiv, seqiv, drbg, ctr and the cipher's loaded? see ipsec.Modules)"
	case errno == unix.EINVAL:
		return " (the kernel refused the message: a struct layout for another architecture, or a value out of range)"
	case errno == unix.EPERM:
		return " (needs CAP_NET_ADMIN)"
	}
	return ""
}
