package afalg

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ocfw/ocfw/ocf"
)

// sender owns the message header of a session's sendmsg calls, so that a
// request costs no allocation: the header, iovec and control buffer are
// built once and only refilled.
type sender struct {
	msg  unix.Msghdr
	iov  unix.Iovec
	ctrl []byte
}

// send writes data (and ctrl[:nctrl] as control messages) as one message.
// MSG_DONTWAIT turns a request that would overfill the socket into an
// error instead of a hang: nobody else reads the socket meanwhile.
func (s *sender) send(fd int, data []byte, nctrl int) error {
	s.msg = unix.Msghdr{}
	if len(data) > 0 {
		s.iov.Base = &data[0]
		s.iov.SetLen(len(data))
		s.msg.Iov = &s.iov
		s.msg.SetIovlen(1)
	}
	if nctrl > 0 {
		s.msg.Control = &s.ctrl[0]
		s.msg.SetControllen(nctrl)
	}
	var (
		r uintptr
		e unix.Errno
	)
	for {
		r, _, e = unix.Syscall(unix.SYS_SENDMSG, uintptr(fd), uintptr(unsafe.Pointer(&s.msg)), unix.MSG_DONTWAIT)
		if e != unix.EINTR {
			break
		}
	}
	runtime.KeepAlive(data)
	s.iov.Base = nil // do not keep the caller's buffer reachable
	s.msg = unix.Msghdr{}
	if e != 0 {
		return e
	}
	if int(r) != len(data) {
		return fmt.Errorf("%w: kernel took %d of %d bytes", ocf.ErrLength, r, len(data))
	}
	return nil
}

// skSession is a skcipher transform with one or more operation sockets.
type skSession struct {
	c      *ocf.Cipher
	driver string
	label  string
	tfm    int
	ops    []int
	sender
	aio    *aioCtx
	slots  []int            // request index per AIO slot
	pin    []unsafe.Pointer // batch output buffers, held on the heap while the kernel writes them
	closed bool
	broken error
}

func newSkSession(c *ocf.Cipher, tfm int, driver, label string, depth int) (*skSession, error) {
	if depth < 1 {
		depth = 1
	}
	s := &skSession{c: c, driver: driver, label: label, tfm: tfm}
	for range depth {
		fd, err := accept(tfm)
		if err != nil {
			s.closeOps()
			return nil, kernelErr("accept "+label, err, "", nil)
		}
		s.ops = append(s.ops, fd)
	}
	s.setup()
	return s, nil
}

// setup allocates what requests reuse, for the operation sockets in s.ops.
func (s *skSession) setup() {
	s.ctrl = make([]byte, hostLayout.controlLen(s.c.IVSize))
	if depth := len(s.ops); depth > 1 {
		// Without AIO (a kernel without CONFIG_AIO) batches run one at a
		// time: correct, only slower.
		if a, err := newAIO(depth); err == nil {
			s.aio = a
			s.slots = make([]int, depth)
			s.pin = make([]unsafe.Pointer, depth)
		}
	}
}

func (s *skSession) Cipher() *ocf.Cipher { return s.c }
func (s *skSession) Driver() string      { return s.driver }

// Batched reports whether batches go through AIO with several requests in
// flight.
func (s *skSession) Batched() bool { return s.aio != nil }

func (s *skSession) closeOps() {
	for _, fd := range s.ops {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	s.ops = nil
}

func (s *skSession) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.aio.close()
	s.closeOps()
	if s.tfm >= 0 {
		if e := unix.Close(s.tfm); e != nil && err == nil {
			err = e
		}
	}
	return err
}

// reset replaces operation socket i after a failure, since the kernel may
// still hold part of the failed request's data in it.
func (s *skSession) reset(i int) {
	unix.Close(s.ops[i])
	fd, err := accept(s.tfm)
	if err != nil {
		s.ops[i] = -1
		s.broken = fmt.Errorf("%w: %w", errBroken, kernelErr("accept "+s.label, err, "", nil))
		return
	}
	s.ops[i] = fd
}

func (s *skSession) opCode(op ocf.Op) uint32 {
	if op == ocf.Encrypt {
		return unix.ALG_OP_ENCRYPT
	}
	return unix.ALG_OP_DECRYPT
}

// check validates r before anything reaches the kernel.
func (s *skSession) check(r *ocf.Request) error {
	if err := ocf.CheckRequest(s.c, r); err != nil {
		return err
	}
	if len(r.Src) > MaxRequest {
		return fmt.Errorf("%w: %d bytes, %s takes at most %d", ocf.ErrTooLarge, len(r.Src), s.label, MaxRequest)
	}
	return nil
}

func (s *skSession) reqErr(r *ocf.Request, what string, err error) error {
	return kernelErr(fmt.Sprintf("%s %s %d bytes: %s", s.label, r.Op, len(r.Src), what), err, "", nil)
}

// submit sends r's control messages and data on operation socket i.
func (s *skSession) submit(i int, r *ocf.Request) error {
	n := hostLayout.encodeControl(s.ctrl, s.opCode(r.Op), r.IV)
	if err := s.send(s.ops[i], r.Src, n); err != nil {
		s.reset(i)
		return s.reqErr(r, "sendmsg", err)
	}
	return nil
}

// finish reads r's result from operation socket i.
func (s *skSession) finish(i int, r *ocf.Request) error {
	if err := readFull(s.ops[i], r.Out()); err != nil {
		s.reset(i)
		return s.reqErr(r, "read", err)
	}
	return nil
}

func (s *skSession) Do(reqs []ocf.Request) error {
	if s.closed || s.broken != nil {
		err := ocf.ErrClosed
		if s.broken != nil {
			err = s.broken
		}
		for i := range reqs {
			reqs[i].Err = err
		}
		return err
	}
	if s.aio != nil && len(reqs) > 1 {
		s.doBatch(reqs)
	} else {
		for i := range reqs {
			r := &reqs[i]
			if s.broken != nil {
				r.Err = s.broken
				continue
			}
			if r.Err = s.check(r); r.Err != nil || len(r.Src) == 0 {
				continue
			}
			if r.Err = s.submit(0, r); r.Err == nil {
				r.Err = s.finish(0, r)
			}
		}
	}
	for i := range reqs {
		if reqs[i].Err != nil {
			return reqs[i].Err
		}
	}
	return nil
}

// doBatch sends up to Depth requests, one per operation socket, then reads
// all their results with one io_submit and collects them with
// io_getevents.
func (s *skSession) doBatch(reqs []ocf.Request) {
	depth := len(s.ops)
	for next := 0; next < len(reqs) && s.broken == nil; {
		k := 0
		for ; next < len(reqs) && k < depth; next++ {
			r := &reqs[next]
			if r.Err = s.check(r); r.Err != nil || len(r.Src) == 0 {
				continue
			}
			if r.Err = s.submit(k, r); r.Err != nil {
				if s.broken != nil {
					break
				}
				continue
			}
			out := r.Out()
			s.pin[k] = unsafe.Pointer(&out[0])
			s.aio.prepRead(k, s.ops[k], out, uint64(k))
			s.slots[k] = next
			k++
		}
		s.flush(reqs, k)
	}
	if s.broken != nil {
		for i := range reqs {
			if reqs[i].Err == nil {
				reqs[i].Err = s.broken
			}
		}
	}
}

// flush completes the k prepared slots. Slots the kernel would not take
// asynchronously are read synchronously: their data is already sent.
func (s *skSession) flush(reqs []ocf.Request, k int) {
	defer clear(s.pin)
	if k == 0 {
		return
	}
	m := 0
	if k > 1 {
		m, _ = s.aio.submit(k)
	}
	for i := m; i < k; i++ {
		r := &reqs[s.slots[i]]
		r.Err = s.finish(i, r)
	}
	if m == 0 {
		return
	}
	evs, err := s.aio.wait(m)
	if err != nil {
		// Cannot tell which reads are still in flight: io_destroy
		// waits for all of them, then batches run one at a time.
		s.aio.close()
		s.aio = nil
		done := make([]bool, k)
		for _, ev := range evs {
			done[ev.data] = true
		}
		for i := range m {
			if !done[i] {
				reqs[s.slots[i]].Err = s.reqErr(&reqs[s.slots[i]], "io_getevents", err)
				s.reset(i)
			}
		}
	}
	for _, ev := range evs {
		i := int(ev.data)
		r := &reqs[s.slots[i]]
		switch {
		case ev.res < 0:
			r.Err = s.reqErr(r, "aio read", unix.Errno(-ev.res))
			s.reset(i)
		case ev.res != int64(len(r.Src)):
			r.Err = s.reqErr(r, "aio read", fmt.Errorf("%w: kernel returned %d of %d bytes", ocf.ErrLength, ev.res, len(r.Src)))
			s.reset(i)
		}
	}
	runtime.KeepAlive(reqs)
}

// hashSession is a keyed hash transform with one operation socket. The
// kernel hashes inside sendmsg (init, update, final when MSG_MORE is not
// set) and the read only copies the digest out.
type hashSession struct {
	c      *ocf.Cipher
	driver string
	label  string
	tfm    int
	op     int
	sender
	closed bool
	broken error
}

func newHashSession(c *ocf.Cipher, tfm int, driver, label string) (*hashSession, error) {
	op, err := accept(tfm)
	if err != nil {
		return nil, kernelErr("accept "+label, err, "", nil)
	}
	return &hashSession{c: c, driver: driver, label: label, tfm: tfm, op: op}, nil
}

func (s *hashSession) Cipher() *ocf.Cipher { return s.c }
func (s *hashSession) Driver() string      { return s.driver }

func (s *hashSession) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	if s.op >= 0 {
		unix.Close(s.op)
	}
	if s.tfm < 0 {
		return nil
	}
	return unix.Close(s.tfm)
}

func (s *hashSession) Do(reqs []ocf.Request) error {
	if s.closed || s.broken != nil {
		err := ocf.ErrClosed
		if s.broken != nil {
			err = s.broken
		}
		for i := range reqs {
			reqs[i].Err = err
		}
		return err
	}
	for i := range reqs {
		r := &reqs[i]
		if s.broken != nil {
			r.Err = s.broken
			continue
		}
		if r.Err = ocf.CheckRequest(s.c, r); r.Err != nil {
			continue
		}
		if err := s.send(s.op, r.Src, 0); err != nil {
			r.Err = kernelErr(fmt.Sprintf("%s mac %d bytes: sendmsg", s.label, len(r.Src)), err, "", nil)
			s.reset()
			continue
		}
		if err := readFull(s.op, r.Dst[:s.c.DigestSize]); err != nil {
			r.Err = kernelErr(fmt.Sprintf("%s mac %d bytes: read", s.label, len(r.Src)), err, "", nil)
			s.reset()
		}
	}
	for i := range reqs {
		if reqs[i].Err != nil {
			return reqs[i].Err
		}
	}
	return nil
}

func (s *hashSession) reset() {
	unix.Close(s.op)
	fd, err := accept(s.tfm)
	if err != nil {
		s.op = -1
		s.broken = fmt.Errorf("%w: %w", errBroken, kernelErr("accept "+s.label, err, "", nil))
		return
	}
	s.op = fd
}
