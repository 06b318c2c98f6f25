package flowrule

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
)

// CommandKind is a flow sub-command.
type CommandKind uint8

const (
	CmdValidate CommandKind = iota + 1
	CmdCreate
	CmdList
	CmdQuery
	CmdDestroy
	CmdFlush
)

var commandNames = [...]string{"", "validate", "create", "list", "query", "destroy", "flush"}

func (k CommandKind) String() string {
	if int(k) < len(commandNames) && k > 0 {
		return commandNames[k]
	}
	return "command-" + itoa(uint64(k))
}

// Command is one parsed flow command. Port is the port token as typed
// (an id or a name); the caller resolves it.
type Command struct {
	Kind   CommandKind
	Port   string
	Rule   Rule     // validate, create
	Rules  []uint32 // query: the rule queried (its count); destroy: the rules
	Groups []uint32 // list: the groups to list; none lists all
}

// ParseError is a syntax or validation error. Pos is the index of the
// offending token among the line's whitespace-separated tokens; it is the
// token count when the line ended too early, and -1 for an error about the
// rule as a whole.
type ParseError struct {
	Pos   int
	Token string
	Msg   string
}

func (e *ParseError) Error() string { return e.Msg }

// errIncomplete stops the parser at the end of the tokens when completing.
var errIncomplete = errors.New("incomplete")

type parser struct {
	toks  []string
	pos   int
	comp  bool     // collecting completions
	cands []string // keywords valid at the end of the tokens
}

var (
	subcommands = []string{"validate", "create", "destroy", "flush", "list", "query"}
	attrWords   = []string{"group", "priority", "ingress", "egress", "transfer", "pattern"}
	itemWords   = []string{"eth", "vlan", "ipv4", "ipv6", "udp", "tcp", "ib_bth", "end"}
	opWords     = []string{"is", "spec", "mask", "last", "prefix"}
	actionWords = []string{"queue", "rss", "mark", "flag", "count", "drop", "jump",
		"set_ipv4_dscp", "set_ipv6_dscp", "meter", "end"}
	colorWords  = []string{"pass", "drop", "mark"}
	meterAlgos  = []string{"srtcm", "trtcm"}
	srtcmParams = []string{"id", "cir", "cbs", "ebs", "green", "yellow", "red", "/"}
	trtcmParams = []string{"id", "cir", "pir", "cbs", "pbs", "green", "yellow", "red", "/"}
)

// actionArgs are the arguments each action takes, for errors and
// completion ("/" ends the action).
var actionArgs = [numActionTypes][]string{
	ActQueue:       {"index", "/"},
	ActRSS:         {"queues", "/"},
	ActMark:        {"id", "/"},
	ActFlag:        {"/"},
	ActCount:       {"/"},
	ActDrop:        {"/"},
	ActJump:        {"group", "/"},
	ActSetIPv4DSCP: {"dscp_value", "/"},
	ActSetIPv6DSCP: {"dscp_value", "/"},
	ActMeter:       meterAlgos,
}

func (p *parser) fail(pos int, msg string) error {
	tok := ""
	if pos >= 0 && pos < len(p.toks) {
		tok = p.toks[pos]
	}
	return &ParseError{Pos: pos, Token: tok, Msg: msg}
}

// next consumes a token. At the end of the tokens it records cands for
// completion, or fails saying what was expected.
func (p *parser) next(cands []string, what string) (string, error) {
	if p.pos >= len(p.toks) {
		if p.comp {
			p.cands = cands
			return "", errIncomplete
		}
		return "", p.fail(p.pos, "unexpected end of command, expected "+what)
	}
	p.pos++
	return p.toks[p.pos-1], nil
}

// atEnd reports whether the tokens are used up at a point where the
// command may end, recording cands as what could still follow.
func (p *parser) atEnd(cands []string) bool {
	if p.pos < len(p.toks) {
		return false
	}
	if p.comp {
		p.cands = cands
	}
	return true
}

func quote(s string) string { return `"` + s + `"` }

// Parse parses one flow command (see the package documentation for the
// grammar). Errors are *ParseError.
func Parse(line string) (Command, error) {
	p := &parser{toks: strings.Fields(line)}
	return p.command()
}

// Complete returns the keywords that may follow tokens (the complete words
// typed so far) for a console's Tab completion: sub-commands, attributes,
// item and field names, is/spec/mask/last/prefix, "/", "end", action names
// and arguments. It returns nil where a value (port, number, address) is
// expected or when tokens do not parse.
func Complete(tokens []string) []string {
	p := &parser{toks: tokens, comp: true}
	_, err := p.command()
	if err != nil && err != errIncomplete {
		return nil
	}
	return append([]string(nil), p.cands...)
}

func (p *parser) command() (Command, error) {
	var c Command
	t, err := p.next([]string{"flow"}, `"flow"`)
	if err != nil {
		return c, err
	}
	if t != "flow" {
		return c, p.fail(p.pos-1, "unknown command "+quote(t)+", expected \"flow\"")
	}
	sub, err := p.next(subcommands, "a flow command ("+strings.Join(subcommands, ", ")+")")
	if err != nil {
		return c, err
	}
	switch sub {
	case "validate":
		c.Kind = CmdValidate
	case "create":
		c.Kind = CmdCreate
	case "list":
		c.Kind = CmdList
	case "query":
		c.Kind = CmdQuery
	case "destroy":
		c.Kind = CmdDestroy
	case "flush":
		c.Kind = CmdFlush
	default:
		return c, p.fail(p.pos-1, "unknown flow command "+quote(sub)+" (commands: "+strings.Join(subcommands, ", ")+")")
	}
	if c.Port, err = p.next(nil, "a port id or name after \"flow "+sub+"\""); err != nil {
		return c, err
	}
	switch c.Kind {
	case CmdValidate, CmdCreate:
		if err = p.rule(&c.Rule); err != nil {
			return c, err
		}
	case CmdList:
		for !p.atEnd([]string{"group"}) {
			t, _ := p.next(nil, "")
			if t != "group" {
				return c, p.fail(p.pos-1, "flow list: unexpected "+quote(t)+", expected \"group\" or the end of the command")
			}
			g, err := p.num32("a group id after \"group\"")
			if err != nil {
				return c, err
			}
			c.Groups = append(c.Groups, g)
		}
	case CmdQuery:
		id, err := p.num32("a rule id")
		if err != nil {
			return c, err
		}
		c.Rules = []uint32{id}
		t, err := p.next([]string{"count"}, `"count"`)
		if err != nil {
			return c, err
		}
		if t != "count" {
			return c, p.fail(p.pos-1, "flow query: cannot query "+quote(t)+", only \"count\"")
		}
	case CmdDestroy:
		for !p.atEnd([]string{"rule"}) {
			t, _ := p.next(nil, "")
			if t != "rule" {
				return c, p.fail(p.pos-1, "flow destroy: unexpected "+quote(t)+", expected \"rule\" or the end of the command")
			}
			id, err := p.num32("a rule id after \"rule\"")
			if err != nil {
				return c, err
			}
			c.Rules = append(c.Rules, id)
		}
	}
	if p.pos < len(p.toks) {
		return c, p.fail(p.pos, "unexpected "+quote(p.toks[p.pos])+" after the end of the command")
	}
	if !p.comp && (c.Kind == CmdValidate || c.Kind == CmdCreate) {
		if err := c.Rule.Validate(); err != nil {
			return c, &ParseError{Pos: -1, Msg: err.Error()}
		}
	}
	return c, nil
}

func (p *parser) rule(r *Rule) error {
	for {
		t, err := p.next(attrWords, "an attribute or \"pattern\"")
		if err != nil {
			return err
		}
		switch t {
		case "group":
			if r.Group, err = p.num32("a group id after \"group\""); err != nil {
				return err
			}
			continue
		case "priority":
			if r.Priority, err = p.num32("a priority level after \"priority\""); err != nil {
				return err
			}
			continue
		case "ingress":
			r.Ingress = true
			continue
		case "egress":
			r.Egress = true
			continue
		case "transfer":
			r.Transfer = true
			continue
		case "pattern":
		default:
			return p.fail(p.pos-1, "unknown attribute "+quote(t)+" (expected group, priority, ingress, egress, transfer or pattern)")
		}
		break
	}
	for {
		t, err := p.next(itemWords, "an item or \"end\"")
		if err != nil {
			return err
		}
		if t == "end" {
			break
		}
		typ := itemByName(t)
		if typ == 0 {
			return p.fail(p.pos-1, "unknown item "+quote(t)+" (items: "+strings.Join(itemWords, ", ")+")")
		}
		it, err := p.item(typ)
		if err != nil {
			return err
		}
		r.Items = append(r.Items, it)
	}
	t, err := p.next([]string{"actions"}, `"actions"`)
	if err != nil {
		return err
	}
	if t != "actions" {
		return p.fail(p.pos-1, "unexpected "+quote(t)+" after the pattern's \"end\", expected \"actions\"")
	}
	for {
		t, err := p.next(actionWords, "an action or \"end\"")
		if err != nil {
			return err
		}
		if t == "end" {
			return nil
		}
		typ := actionByName(t)
		if typ == 0 {
			return p.fail(p.pos-1, "unknown action "+quote(t)+" (actions: "+strings.Join(actionWords, ", ")+")")
		}
		a, err := p.action(typ)
		if err != nil {
			return err
		}
		r.Actions = append(r.Actions, a)
	}
}

func actionByName(s string) ActionType {
	for t := ActQueue; t < numActionTypes; t++ {
		if actionNames[t] == s {
			return t
		}
	}
	return 0
}

func (p *parser) item(t ItemType) (Item, error) {
	d := itemDescs[t]
	var spec, mask, last img
	var specSet, maskSet, lastSet bool
	names := d.fieldNames()
	fieldCands := append(names[:len(names):len(names)], "/")
	it := Item{Type: t}
	for {
		tok, err := p.next(fieldCands, "a field of "+d.name+" or \"/\"")
		if err != nil {
			return it, err
		}
		if tok == "/" {
			break
		}
		f := d.field(tok)
		if f == nil {
			return it, p.fail(p.pos-1, "item "+d.name+": unknown field "+quote(tok)+" (fields: "+strings.Join(names, ", ")+")")
		}
		op, err := p.next(opWords, "is, spec, mask, last or prefix after "+quote(tok))
		if err != nil {
			return it, err
		}
		ctx := "item " + d.name + ": field " + f.name
		if !slices.Contains(opWords, op) {
			return it, p.fail(p.pos-1, ctx+": expected is, spec, mask, last or prefix, got "+quote(op))
		}
		if op == "prefix" {
			n, err := p.number(ctx+": a prefix length", uint64(f.width()))
			if err != nil {
				return it, err
			}
			f.setPrefix(&mask, int(n))
			maskSet = true
			continue
		}
		var dst *img
		switch op {
		case "is", "spec":
			dst, specSet = &spec, true
		case "mask":
			dst, maskSet = &mask, true
		case "last":
			dst, lastSet = &last, true
		}
		if err := p.value(f, dst, ctx); err != nil {
			return it, err
		}
		if op == "is" {
			// Full mask of the (sub-)field, as testpmd's objmask write.
			f.setPrefix(&mask, f.width())
			maskSet = true
		}
	}
	if (specSet || lastSet) && !maskSet {
		// testpmd leaves item->mask NULL: the PMD uses the default mask.
		mask = d.defMask
	}
	var zero img
	if spec == zero && mask == zero && last == zero {
		return it, nil // no effect: same as NULL spec
	}
	it.setImages(&spec, &mask, &last, last != zero)
	return it, nil
}

// value parses a field value into dst.
func (p *parser) value(f *field, dst *img, ctx string) error {
	switch f.kind {
	case kUint:
		v, err := p.number(ctx+": a value", f.ones())
		if err != nil {
			return err
		}
		f.set(dst, v)
	case kMAC:
		t, err := p.next(nil, ctx+": a MAC address")
		if err != nil {
			return err
		}
		m, ok := parseMAC(t)
		if !ok {
			return p.fail(p.pos-1, ctx+": "+quote(t)+" is not a MAC address (expected xx:xx:xx:xx:xx:xx)")
		}
		copy(f.bytes(dst), m[:])
	case kIPv4, kIPv6:
		what := "an IPv4 address"
		if f.kind == kIPv6 {
			what = "an IPv6 address"
		}
		t, err := p.next(nil, ctx+": "+what)
		if err != nil {
			return err
		}
		a, err := netip.ParseAddr(t)
		if err != nil || a.Zone() != "" || (f.kind == kIPv4) != a.Is4() {
			return p.fail(p.pos-1, ctx+": "+quote(t)+" is not "+what)
		}
		if f.kind == kIPv4 {
			b := a.As4()
			copy(f.bytes(dst), b[:])
		} else {
			b := a.As16()
			copy(f.bytes(dst), b[:])
		}
	}
	return nil
}

// number parses an unsigned value no larger than max.
func (p *parser) number(what string, max uint64) (uint64, error) {
	t, err := p.next(nil, what)
	if err != nil {
		return 0, err
	}
	v, msg := parseUint(t)
	if msg != "" {
		return 0, p.fail(p.pos-1, what+": "+quote(t)+" "+msg)
	}
	if v > max {
		return 0, p.fail(p.pos-1, what+": "+t+" is above the maximum "+itoa(max))
	}
	return v, nil
}

func (p *parser) num32(what string) (uint32, error) {
	v, err := p.number(what, 1<<32-1)
	return uint32(v), err
}

// parseUint reads decimal or 0x hexadecimal. A leading zero is refused:
// testpmd (strtoumax base 0) would read the number as octal.
func parseUint(s string) (uint64, string) {
	base := uint64(10)
	digits := s
	if len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		base, digits = 16, s[2:]
	} else if len(s) > 1 && s[0] == '0' {
		return 0, "has a leading zero (testpmd reads that as octal); write it in decimal or 0x hex"
	}
	if digits == "" {
		return 0, "is not a number"
	}
	var v uint64
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		var d uint64
		switch {
		case c >= '0' && c <= '9':
			d = uint64(c - '0')
		case base == 16 && c >= 'a' && c <= 'f':
			d = uint64(c-'a') + 10
		case base == 16 && c >= 'A' && c <= 'F':
			d = uint64(c-'A') + 10
		default:
			return 0, "is not a number (decimal or 0x hex)"
		}
		if v > (^uint64(0)-d)/base {
			return 0, "is too large"
		}
		v = v*base + d
	}
	return v, ""
}

func parseMAC(s string) (m [6]byte, ok bool) {
	if len(s) != 17 {
		return m, false
	}
	for i := 0; i < 6; i++ {
		if i > 0 && s[3*i-1] != ':' {
			return m, false
		}
		var b byte
		for _, c := range []byte(s[3*i : 3*i+2]) {
			var d byte
			switch {
			case c >= '0' && c <= '9':
				d = c - '0'
			case c >= 'a' && c <= 'f':
				d = c - 'a' + 10
			case c >= 'A' && c <= 'F':
				d = c - 'A' + 10
			default:
				return m, false
			}
			b = b<<4 | d
		}
		m[i] = b
	}
	return m, true
}

func (p *parser) action(t ActionType) (Action, error) {
	a := Action{Type: t}
	name := t.String()
	if t == ActMeter {
		return p.meter(a)
	}
	args := actionArgs[t]
	for {
		tok, err := p.next(args, "an argument of "+name+" or \"/\"")
		if err != nil {
			return a, err
		}
		if tok == "/" {
			return a, nil
		}
		ctx := "action " + name + ": " + tok
		switch {
		case t == ActQueue && tok == "index":
			v, err := p.number(ctx, 1<<16-1)
			if err != nil {
				return a, err
			}
			a.Index = uint16(v)
		case t == ActMark && tok == "id":
			if a.ID, err = p.num32(ctx); err != nil {
				return a, err
			}
		case t == ActJump && tok == "group":
			if a.Group, err = p.num32(ctx); err != nil {
				return a, err
			}
		case (t == ActSetIPv4DSCP || t == ActSetIPv6DSCP) && (tok == "dscp_value" || tok == "dscp"):
			v, err := p.number(ctx, 63)
			if err != nil {
				return a, err
			}
			a.DSCP = uint8(v)
		case t == ActRSS && tok == "queues":
			a.Queues = nil
			for {
				q, err := p.next([]string{"end"}, "a queue index or \"end\"")
				if err != nil {
					return a, err
				}
				if q == "end" {
					break
				}
				p.pos--
				v, err := p.number("action rss: queues: a queue index", 1<<16-1)
				if err != nil {
					return a, err
				}
				if len(a.Queues) == maxRSSQueues {
					return a, p.fail(p.pos-1, "action rss: more than "+itoa(maxRSSQueues)+" queues")
				}
				a.Queues = append(a.Queues, uint16(v))
			}
		default:
			return a, p.fail(p.pos-1, "action "+name+": unknown argument "+quote(tok)+" (arguments: "+
				strings.Join(args[:len(args)-1], ", ")+"; \"/\" ends the action)")
		}
	}
}

func (p *parser) meter(a Action) (Action, error) {
	alg, err := p.next(meterAlgos, "srtcm or trtcm after \"meter\"")
	if err != nil {
		return a, err
	}
	m := &Meter{Red: ColorAction{Kind: ColorDrop}}
	a.Meter = m
	var params []string
	switch alg {
	case "srtcm":
		m.Algorithm, params = SrTCM, srtcmParams
	case "trtcm":
		m.Algorithm, params = TrTCM, trtcmParams
	case "mtr_id":
		return a, p.fail(p.pos-1, "action meter: \"mtr_id\" refers to a meter made elsewhere; give the profile inline: meter srtcm|trtcm ...")
	default:
		return a, p.fail(p.pos-1, "action meter: unknown algorithm "+quote(alg)+", expected srtcm or trtcm")
	}
	given := map[string]bool{}
	for {
		tok, err := p.next(params, "an argument of meter "+alg+" or \"/\"")
		if err != nil {
			return a, err
		}
		if tok == "/" {
			break
		}
		ctx := "action meter: " + tok
		if !slices.Contains(params, tok) {
			return a, p.fail(p.pos-1, "action meter "+alg+": unknown argument "+quote(tok)+" (arguments: "+
				strings.Join(params[:len(params)-1], ", ")+"; \"/\" ends the action)")
		}
		given[tok] = true
		switch tok {
		case "id":
			if m.ID, err = p.num32(ctx); err != nil {
				return a, err
			}
		case "cir", "pir", "cbs", "ebs", "pbs":
			v, err := p.number(ctx, ^uint64(0))
			if err != nil {
				return a, err
			}
			switch tok {
			case "cir":
				m.CIR = v
			case "pir":
				m.PIR = v
			case "cbs":
				m.CBS = v
			case "ebs":
				m.EBS = v
			default:
				m.PBS = v
			}
		case "green", "yellow", "red":
			k, err := p.next(colorWords, "pass, drop or mark after "+quote(tok))
			if err != nil {
				return a, err
			}
			var c ColorAction
			switch k {
			case "pass":
			case "drop":
				c.Kind = ColorDrop
			case "mark":
				c.Kind = ColorMark
				if c.Mark, err = p.num32(ctx + ": mark: a mark id"); err != nil {
					return a, err
				}
			default:
				return a, p.fail(p.pos-1, ctx+": unknown colour action "+quote(k)+" (expected pass, drop or mark N)")
			}
			switch tok {
			case "green":
				m.Green = c
			case "yellow":
				m.Yellow = c
			default:
				m.Red = c
			}
		}
	}
	if !p.comp {
		need := []string{"cir", "cbs", "ebs"}
		if m.Algorithm == TrTCM {
			need = []string{"cir", "pir", "cbs", "pbs"}
		}
		var missing []string
		for _, n := range need {
			if !given[n] {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			return a, p.fail(p.pos-1, "action meter "+alg+": missing "+strings.Join(missing, ", ")+" before \"/\"")
		}
	}
	return a, nil
}
