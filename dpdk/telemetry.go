package dpdk

/*
#include <stdlib.h>
#include <rte_eal.h>
#include "telemetry.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unicode/utf8"
	"unsafe"
)

// DPDK 22.11 telemetry limits. maxCmdLen is private to telemetry.c.
const (
	maxCmdLen       = 56
	maxHelpLen      = 64 // 22.11 stores help in 128 bytes; older releases in 64
	maxNameLen      = C.RTE_TEL_MAX_STRING_LEN - 1
	maxSingleString = C.RTE_TEL_MAX_SINGLE_STRING_LEN - 1
	maxDictEntries  = C.RTE_TEL_MAX_DICT_ENTRIES
	maxArrayEntries = C.RTE_TEL_MAX_ARRAY_ENTRIES
	// maxTelDepth bounds nesting: DPDK renders each level into a stack
	// buffer as large as the whole reply.
	maxTelDepth = 6
)

// TruncatedKey is the dict entry that replaces a map's entries beyond
// DPDK's 256: its value is how many were left out.
const TruncatedKey = "truncated_entries"

// TelemetryHandler answers one DPDK telemetry command. params is what the
// client sent after the first comma ("" if nothing). The value becomes the
// reply: maps with string keys become dicts, slices and arrays become
// arrays, numbers, strings and bools become values (see RegisterTelemetry).
type TelemetryHandler func(params string) (any, error)

var telCmds struct {
	sync.Mutex
	m map[string]TelemetryHandler
}

// RegisterTelemetry makes cmd a command of DPDK's telemetry socket
// (rte_telemetry_register_cmd), answered by fn on DPDK's telemetry thread.
// Registering a command again replaces its handler. It may be called before
// or after Init.
//
// cmd must start with '/' and hold only letters, digits, '_' and '/', in
// fewer than 56 bytes. help is cut to 63 bytes (the limit of older releases).
//
// DPDK 22.11 has only unsigned 64-bit and signed 32-bit integers and
// strings, so: unsigned integers are u64; signed ones are int when they fit
// in 32 bits, u64 when larger and positive, strings otherwise; floats are
// u64 when whole and non-negative, strings otherwise; bools are 0 or 1.
// Dict keys are sorted, and characters DPDK rejects become '_'. Strings
// lose characters outside printable ASCII (they become '?') and are cut to
// 127 bytes (8191 for a bare string reply), arrays to 512 entries,
// and a map's entries beyond 256 are replaced by TruncatedKey. A slice
// holding maps, or holding slices when it is itself nested, becomes a dict
// keyed by index: DPDK 22.11 puts no dicts in arrays, and arrays of arrays
// only at the top. DPDK leaves out whatever does not fit its 16 KiB reply.
//
// An error from fn gives the client {"cmd": null}.
func RegisterTelemetry(cmd, help string, fn TelemetryHandler) error {
	if err := validCommand(cmd); err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("telemetry command %s: nil handler", cmd)
	}
	help = sanitizeString(help, maxHelpLen-1)
	telCmds.Lock()
	defer telCmds.Unlock()
	if _, ok := telCmds.m[cmd]; ok {
		telCmds.m[cmd] = fn
		return nil
	}
	if telCmds.m == nil {
		telCmds.m = map[string]TelemetryHandler{}
	}
	ccmd, chelp := C.CString(cmd), C.CString(help)
	defer C.free(unsafe.Pointer(ccmd))
	defer C.free(unsafe.Pointer(chelp))
	// DPDK copies both strings.
	if err := errRC("rte_telemetry_register_cmd "+cmd, C.rf_telemetry_register(ccmd, chelp)); err != nil {
		return err
	}
	telCmds.m[cmd] = fn
	return nil
}

func validCommand(cmd string) error {
	if len(cmd) < 2 || cmd[0] != '/' || len(cmd) >= maxCmdLen {
		return fmt.Errorf("telemetry command %q: want '/' then 1 to %d characters", cmd, maxCmdLen-2)
	}
	for i := 0; i < len(cmd); i++ {
		if !validNameByte(cmd[i]) {
			return fmt.Errorf("telemetry command %q: %q is not a letter, digit, '_' or '/'", cmd, cmd[i])
		}
	}
	return nil
}

func validNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '/'
}

// TelemetrySocket is the path of EAL's telemetry socket (v2), in EAL's
// runtime directory: $RUNTIME_DIRECTORY, else /var/run as root or
// $XDG_RUNTIME_DIR (or /tmp) otherwise, then dpdk/<file-prefix>. When
// another process of the same file prefix holds dpdk_telemetry.v2, EAL
// binds dpdk_telemetry.v2:1, :2 and so on, and EAL does not say which: the
// socket is the one of those this process listens on. It is "" before Init
// and when EAL ran with --no-telemetry.
func TelemetrySocket() string {
	if !Running() {
		return ""
	}
	return telemetrySocketIn(C.GoString(C.rte_eal_get_runtime_dir()))
}

// telemetrySocketIn is TelemetrySocket for runtime directory dir.
func telemetrySocketIn(dir string) string {
	if dir == "" {
		dir = "/tmp" // as telemetry.c does
	}
	return ownUnixSocket(filepath.Join(dir, "dpdk_telemetry.v2"))
}

// ownUnixSocket returns base or base:N, whichever is a UNIX socket this
// process has open (by inode, from /proc/net/unix and /proc/self/fd), or "".
func ownUnixSocket(base string) string {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return ""
	}
	own := map[string]bool{}
	for _, fd := range fds {
		if l, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil {
			if in, ok := strings.CutPrefix(l, "socket:["); ok {
				own[strings.TrimSuffix(in, "]")] = true
			}
		}
	}
	tab, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		return ""
	}
	// Num RefCount Protocol Flags Type St Inode Path
	for _, line := range strings.Split(string(tab), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 || !own[f[6]] {
			continue
		}
		if p := f[7]; p == base || strings.HasPrefix(p, base+":") {
			return p
		}
	}
	return ""
}

//export rfTelemetryCallback
func rfTelemetryCallback(cmd, params *C.char, d *C.struct_rte_tel_data) (rc C.int) {
	name := C.GoString(cmd)
	telCmds.Lock()
	fn := telCmds.m[name]
	telCmds.Unlock()
	if fn == nil {
		return -C.int(syscall.ENOENT)
	}
	p := ""
	if params != nil {
		p = C.GoString(params)
	}
	// A panic must not cross into C: it would kill the process from
	// DPDK's telemetry thread.
	defer func() {
		if r := recover(); r != nil {
			rc = -C.int(syscall.EIO)
		}
	}()
	v, err := fn(p)
	if err != nil {
		return -C.int(errnoOf(err))
	}
	// Nothing is allocated before this point, so the error returns above
	// leak no container (DPDK frees containers only of replies it writes).
	fillTop(d, v)
	return 0
}

func errnoOf(err error) syscall.Errno {
	var de *Error
	if errors.As(err, &de) && de.Errno > 0 {
		return syscall.Errno(de.Errno)
	}
	var en syscall.Errno
	if errors.As(err, &en) && en > 0 {
		return en
	}
	return syscall.EINVAL
}

// telKind is how a Go value is sent: what DPDK telemetry can hold.
type telKind int

const (
	telSkip telKind = iota
	telU64
	telInt
	telString
	telMap
	telList
)

// classify dereferences v and says how it is sent; for scalars it returns
// the value as u64, int or string.
func classify(v reflect.Value) (telKind, reflect.Value, uint64, int32, string) {
	for v.IsValid() && (v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer) {
		if v.IsNil() {
			return telSkip, v, 0, 0, ""
		}
		if v.Type().Implements(errorType) {
			return telString, v, 0, 0, v.Interface().(error).Error()
		}
		v = v.Elem()
	}
	if !v.IsValid() {
		return telSkip, v, 0, 0, ""
	}
	switch v.Kind() {
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return telU64, v, v.Uint(), 0, ""
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n := v.Int()
		switch {
		case n >= math.MinInt32 && n <= math.MaxInt32:
			return telInt, v, 0, int32(n), ""
		case n > 0:
			return telU64, v, uint64(n), 0, ""
		}
		return telString, v, 0, 0, strconv.FormatInt(n, 10)
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		if f >= 0 && f < 1<<64 && f == math.Trunc(f) {
			return telU64, v, uint64(f), 0, ""
		}
		return telString, v, 0, 0, strconv.FormatFloat(f, 'g', -1, 64)
	case reflect.Bool:
		if v.Bool() {
			return telInt, v, 0, 1, ""
		}
		return telInt, v, 0, 0, ""
	case reflect.String:
		return telString, v, 0, 0, v.String()
	case reflect.Map:
		if v.Type().Key().Kind() == reflect.String {
			return telMap, v, 0, 0, ""
		}
	case reflect.Slice, reflect.Array:
		return telList, v, 0, 0, ""
	}
	return telString, v, 0, 0, fmt.Sprint(v.Interface())
}

var errorType = reflect.TypeFor[error]()

// fillTop writes the reply: every reply gets a type, as DPDK does not
// initialise the data it passes.
func fillTop(d *C.struct_rte_tel_data, v any) {
	kind, rv, u, i, s := classify(reflect.ValueOf(v))
	switch kind {
	case telSkip:
		C.rte_tel_data_start_dict(d)
	case telMap:
		fillDict(d, rv, 0)
	case telList:
		fillList(d, rv, 0)
	default:
		switch kind {
		case telU64:
			s = strconv.FormatUint(u, 10)
		case telInt:
			s = strconv.Itoa(int(i))
		}
		cs := C.CString(sanitizeString(s, maxSingleString))
		C.rte_tel_data_string(d, cs)
		C.free(unsafe.Pointer(cs))
	}
}

// fillDict writes a map as a dict, in key order.
func fillDict(d *C.struct_rte_tel_data, m reflect.Value, depth int) {
	C.rte_tel_data_start_dict(d)
	keys := make([]string, 0, m.Len())
	vals := make(map[string]reflect.Value, m.Len())
	for it := m.MapRange(); it.Next(); {
		k := it.Key().String()
		keys = append(keys, k)
		vals[k] = it.Value()
	}
	slices.Sort(keys)
	used := map[string]bool{}
	for n, k := range keys {
		if n == maxDictEntries-1 && len(keys) > maxDictEntries {
			addDictValue(d, TruncatedKey, reflect.ValueOf(len(keys)-n), depth, used)
			break
		}
		addDictValue(d, k, vals[k], depth, used)
	}
}

// fillIndexDict writes a slice as a dict keyed "0", "1", ...: DPDK nests
// no dicts in arrays, nor arrays of arrays in dicts.
func fillIndexDict(d *C.struct_rte_tel_data, l reflect.Value, depth int) {
	C.rte_tel_data_start_dict(d)
	used := map[string]bool{}
	for n := 0; n < l.Len(); n++ {
		if n == maxDictEntries-1 && l.Len() > maxDictEntries {
			addDictValue(d, TruncatedKey, reflect.ValueOf(l.Len()-n), depth, used)
			break
		}
		addDictValue(d, strconv.Itoa(n), l.Index(n), depth, used)
	}
}

// addDictValue adds one entry; entries DPDK cannot hold are dropped.
func addDictValue(d *C.struct_rte_tel_data, key string, v reflect.Value, depth int, used map[string]bool) {
	kind, rv, u, i, s := classify(v)
	if kind == telSkip {
		return
	}
	key = uniqueKey(sanitizeKey(key), used)
	ck := C.CString(key)
	defer C.free(unsafe.Pointer(ck))
	switch kind {
	case telU64:
		C.rte_tel_data_add_dict_u64(d, ck, C.uint64_t(u))
	case telInt:
		C.rte_tel_data_add_dict_int(d, ck, C.int(i))
	case telString:
		cs := C.CString(sanitizeString(s, maxNameLen))
		C.rte_tel_data_add_dict_string(d, ck, cs)
		C.free(unsafe.Pointer(cs))
	case telMap, telList:
		if depth+1 >= maxTelDepth {
			cs := C.CString("nested too deep")
			C.rte_tel_data_add_dict_string(d, ck, cs)
			C.free(unsafe.Pointer(cs))
			return
		}
		c := C.rte_tel_data_alloc()
		if c == nil {
			return
		}
		if kind == telMap {
			fillDict(c, rv, depth+1)
		} else if !fillScalarArray(c, rv) {
			fillIndexDict(c, rv, depth+1)
		}
		// keep=0: DPDK frees the container once it has written the reply.
		if C.rte_tel_data_add_dict_container(d, ck, c, 0) < 0 {
			C.rte_tel_data_free(c)
		}
	}
}

// fillList writes a top-level slice: an array of scalars, an array of
// arrays of scalars, or otherwise a dict keyed by index.
func fillList(d *C.struct_rte_tel_data, l reflect.Value, depth int) {
	if fillScalarArray(d, l) {
		return
	}
	n := min(l.Len(), maxArrayEntries)
	for j := 0; j < n; j++ {
		kind, rv, _, _, _ := classify(l.Index(j))
		if kind != telList || !scalarArray(rv) {
			fillIndexDict(d, l, depth)
			return
		}
	}
	C.rte_tel_data_start_array(d, C.RTE_TEL_CONTAINER)
	for j := 0; j < n; j++ {
		_, rv, _, _, _ := classify(l.Index(j))
		c := C.rte_tel_data_alloc()
		if c == nil {
			return
		}
		fillScalarArray(c, rv)
		if C.rte_tel_data_add_array_container(d, c, 0) < 0 {
			C.rte_tel_data_free(c)
		}
	}
}

// scalarArray reports whether every element of l is a number, string or
// bool (nil elements are left out).
func scalarArray(l reflect.Value) bool {
	n := min(l.Len(), maxArrayEntries)
	for j := 0; j < n; j++ {
		switch kind, _, _, _, _ := classify(l.Index(j)); kind {
		case telMap, telList:
			return false
		}
	}
	return true
}

// fillScalarArray writes l as a u64 array when every element is a
// non-negative integer, an int array when they are all integers, a string
// array otherwise; it returns false, writing nothing, if an element is a
// container.
func fillScalarArray(d *C.struct_rte_tel_data, l reflect.Value) bool {
	if !scalarArray(l) {
		return false
	}
	n := min(l.Len(), maxArrayEntries)
	type elem struct {
		kind telKind
		u    uint64
		i    int32
		s    string
	}
	elems := make([]elem, 0, n)
	allU64, allInt := true, true
	for j := 0; j < n; j++ {
		kind, _, u, i, s := classify(l.Index(j))
		switch kind {
		case telSkip:
			continue
		case telU64:
			allInt = false
		case telInt:
			if i < 0 {
				allU64 = false
			}
		default:
			allU64, allInt = false, false
		}
		elems = append(elems, elem{kind, u, i, s})
	}
	switch {
	case allU64:
		C.rte_tel_data_start_array(d, C.RTE_TEL_U64_VAL)
		for _, e := range elems {
			if e.kind == telInt {
				e.u = uint64(e.i)
			}
			C.rte_tel_data_add_array_u64(d, C.uint64_t(e.u))
		}
	case allInt:
		C.rte_tel_data_start_array(d, C.RTE_TEL_INT_VAL)
		for _, e := range elems {
			C.rte_tel_data_add_array_int(d, C.int(e.i))
		}
	default:
		C.rte_tel_data_start_array(d, C.RTE_TEL_STRING_VAL)
		for _, e := range elems {
			switch e.kind {
			case telU64:
				e.s = strconv.FormatUint(e.u, 10)
			case telInt:
				e.s = strconv.Itoa(int(e.i))
			}
			cs := C.CString(sanitizeString(e.s, maxNameLen))
			C.rte_tel_data_add_array_string(d, cs)
			C.free(unsafe.Pointer(cs))
		}
	}
	return true
}

// sanitizeKey makes a dict key DPDK accepts: letters, digits, '_' and
// '/', in at most 127 bytes.
func sanitizeKey(k string) string {
	if k == "" {
		return "_"
	}
	b := []byte(k)
	for i, c := range b {
		if !validNameByte(c) {
			b[i] = '_'
		}
	}
	if len(b) > maxNameLen {
		b = b[:maxNameLen]
	}
	return string(b)
}

// uniqueKey keeps keys that sanitize alike apart ("p-0" and "p_0").
func uniqueKey(k string, used map[string]bool) string {
	if !used[k] {
		used[k] = true
		return k
	}
	for n := 2; ; n++ {
		suffix := "_" + strconv.Itoa(n)
		c := k[:min(len(k), maxNameLen-len(suffix))] + suffix
		if !used[c] {
			used[c] = true
			return c
		}
	}
}

// sanitizeString makes s printable ASCII, cut to max bytes: DPDK 22.11
// writes bytes above 0x7f as invalid JSON escapes, and a NUL would end
// the C string early.
func sanitizeString(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		if r >= utf8.RuneSelf || r < ' ' && r != '\t' && r != '\n' && r != '\r' {
			return '?'
		}
		return r
	}, s)
	return s[:min(len(s), max)]
}
