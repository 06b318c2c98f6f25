package config

import (
	"fmt"
	"reflect"
	"slices"
)

// Change is one key whose value differs between two configurations,
// named as in the file ("port[1].rx_desc", "qos.dscp_to_tc.26").
type Change struct {
	Key      string
	Old, New string // "" for absent
}

func (c Change) String() string {
	return fmt.Sprintf("%s: %s → %s", c.Key, orAbsent(c.Old), orAbsent(c.New))
}

func orAbsent(s string) string {
	if s == "" {
		return "(unset)"
	}
	return s
}

// Diff lists every key whose value differs from a to b, in file order.
func Diff(a, b *Config) []Change {
	var out []Change
	diffValue(&out, "", reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem())
	return out
}

func diffValue(out *[]Change, key string, a, b reflect.Value) {
	switch a.Kind() {
	case reflect.Pointer:
		switch {
		case a.IsNil() && b.IsNil():
		case a.IsNil() && b.Elem().Kind() == reflect.Struct:
			diffValue(out, key, reflect.Zero(b.Type().Elem()), b.Elem())
		case b.IsNil() && a.Elem().Kind() == reflect.Struct:
			diffValue(out, key, a.Elem(), reflect.Zero(a.Type().Elem()))
		case a.IsNil() || b.IsNil():
			*out = append(*out, Change{key, render(a), render(b)})
		default:
			diffValue(out, key, a.Elem(), b.Elem())
		}
	case reflect.Struct:
		names, index := fieldsOf(a.Type())
		for _, name := range names {
			diffValue(out, join(key, name), a.Field(index[name]), b.Field(index[name]))
		}
	case reflect.Slice:
		if a.Type().Elem().Kind() != reflect.Struct {
			if !reflect.DeepEqual(a.Interface(), b.Interface()) {
				*out = append(*out, Change{key, render(a), render(b)})
			}
			return
		}
		// A table added or removed is listed key by key against an
		// empty one.
		zero := reflect.Zero(a.Type().Elem())
		for i := 0; i < max(a.Len(), b.Len()); i++ {
			k := fmt.Sprintf("%s[%d]", key, i)
			switch {
			case i >= a.Len():
				diffValue(out, k, zero, b.Index(i))
			case i >= b.Len():
				diffValue(out, k, a.Index(i), zero)
			default:
				diffValue(out, k, a.Index(i), b.Index(i))
			}
		}
	case reflect.Map:
		keys := map[string]reflect.Value{}
		for _, m := range []reflect.Value{a, b} {
			for _, k := range m.MapKeys() {
				keys[fmt.Sprint(k.Interface())] = k
			}
		}
		names := make([]string, 0, len(keys))
		for n := range keys {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			va, vb := a.MapIndex(keys[n]), b.MapIndex(keys[n])
			if !va.IsValid() || !vb.IsValid() || !reflect.DeepEqual(va.Interface(), vb.Interface()) {
				*out = append(*out, Change{key + "." + n, render(va), render(vb)})
			}
		}
	default:
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			*out = append(*out, Change{key, render(a), render(b)})
		}
	}
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// render writes a value the way the file would.
func render(v reflect.Value) string {
	if !v.IsValid() {
		return ""
	}
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return ""
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.String:
		return fmt.Sprintf("%q", v.String())
	case reflect.Struct:
		return "{…}"
	}
	return fmt.Sprint(v.Interface())
}
