package flowrule

import "errors"

// CompileOffloaded is Compile for a port whose rules are split between
// the NIC and software: rule i with hw[i] set is matched like any other,
// so that packets take the NIC's path through priorities and jumps, but
// Apply and ApplyPath neither count it nor run its actions, which the NIC
// already did.
func CompileOffloaded(rules []Rule, hw []bool) (*Table, error) {
	if len(hw) != len(rules) {
		return nil, errors.New("flowrule: one offloaded flag per rule")
	}
	t, err := Compile(rules)
	if err != nil {
		return nil, err
	}
	for i, on := range hw {
		t.cr[i].offloaded = on
	}
	return t, nil
}
