package config

import (
	"math"
	"reflect"
	"sort"
	"strings"
	"time"
)

// The TOML library decodes straight into structs but stops at the first type
// mismatch and does not know array indices. Users want every error at once,
// so the file is parsed into generic values and copied into the Config here,
// collecting every unknown key and type mismatch on the way.

// defaulter is implemented by config structs with non-zero defaults. It is
// called before decoding, so a key missing from the file keeps its default;
// for arrays of tables it is called on each new element.
type defaulter interface{ setDefaults() }

// fieldsOf maps the TOML names of a struct's fields to their indices.
func fieldsOf(t reflect.Type) (names []string, index map[string]int) {
	index = map[string]int{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		names = append(names, name)
		index[name] = i
	}
	return names, index
}

// tomlValue is a config type that reads its own TOML value, for keys
// that take more than one TOML type.
type tomlValue interface{ setTOML(raw any) error }

// decode copies raw into rv, reporting problems under p. It reports whether
// rv was set without error.
func (c *checker) decode(p path, raw any, rv reflect.Value) bool {
	if v, ok := rv.Addr().Interface().(tomlValue); ok {
		if err := v.setTOML(raw); err != nil {
			c.errorf(p, "%v", err)
			return false
		}
		return true
	}
	t := rv.Type()
	switch t.Kind() {
	case reflect.Struct:
		m, ok := raw.(map[string]any)
		if !ok {
			return c.mismatch(p, t, raw)
		}
		names, index := fieldsOf(t)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		good := true
		for _, k := range keys {
			i, known := index[k]
			if !known {
				c.errorf(p.key(k), "unknown key %q%s", k, suggest(k, names))
				good = false
				continue
			}
			good = c.decode(p.key(k), m[k], rv.Field(i)) && good
		}
		return good

	case reflect.Map:
		// Tables with free-form keys, such as dscp_to_tc = { 26 = 3 }.
		m, ok := raw.(map[string]any)
		if !ok || t.Key().Kind() != reflect.String {
			return c.mismatch(p, t, raw)
		}
		out := reflect.MakeMapWithSize(t, len(m))
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		good := true
		for _, k := range keys {
			ev := reflect.New(t.Elem()).Elem()
			if d, ok := ev.Addr().Interface().(defaulter); ok {
				d.setDefaults()
			}
			if c.decode(p.key(k), m[k], ev) {
				out.SetMapIndex(reflect.ValueOf(k).Convert(t.Key()), ev)
			} else {
				good = false
			}
		}
		rv.Set(out)
		return good

	case reflect.Pointer:
		v := reflect.New(t.Elem())
		if !rv.IsNil() {
			v.Elem().Set(rv.Elem())
		}
		ok := c.decode(p, raw, v.Elem())
		// A table with a bad key is kept with its other keys, as a
		// struct field is, so that validation still checks those.
		if _, table := raw.(map[string]any); ok || table && t.Elem().Kind() == reflect.Struct {
			rv.Set(v)
		}
		return ok

	case reflect.Slice:
		var elems []any
		switch a := raw.(type) {
		case []any:
			elems = a
		case []map[string]any:
			for _, m := range a {
				elems = append(elems, m)
			}
		default:
			return c.mismatch(p, t, raw)
		}
		s := reflect.MakeSlice(t, len(elems), len(elems))
		good := true
		for i, e := range elems {
			ev := s.Index(i)
			if d, ok := ev.Addr().Interface().(defaulter); ok {
				d.setDefaults()
			}
			good = c.decode(p.index(i), e, ev) && good
		}
		rv.Set(s)
		return good

	case reflect.String:
		s, ok := raw.(string)
		if !ok {
			return c.mismatch(p, t, raw)
		}
		rv.SetString(s)
		return true

	case reflect.Bool:
		b, ok := raw.(bool)
		if !ok {
			return c.mismatch(p, t, raw)
		}
		rv.SetBool(b)
		return true

	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := raw.(int64)
		if !ok {
			return c.mismatch(p, t, raw)
		}
		if rv.OverflowInt(n) {
			c.errorf(p, "%d is out of range", n)
			return false
		}
		rv.SetInt(n)
		return true

	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := raw.(int64)
		if !ok {
			return c.mismatch(p, t, raw)
		}
		if n < 0 || rv.OverflowUint(uint64(n)) {
			c.errorf(p, "%d is out of range", n)
			return false
		}
		rv.SetUint(uint64(n))
		return true

	case reflect.Float32, reflect.Float64:
		var f float64
		switch v := raw.(type) {
		case float64:
			f = v
		case int64:
			f = float64(v)
		default:
			return c.mismatch(p, t, raw)
		}
		if t.Kind() == reflect.Float32 && math.Abs(f) > math.MaxFloat32 && !math.IsInf(f, 0) {
			c.errorf(p, "%g is out of range", f)
			return false
		}
		rv.SetFloat(f)
		return true
	}
	// A Go type this decoder does not handle is a bug in this package, but
	// reporting it beats panicking in a daemon's startup path.
	c.errorf(p, "internal error: cannot decode into %s", t)
	return false
}

func (c *checker) mismatch(p path, want reflect.Type, raw any) bool {
	msg := "expected " + typeName(want) + ", got " + tomlType(raw)
	if want.Kind() == reflect.Slice && want.Elem().Kind() == reflect.Struct {
		if _, isTable := raw.(map[string]any); isTable {
			// The header names the array without indices: [[qos.port.tc]].
			var name path
			for _, s := range p {
				if !strings.HasPrefix(s, "[") {
					name = append(name, s)
				}
			}
			msg += " (write [[" + name.String() + "]], not [" + name.String() + "])"
		}
	}
	c.errorf(p, "%s", msg)
	return false
}

// typeName describes a Go field type in TOML terms, with an article.
func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return typeName(t.Elem())
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a float"
	case reflect.Struct, reflect.Map:
		return "a table"
	case reflect.Slice:
		switch typeName(t.Elem()) {
		case "a table":
			return "an array of tables"
		case "a string":
			return "an array of strings"
		case "an integer":
			return "an array of integers"
		}
		return "an array"
	}
	return t.String()
}

// tomlType names the TOML type of a value produced by the TOML parser.
func tomlType(v any) string {
	switch v := v.(type) {
	case string:
		return "string"
	case int64:
		return "integer"
	case float64:
		return "float"
	case bool:
		return "boolean"
	case time.Time:
		switch v.Location().String() {
		case "date-local":
			return "date"
		case "time-local":
			return "time"
		}
		return "datetime"
	case []any:
		return "array"
	case []map[string]any:
		return "array of tables"
	case map[string]any:
		return "table"
	}
	return "value"
}

// suggest returns ` (did you mean "x"?)` for the closest of names, when it
// is close enough to be a plausible typo.
func suggest(k string, names []string) string {
	best, bestD := "", math.MaxInt
	for _, n := range names {
		if d := editDistance(strings.ToLower(k), n); d < bestD {
			best, bestD = n, d
		}
	}
	if best == "" || bestD > max(1, min(2, len(best)/3)) {
		return ""
	}
	return ` (did you mean "` + best + `"?)`
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
