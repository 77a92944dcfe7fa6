package sshd

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// The sftp subsystem (pkg/sftp's request server) shows a virtual tree,
// never the router's file system:
//
//	/            the read-only view: Config.View's files, each read
//	             afresh when opened (so the log is the log of now)
//	/staging/    writable, backed by Config.StagingDir (a RAM
//	             directory): flat, bounded in files and bytes
//
// Everything else is permission denied. OpenSSH's scp (sftp mode since
// OpenSSH 9) and sftp work with their defaults.

// StagingRoot is where the staging area appears in the sftp tree.
const StagingRoot = "/staging"

// Defaults for the staging limits: the area is RAM, on a board that may
// have 32 MB in all; a site config is a few KiB and a key file less.
const (
	DefaultStagingMax     = 1 << 20   // bytes in all
	DefaultStagingFileMax = 256 << 10 // bytes in one file
	DefaultStagingFiles   = 32        // files
)

// ViewFile is one read-only file of the sftp view.
type ViewFile struct {
	// Path is the file's path in the view, relative ("report.json",
	// "reports/boot-7.json"); the directories are those its paths name.
	Path string
	// Read returns the file's contents; it is called at each open and
	// stat, so it must be cheap enough for that and bounded.
	Read func() ([]byte, error)
}

// stagingName is a staged file's name: flat, no leading dot, the
// characters of site configs and key files.
var stagingName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._+-]{0,63}$`)

// fxDenied and fxFailure carry a message to the client's status reply;
// OpenSSH prints the code's text ("Permission denied", "Failure"), so
// the message is written to the session's stderr as well (sftpFS.fail).
func fxDenied(format string, args ...any) error {
	return &fxError{fmt.Sprintf(format, args...), sftp.ErrSSHFxPermissionDenied}
}

// fxFailure is any other refusal: SFTP v3 has no code for "over quota",
// so space refusals are failures with their message.
func fxFailure(format string, args ...any) error {
	return &fxError{fmt.Sprintf(format, args...), sftp.ErrSSHFxFailure}
}

// fxError is a message for the user with the status code the client
// gets (pkg/sftp finds the code by errors.As).
type fxError struct {
	msg  string
	code error
}

func (e *fxError) Error() string { return e.msg }
func (e *fxError) Unwrap() error { return e.code }

// sftpFS serves one sftp session.
type sftpFS struct {
	srv    *Server
	stderr io.Writer // the session's stderr: OpenSSH's clients show it
	addr   string
	start  time.Time // mtime of the view's files and directories
	// uploads are this session's uploads in flight by path, under
	// staging.mu.
	uploads map[string]*stagedFile
}

// serveSFTP runs the sftp protocol on ch until the client leaves or the
// channel closes.
func (s *Server) serveSFTP(ch ssh.Channel, addr string) error {
	fsys := &sftpFS{srv: s, stderr: ch.Stderr(), addr: addr, start: time.Now()}
	h := sftp.Handlers{FileGet: fsys, FilePut: fsys, FileCmd: fsys, FileList: fsys}
	rs := sftp.NewRequestServer(ch, h)
	err := rs.Serve()
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// fail tells the user why (on stderr, which ssh, scp and sftp print),
// logs it, and returns err for the status reply.
func (f *sftpFS) fail(err error) error {
	fmt.Fprintf(f.stderr, "ocfw: %v\n", err)
	f.srv.logf("ssh: %s: sftp: %v", f.addr, err)
	return err
}

// view is Config.View's files by their absolute path in the tree.
func (f *sftpFS) view() map[string]ViewFile {
	m := map[string]ViewFile{}
	if f.srv.cfg.View == nil {
		return m
	}
	for _, v := range f.srv.cfg.View() {
		p := path.Clean("/" + v.Path)
		if p == "/" || inStaging(p) {
			continue
		}
		m[p] = v
	}
	return m
}

// viewDirs are the view's directories (with "/" and the staging area
// when there is one).
func (f *sftpFS) viewDirs(files map[string]ViewFile) map[string]bool {
	d := map[string]bool{"/": true}
	if f.srv.cfg.StagingDir != "" {
		d[StagingRoot] = true
	}
	for p := range files {
		for p = path.Dir(p); p != "/"; p = path.Dir(p) {
			d[p] = true
		}
	}
	return d
}

func inStaging(p string) bool {
	return p == StagingRoot || strings.HasPrefix(p, StagingRoot+"/")
}

// staged is the real path of a file in the staging area, or an error
// when p is not one a file may have.
func (f *sftpFS) staged(p string) (string, error) {
	dir := f.srv.cfg.StagingDir
	if dir == "" {
		return "", fxDenied("%s: this router has no staging area", p)
	}
	rel := strings.TrimPrefix(p, StagingRoot+"/")
	if strings.Contains(rel, "/") || !stagingName.MatchString(rel) {
		return "", fxDenied("%s: staging is flat, and a name is 1-64 letters, digits, . _ + - (not starting with . + -)", p)
	}
	return filepath.Join(dir, rel), nil
}

// Fileread opens a view file (its contents as of now) or a staged one.
func (f *sftpFS) Fileread(r *sftp.Request) (io.ReaderAt, error) {
	p := r.Filepath
	if inStaging(p) {
		name, err := f.staged(p)
		if err != nil {
			return nil, f.fail(err)
		}
		return os.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	}
	v, ok := f.view()[p]
	if !ok {
		return nil, f.notHere(p)
	}
	b, err := v.Read()
	if err != nil {
		return nil, f.fail(fxFailure("%s: %v", p, err))
	}
	return bytes.NewReader(b), nil
}

// notHere is the error for a path outside both areas: not found when it
// is under the view's directories, which the client may list, and
// permission denied when it is the router's file system it asks for.
func (f *sftpFS) notHere(p string) error {
	if f.viewDirs(f.view())[path.Dir(p)] {
		return os.ErrNotExist
	}
	return f.fail(fxDenied("%s: only the card's view and %s/ are reachable over sftp", p, StagingRoot))
}

// Filewrite opens a staged file for writing; everywhere else is read-only.
func (f *sftpFS) Filewrite(r *sftp.Request) (io.WriterAt, error) {
	p := r.Filepath
	if !inStaging(p) || p == StagingRoot {
		return nil, f.fail(fxDenied("%s: read-only: uploads go to %s/", p, StagingRoot))
	}
	name, err := f.staged(p)
	if err != nil {
		return nil, f.fail(err)
	}
	return f.srv.staging.open(f, p, name, r.Pflags())
}

// Filecmd allows, in the staging area only: remove, rename within it,
// and setstat (ignored but for a size, as staged files have no owner or
// mode worth keeping). The rest is permission denied.
func (f *sftpFS) Filecmd(r *sftp.Request) error {
	p := r.Filepath
	if !inStaging(p) || p == StagingRoot {
		if r.Method == "Setstat" {
			return f.fail(fxDenied("%s: read-only", p))
		}
		return f.fail(fxDenied("%s: read-only: uploads go to %s/", p, StagingRoot))
	}
	name, err := f.staged(p)
	if err != nil {
		return f.fail(err)
	}
	switch r.Method {
	case "Setstat":
		if r.AttrFlags().Size {
			return f.srv.staging.truncate(f, p, name, int64(r.Attributes().Size))
		}
		return nil
	case "Remove":
		return os.Remove(name)
	case "Rename", "PosixRename":
		if !inStaging(r.Target) {
			return f.fail(fxDenied("%s: a staged file stays in %s/", r.Target, StagingRoot))
		}
		to, err := f.staged(r.Target)
		if err != nil {
			return f.fail(err)
		}
		return os.Rename(name, to)
	}
	return f.fail(fxDenied("%s: %s: staging is flat and holds plain files only", p, strings.ToLower(r.Method)))
}

// PosixRename is Rename (the staging area is one directory).
func (f *sftpFS) PosixRename(r *sftp.Request) error { return f.Filecmd(r) }

// Filelist lists and stats. The view's files show their size as of now.
func (f *sftpFS) Filelist(r *sftp.Request) (sftp.ListerAt, error) {
	p := r.Filepath
	files := f.view()
	dirs := f.viewDirs(files)
	if inStaging(p) && p != StagingRoot {
		name, err := f.staged(p)
		if err != nil {
			return nil, f.fail(err)
		}
		st, err := os.Stat(name)
		if err != nil {
			return nil, err
		}
		if r.Method == "List" {
			return nil, f.fail(fxDenied("%s: not a directory", p))
		}
		return listing{fileInfo{name: path.Base(p), size: st.Size(), mode: 0o644, mtime: st.ModTime()}}, nil
	}
	if r.Method != "List" {
		if dirs[p] {
			mode := fs.FileMode(0o555)
			if p == StagingRoot {
				mode = 0o755
			}
			return listing{fileInfo{name: path.Base(p), mode: fs.ModeDir | mode, mtime: f.start}}, nil
		}
		v, ok := files[p]
		if !ok {
			return nil, f.notHere(p)
		}
		b, err := v.Read()
		if err != nil {
			return nil, f.fail(fxFailure("%s: %v", p, err))
		}
		return listing{fileInfo{name: path.Base(p), size: int64(len(b)), mode: 0o444, mtime: f.start}}, nil
	}
	if !dirs[p] {
		if _, ok := files[p]; ok {
			return nil, f.fail(fxDenied("%s: not a directory", p))
		}
		return nil, f.notHere(p)
	}
	var l listing
	if p == StagingRoot {
		es, err := os.ReadDir(f.srv.cfg.StagingDir)
		if errors.Is(err, fs.ErrNotExist) {
			return l, nil // nothing uploaded yet
		}
		if err != nil {
			return nil, f.fail(fxFailure("%s: %v", p, err))
		}
		for _, e := range es {
			if isUpload(e.Name()) {
				continue // an upload in flight: not there until whole
			}
			if st, err := e.Info(); err == nil && st.Mode().IsRegular() {
				l = append(l, fileInfo{name: e.Name(), size: st.Size(), mode: 0o644, mtime: st.ModTime()})
			}
		}
		return l, nil
	}
	for d := range dirs {
		if d != "/" && path.Dir(d) == p {
			mode := fs.FileMode(0o555)
			if d == StagingRoot {
				mode = 0o755
			}
			l = append(l, fileInfo{name: path.Base(d), mode: fs.ModeDir | mode, mtime: f.start})
		}
	}
	for fp, v := range files {
		if path.Dir(fp) != p {
			continue
		}
		// A file that cannot be read now is still listed (size 0):
		// opening it says why.
		b, _ := v.Read()
		l = append(l, fileInfo{name: path.Base(fp), size: int64(len(b)), mode: 0o444, mtime: f.start})
	}
	sort.Slice(l, func(i, j int) bool { return l[i].name < l[j].name })
	return l, nil
}

// listing is a ListerAt over a fixed list.
type listing []fileInfo

func (l listing) ListAt(out []os.FileInfo, off int64) (int, error) {
	if off >= int64(len(l)) {
		return 0, io.EOF
	}
	n := 0
	for _, fi := range l[off:] {
		if n == len(out) {
			return n, nil
		}
		out[n] = fi
		n++
	}
	return n, io.EOF
}

// fileInfo is a view entry; owner and group are root's (uid 0).
type fileInfo struct {
	name  string
	size  int64
	mode  fs.FileMode
	mtime time.Time
}

func (fi fileInfo) Name() string       { return fi.name }
func (fi fileInfo) Size() int64        { return fi.size }
func (fi fileInfo) Mode() fs.FileMode  { return fi.mode }
func (fi fileInfo) ModTime() time.Time { return fi.mtime }
func (fi fileInfo) IsDir() bool        { return fi.mode.IsDir() }
func (fi fileInfo) Sys() any           { return nil }

// staging bounds the staging area: every write is checked against the
// limits under one lock, from the sizes the files have on disk, so
// several sessions (and whoever empties the area) share one account.
type staging struct {
	mu                     sync.Mutex
	dir                    string
	max, fileMax, maxFiles int64
}

// usage is the bytes and files in the area now, without skip's size.
func (st *staging) usageLocked(skip string) (bytes int64, files int, err error) {
	es, err := os.ReadDir(st.dir)
	if err != nil {
		return 0, 0, err
	}
	for _, e := range es {
		files++
		if filepath.Join(st.dir, e.Name()) == skip {
			continue
		}
		if fi, err := e.Info(); err == nil {
			bytes += fi.Size()
		}
	}
	return bytes, files, nil
}

func (st *staging) limits() string {
	return fmt.Sprintf("staging holds at most %d files, %s each, %s in all", st.maxFiles, kib(st.fileMax), kib(st.max))
}

func kib(n int64) string { return fmt.Sprintf("%d KiB", n>>10) }

// checkLocked refuses a size for name that breaks a limit.
func (st *staging) checkLocked(p, name string, size int64) error {
	if size > st.fileMax {
		return fxFailure("%s: over the %s per-file limit (%s)", p, kib(st.fileMax), st.limits())
	}
	used, _, err := st.usageLocked(name)
	if err != nil {
		return err
	}
	if used+size > st.max {
		return fxFailure("%s: staging would hold %d bytes, over its %s limit (%s; remove files with sftp's rm)", p, used+size, kib(st.max), st.limits())
	}
	return nil
}

func (st *staging) open(f *sftpFS, p, name string, fl sftp.FileOpenFlags) (io.WriterAt, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := os.MkdirAll(st.dir, 0o700); err != nil {
		return nil, f.fail(fxFailure("%s: %v", p, err))
	}
	_, files, err := st.usageLocked("")
	if err != nil {
		return nil, f.fail(fxFailure("%s: %v", p, err))
	}
	// The upload goes to a hidden file (uploadPrefix), renamed to its
	// name when the client closes it whole: until then nobody (another
	// session's ls or get, `ocf config apply`) sees half a file. It
	// counts in the limits as it grows; replacing a file may take one
	// place more than the limit until its close frees the old one.
	_, lerr := os.Lstat(name)
	exists := lerr == nil
	if lerr != nil && !errors.Is(lerr, fs.ErrNotExist) {
		return nil, f.fail(fxFailure("%s: %v", p, lerr))
	}
	if full := int64(files) >= st.maxFiles; full && (!exists || int64(files) > st.maxFiles) {
		return nil, f.fail(fxFailure("%s: staging already holds %d files (%s)", p, files, st.limits()))
	}
	switch {
	case exists && fl.Creat && fl.Excl:
		return nil, os.ErrExist
	case !exists && !fl.Creat:
		return nil, os.ErrNotExist
	}
	fh, err := os.CreateTemp(st.dir, uploadPrefix+"*")
	if err != nil {
		return nil, f.fail(fxFailure("%s: %v", p, err))
	}
	if exists && !fl.Trunc {
		// Writing into a file that is there (a resumed upload): the
		// copy starts from what it holds. O_NOFOLLOW: a link in
		// the area must never send a read elsewhere.
		old, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		if err == nil {
			_, err = io.Copy(fh, io.LimitReader(old, st.fileMax))
			old.Close()
		}
		if err != nil {
			fh.Close()
			os.Remove(fh.Name())
			return nil, f.fail(fxFailure("%s: %v", p, err))
		}
	}
	w := &stagedFile{st: st, f: f, p: p, name: name, tmp: fh.Name(), fh: fh}
	if f.uploads == nil {
		f.uploads = map[string]*stagedFile{}
	}
	f.uploads[p] = w
	return w, nil
}

// uploadPrefix starts the names of uploads in flight in the staging
// directory. A staged name never starts with "." (stagingName), so sftp
// cannot reach them, and `ocf config apply` (config.ReadStaged) skips
// them.
const uploadPrefix = ".upload-"

func isUpload(name string) bool { return strings.HasPrefix(name, ".") }

// cleanUploads removes uploads a stopped server left in flight (a
// power cut empties the RAM area anyway; a restarted server must not
// keep the hidden halves counting against the limits).
func cleanUploads(dir string) {
	es, _ := os.ReadDir(dir)
	for _, e := range es {
		if strings.HasPrefix(e.Name(), uploadPrefix) {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

func (st *staging) truncate(f *sftpFS, p, name string, size int64) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	// A size set on a file this session is uploading (fsetstat on its
	// handle comes as a setstat of its path) is the upload's.
	if w := f.uploads[p]; w != nil {
		name = w.tmp
	}
	if err := st.checkLocked(p, name, size); err != nil {
		// Not on stderr again: scp sets the size it sent after a
		// write was refused for it, and the user was told then.
		f.srv.logf("ssh: %s: sftp: %v", f.addr, err)
		return err
	}
	return os.Truncate(name, size)
}

// stagedFile is an upload in progress, written to tmp (hidden) and
// renamed to name when the client closes it. A write over a limit
// fails, and tmp is removed when the handle closes: a partly uploaded
// file must never be taken for a whole one.
type stagedFile struct {
	st     *staging
	f      *sftpFS
	p      string
	name   string
	tmp    string
	fh     *os.File
	broken bool
}

func (w *stagedFile) WriteAt(b []byte, off int64) (int, error) {
	w.st.mu.Lock()
	defer w.st.mu.Unlock()
	if w.broken {
		return 0, fxFailure("%s: an earlier write failed", w.p)
	}
	fi, err := w.fh.Stat()
	if err != nil {
		return 0, err
	}
	if end := off + int64(len(b)); end > fi.Size() {
		if err := w.st.checkLocked(w.p, w.tmp, end); err != nil {
			w.broken = true
			return 0, w.f.fail(err)
		}
	}
	return w.fh.WriteAt(b, off)
}

// TransferError is the connection failing mid-upload.
func (w *stagedFile) TransferError(error) {
	w.st.mu.Lock()
	w.broken = true
	w.st.mu.Unlock()
}

func (w *stagedFile) Close() error {
	err := w.fh.Close()
	w.st.mu.Lock()
	defer w.st.mu.Unlock()
	if w.f.uploads[w.p] == w {
		delete(w.f.uploads, w.p)
	}
	if w.broken || err != nil {
		os.Remove(w.tmp)
		w.f.srv.logf("ssh: %s: sftp: %s not kept: its upload did not complete", w.f.addr, w.p)
		return fxFailure("%s: not kept: its upload did not complete", w.p)
	}
	if err := os.Rename(w.tmp, w.name); err != nil {
		os.Remove(w.tmp)
		return w.f.fail(fxFailure("%s: %v", w.p, err))
	}
	w.f.srv.logf("ssh: %s: sftp: staged %s", w.f.addr, w.p)
	return nil
}
