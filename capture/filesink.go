package capture

import (
	"io"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A sink takes the capture writer's buffers. put is handed a full buffer
// and returns the buffer to fill next, which may already hold bytes put
// could not write yet (the caller appends after them). close writes what
// is left and ends the sink.
type sink interface {
	put(b []byte) ([]byte, error)
	close(b []byte) error
}

// writerSink writes each buffer to w at once: for tests and for writers
// that are not files.
type writerSink struct{ w io.Writer }

func (s writerSink) put(b []byte) ([]byte, error) {
	_, err := s.w.Write(b)
	return b[:0], err
}

func (s writerSink) close(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	_, err := s.w.Write(b)
	return err
}

// fileSink writes a capture's buffers to its file from a goroutine of its
// own, so that the next buffer fills while the last is written.
//
// Where the file system takes direct I/O (ext4, xfs: not tmpfs), the file
// is switched to O_DIRECT (directIO) and only whole 4 KiB blocks are
// written, from page-aligned buffers, the rest of a buffer carried to the
// start of the next. The disk then reads the blocks from the buffer
// itself: no copy into the page cache, which for a capture of millions of
// packets a second costs the kernel more CPU than the writer's own work.
// What is left when the capture ends (the last partial block, and what
// was not yet handed over) is written through the page cache; until then
// up to 4 KiB of packets wait in the buffer after an idle flush.
type fileSink struct {
	f      *os.File
	direct bool
	mem    []byte        // the mapping the buffers are carved from (on a 2 MiB boundary in it for direct I/O)
	todo   chan []byte   // buffers to write
	free   chan []byte   // buffers written
	done   chan struct{} // the writing goroutine has ended
	err    error         // the first write error, read after done or from errs
	errs   chan error    // the first write error, as it happens
}

const (
	fileSinkBuffers = 4
	directBlock     = 4096
	// hugeBuffer is a direct-I/O buffer's size and alignment: a 2 MiB
	// huge page each, where transparent huge pages are allowed (madvise).
	// The kernel pins a direct write's pages before the disk reads them
	// and unpins them when it is done, and the completion runs on the CPU
	// the disk's interrupt goes to, which may be a worker's: a huge page is
	// one folio to pin and unpin where 4 KiB pages are 256 for each MiB.
	hugeBuffer = 2 << 20
)

// openFileSink creates (or truncates) the file name, with direct I/O when
// its file system allows, and starts writing buffers of size bytes
// (rounded up to whole pages) to it. It returns the first buffer.
func openFileSink(name string, size int) (*fileSink, []byte, error) {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, nil, err
	}
	direct := directIO(f)
	size = (size + directBlock - 1) &^ (directBlock - 1)
	align := directBlock
	if direct {
		size = (size + hugeBuffer - 1) &^ (hugeBuffer - 1)
		align = hugeBuffer
	}
	mem, err := unix.Mmap(-1, 0, fileSinkBuffers*size+align-directBlock, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	bufs := mem[(align-int(uintptr(unsafe.Pointer(&mem[0])))%align)%align:][:fileSinkBuffers*size]
	if direct {
		// A hint: where transparent huge pages are off, 4 KiB pages do.
		_ = unix.Madvise(bufs, unix.MADV_HUGEPAGE)
	}
	s := &fileSink{f: f, direct: direct, mem: mem, todo: make(chan []byte, fileSinkBuffers),
		free: make(chan []byte, fileSinkBuffers), done: make(chan struct{}), errs: make(chan error, 1)}
	for i := 1; i < fileSinkBuffers; i++ {
		s.free <- bufs[i*size : i*size : (i+1)*size]
	}
	go s.run()
	return s, bufs[:0:size], nil
}

// directIO switches f to direct I/O when that saves the kernel a copy:
// a regular file on a file system with a disk under it. tmpfs and ramfs
// copy anyway (a kernel that lets tmpfs take O_DIRECT writes it slower),
// and devices and pipes are written as they come.
func directIO(f *os.File) bool {
	var st unix.Stat_t
	var fs unix.Statfs_t
	fd := int(f.Fd())
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG ||
		unix.Fstatfs(fd, &fs) != nil || fs.Type == unix.TMPFS_MAGIC || fs.Type == unix.RAMFS_MAGIC {
		return false
	}
	fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
	if err != nil {
		return false
	}
	_, err = unix.FcntlInt(f.Fd(), unix.F_SETFL, fl|unix.O_DIRECT)
	return err == nil
}

// run writes the buffers put hands over, in order, until todo is closed.
// After an error it writes nothing more and hands buffers straight back.
func (s *fileSink) run() {
	defer close(s.done)
	for b := range s.todo {
		if s.err == nil {
			if _, err := s.f.Write(b); err != nil {
				s.err = err
				s.errs <- err
			}
		}
		s.free <- b[:0]
	}
}

func (s *fileSink) put(b []byte) ([]byte, error) {
	select {
	case err := <-s.errs:
		s.errs <- err // for the next put
		return b[:0], err
	default:
	}
	n := len(b)
	if s.direct {
		n &^= directBlock - 1
	}
	next := <-s.free              // run hands every buffer back, written or not
	next = append(next, b[n:]...) // the partial block, written with the next
	if n > 0 {
		s.todo <- b[:n]
	} else {
		s.free <- b[:0]
	}
	return next, nil
}

// close writes b (what is left: with direct I/O, less than a block),
// waits for every buffer to be written, and closes the file.
func (s *fileSink) close(b []byte) error {
	close(s.todo)
	<-s.done
	err := s.err
	if err == nil && len(b) > 0 {
		if s.direct { // the last partial block goes through the page cache
			if fl, ferr := unix.FcntlInt(s.f.Fd(), unix.F_GETFL, 0); ferr != nil {
				err = ferr
			} else if _, ferr = unix.FcntlInt(s.f.Fd(), unix.F_SETFL, fl&^unix.O_DIRECT); ferr != nil {
				err = ferr
			}
		}
		if err == nil {
			_, err = s.f.Write(b)
		}
	}
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	unix.Munmap(s.mem)
	return err
}
