package afalg

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Linux native AIO (io_submit) is how several skcipher requests are put in
// flight at once: algif_skcipher starts the cipher in recvmsg, not in
// sendmsg, so writing several requests and then reading them one by one
// would still run them one after another. An asynchronous read, by
// contrast, returns while an async engine (Hifn) works, so the engine can
// hold several requests; and for synchronous engines one io_submit and one
// io_getevents replace a read per request.

// iocb is struct iocb from linux/aio_abi.h, 64 bytes on every arch. The
// kernel swaps aio_key and aio_rw_flags on big-endian machines; both stay
// zero here, so one layout serves. Fields this package never sets are
// blank; they keep the kernel's layout (TestIocbLayout checks it).
type iocb struct {
	data   uint64
	_      uint32 // aio_key
	_      int32  // aio_rw_flags
	opcode uint16
	_      int16 // aio_reqprio
	fildes uint32
	buf    uint64
	nbytes uint64
	offset int64
	_      uint64 // aio_reserved2
	flags  uint32
	_      uint32 // aio_resfd
}

// ioEvent is struct io_event.
type ioEvent struct {
	data uint64
	obj  uint64
	res  int64
	res2 int64
}

const iocbCmdPread = 0

// aioCtx is one kernel AIO context with room for n requests in flight.
// Buffers named in an iocb must stay reachable and unmoved until their
// event is collected; callers keep them referenced from the heap.
type aioCtx struct {
	id     uintptr // aio_context_t
	cbs    []iocb
	ptrs   []*iocb
	events []ioEvent
}

func newAIO(n int) (*aioCtx, error) {
	a := &aioCtx{cbs: make([]iocb, n), ptrs: make([]*iocb, n), events: make([]ioEvent, n)}
	if _, _, e := unix.Syscall(unix.SYS_IO_SETUP, uintptr(n), uintptr(unsafe.Pointer(&a.id)), 0); e != 0 {
		return nil, fmt.Errorf("io_setup(%d): %w", n, e)
	}
	return a, nil
}

// prepRead fills slot i with a read of len(buf) bytes from fd at offset 0
// (sockets refuse any other offset); data comes back in the event.
func (a *aioCtx) prepRead(i, fd int, buf []byte, data uint64) {
	a.cbs[i] = iocb{data: data, opcode: iocbCmdPread, fildes: uint32(fd), nbytes: uint64(len(buf))}
	if len(buf) > 0 {
		a.cbs[i].buf = uint64(uintptr(unsafe.Pointer(&buf[0])))
	}
	a.ptrs[i] = &a.cbs[i]
}

// submit hands slots 0..n-1 to the kernel and returns how many it took,
// which may be fewer than n.
func (a *aioCtx) submit(n int) (int, error) {
	if n == 0 {
		return 0, nil
	}
	for {
		r, _, e := unix.Syscall(unix.SYS_IO_SUBMIT, a.id, uintptr(n), uintptr(unsafe.Pointer(&a.ptrs[0])))
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return 0, fmt.Errorf("io_submit: %w", e)
		}
		return int(r), nil
	}
}

// wait collects exactly n completions.
func (a *aioCtx) wait(n int) ([]ioEvent, error) {
	got := 0
	for got < n {
		r, _, e := unix.Syscall6(unix.SYS_IO_GETEVENTS, a.id, uintptr(n-got), uintptr(n-got),
			uintptr(unsafe.Pointer(&a.events[got])), 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return a.events[:got], fmt.Errorf("io_getevents: %w", e)
		}
		got += int(r)
	}
	return a.events[:n], nil
}

func (a *aioCtx) close() error {
	if a == nil || a.id == 0 {
		return nil
	}
	_, _, e := unix.Syscall(unix.SYS_IO_DESTROY, a.id, 0, 0)
	a.id = 0
	if e != 0 {
		return fmt.Errorf("io_destroy: %w", e)
	}
	return nil
}
