package envoy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// File is one configuration file of envoyproxy/ratelimit, as written: a
// domain and its tree of descriptors.
type File struct {
	Name        string // the file name, for errors
	Domain      string
	Descriptors []Descriptor
}

// Descriptor is one entry of a descriptor list: a key, an optional value
// (a trailing "*" matches any value with that prefix), an optional rate
// limit and the nested descriptors that refine it.
type Descriptor struct {
	Key, Value     string
	RateLimit      *RateLimit // nil: a placeholder (or, without children, an exemption)
	ShadowMode     bool
	QuotaMode      bool
	DetailedMetric bool
	ValueToMetric  bool
	ShareThreshold bool
	Descriptors    []Descriptor
	Line, Col      int
}

// RateLimit is the rate_limit block of a descriptor.
type RateLimit struct {
	Unit            string // second, minute, hour, day, week, month or year
	RequestsPerUnit uint32
	Unlimited       bool
	Name            string
	Replaces        []string
}

// The keys the reference accepts; any other is an error there, and here.
var descriptorKeys = map[string]bool{
	"key": true, "value": true, "rate_limit": true, "descriptors": true, "shadow_mode": true,
	"quota_mode": true, "detailed_metric": true, "value_to_metric": true, "share_threshold": true,
}

var rateLimitKeys = map[string]bool{"unit": true, "requests_per_unit": true, "unlimited": true, "name": true, "replaces": true}

// parser collects the problems of one file.
type parser struct {
	file     string
	problems ConfigErrors
}

func (p *parser) add(n *yaml.Node, path, format string, args ...any) {
	p.problems = append(p.problems, Problem{File: p.file, Line: n.Line, Col: n.Column, Path: path, Message: fmt.Sprintf(format, args...)})
}

// ParseFile parses one file of the reference's format. It reports every
// problem it finds, each at its line and column, as a ConfigErrors.
func ParseFile(name string, data []byte) (*File, error) {
	p := &parser{file: name}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidConfig, name, err)
	}
	f := &File{Name: name}
	if len(doc.Content) == 0 {
		p.problems = append(p.problems, Problem{File: name, Line: 1, Col: 1, Path: "domain", Message: "the file is empty: it needs a domain"})
		return nil, p.problems
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		p.add(root, "", "the document must be a mapping with domain and descriptors")
		return nil, p.problems
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		switch k.Value {
		case "domain":
			f.Domain = p.str(v, "domain")
		case "descriptors":
			f.Descriptors = p.descriptors(v, "descriptors")
		default:
			p.add(k, k.Value, "unknown key %q (want domain or descriptors)", k.Value)
		}
	}
	if f.Domain == "" {
		p.add(root, "domain", "the file has no domain (or an empty one)")
	}
	if len(p.problems) > 0 {
		return nil, p.problems
	}
	return f, nil
}

func (p *parser) str(n *yaml.Node, path string) string {
	if n.Kind != yaml.ScalarNode {
		p.add(n, path, "want a string")
		return ""
	}
	if n.Tag == "!!null" {
		return ""
	}
	return n.Value
}

func (p *parser) boolean(n *yaml.Node, path string) bool {
	var b bool
	if n.Kind != yaml.ScalarNode || n.Decode(&b) != nil {
		p.add(n, path, "want true or false, not %q", n.Value)
	}
	return b
}

func (p *parser) descriptors(n *yaml.Node, path string) []Descriptor {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		p.add(n, path, "want a list of descriptors")
		return nil
	}
	out := make([]Descriptor, 0, len(n.Content))
	for i, item := range n.Content {
		out = append(out, p.descriptor(item, fmt.Sprintf("%s[%d]", path, i)))
	}
	return out
}

func (p *parser) descriptor(n *yaml.Node, path string) Descriptor {
	d := Descriptor{Line: n.Line, Col: n.Column}
	if n.Kind != yaml.MappingNode {
		p.add(n, path, "want a mapping with key, value, rate_limit, descriptors")
		return d
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		at := path + "." + k.Value
		switch k.Value {
		case "key":
			d.Key = p.str(v, at)
		case "value":
			d.Value = p.str(v, at)
		case "rate_limit":
			d.RateLimit = p.rateLimit(v, at)
		case "descriptors":
			d.Descriptors = p.descriptors(v, at)
		case "shadow_mode":
			d.ShadowMode = p.boolean(v, at)
		case "quota_mode":
			d.QuotaMode = p.boolean(v, at)
		case "detailed_metric":
			d.DetailedMetric = p.boolean(v, at)
		case "value_to_metric":
			d.ValueToMetric = p.boolean(v, at)
		case "share_threshold":
			d.ShareThreshold = p.boolean(v, at)
		default:
			p.add(k, at, "unknown key %q (want one of %s)", k.Value, keyList(descriptorKeys))
		}
	}
	if d.Key == "" {
		p.add(n, path+".key", "descriptor has an empty key")
	}
	if d.ShareThreshold && !strings.HasSuffix(d.finalKey(), "*") {
		p.add(n, path+".share_threshold", "share_threshold needs a wildcard value (ending with '*'), not %q", d.Value)
	}
	p.checkRateLimit(n, path, d.RateLimit)
	return d
}

func (p *parser) rateLimit(n *yaml.Node, path string) *RateLimit {
	rl := &RateLimit{}
	if n.Kind != yaml.MappingNode {
		p.add(n, path, "want a mapping with unit and requests_per_unit")
		return rl
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		at := path + "." + k.Value
		switch k.Value {
		case "unit":
			rl.Unit = p.str(v, at)
		case "requests_per_unit":
			u, err := strconv.ParseUint(v.Value, 10, 32)
			if v.Kind != yaml.ScalarNode || err != nil {
				p.add(v, at, "want a whole number from 0 to 4294967295, not %q", v.Value)
			}
			rl.RequestsPerUnit = uint32(u)
		case "unlimited":
			rl.Unlimited = p.boolean(v, at)
		case "name":
			rl.Name = p.str(v, at)
		case "replaces":
			rl.Replaces = p.replaces(v, at)
		default:
			p.add(k, at, "unknown key %q (want one of %s)", k.Value, keyList(rateLimitKeys))
		}
	}
	return rl
}

func (p *parser) replaces(n *yaml.Node, path string) []string {
	if n.Kind != yaml.SequenceNode {
		p.add(n, path, "want a list of {name: ...}")
		return nil
	}
	var out []string
	for i, item := range n.Content {
		at := fmt.Sprintf("%s[%d]", path, i)
		name := ""
		if item.Kind == yaml.MappingNode {
			for j := 0; j+1 < len(item.Content); j += 2 {
				if item.Content[j].Value != "name" {
					p.add(item.Content[j], at, "unknown key %q (want name)", item.Content[j].Value)
					continue
				}
				name = p.str(item.Content[j+1], at+".name")
			}
		} else {
			p.add(item, at, "want {name: ...}")
		}
		if name == "" {
			p.add(item, at, "a replaces entry needs a name")
		}
		out = append(out, name)
	}
	return out
}

// checkRateLimit applies the reference's rules to a rate_limit block.
func (p *parser) checkRateLimit(n *yaml.Node, path string, rl *RateLimit) {
	if rl == nil {
		return
	}
	_, ok := unitSeconds(rl.Unit)
	switch {
	case rl.Unlimited && rl.Unit != "":
		p.add(n, path+".rate_limit.unit", "an unlimited rate_limit takes no unit")
	case !rl.Unlimited && !ok:
		p.add(n, path+".rate_limit.unit", "invalid unit %q (want second, minute, hour, day, week, month or year)", rl.Unit)
	}
	for _, r := range rl.Replaces {
		if r != "" && r == rl.Name {
			p.add(n, path+".rate_limit.replaces", "a limit cannot replace itself (%q)", r)
		}
	}
}

// finalKey is the key of the descriptor in its list: key, or key_value.
func (d *Descriptor) finalKey() string {
	if d.Value == "" {
		return d.Key
	}
	return d.Key + "_" + d.Value
}

// unitSeconds is the length of a unit, as the reference counts it (a month
// is 30 days, a year 365), case-insensitively.
func unitSeconds(unit string) (int64, bool) {
	switch strings.ToLower(unit) {
	case "second":
		return 1, true
	case "minute":
		return 60, true
	case "hour":
		return 3600, true
	case "day":
		return 86400, true
	case "week":
		return 7 * 86400, true
	case "month":
		return 30 * 86400, true
	case "year":
		return 365 * 86400, true
	}
	return 0, false
}

func keyList(m map[string]bool) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return strings.Join(keys, ", ")
}
