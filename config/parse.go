package config

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/sluicehq/ratelimit"
	"go.yaml.in/yaml/v3"
)

// Config is a compiled rules file: ordinary rules and options, and the
// index that sends each request to the few rules that can apply to it.
// Build makes it a Set, ready to serve. A Config is immutable.
type Config struct {
	// Rules are the file's limited rules, in file order.
	Rules []ratelimit.Rule
	// Options are the Registry's options followed by the file's (store,
	// timeout).
	Options []ratelimit.Option

	entries []fileEntry // every rule, unlimited ones too, in file order
	index   *index
	groups  []groupSpec
}

// MaxFileSize bounds the rules files Load and Watch read.
const MaxFileSize = 16 << 20

// Load reads and compiles the rules file at path; see Parse.
func Load(path string, reg *Registry) (*Config, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data, reg)
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(http.MaxBytesReader(nil, f, MaxFileSize)); err != nil {
		return nil, fmt.Errorf("config: read %s: %w", path, err)
	}
	return b.Bytes(), nil
}

// Parse compiles a rules file, YAML or JSON, against the names reg
// defines. name labels problems (usually the file's path). On any problem
// Parse returns a nil Config and an Errors listing every problem found,
// each as file:line:col: path: message; it never returns part of a file.
func Parse(name string, data []byte, reg *Registry) (*Config, error) {
	if reg == nil {
		reg = &Registry{}
	}
	w := &walker{file: name}
	doc, err := parseYAML(data)
	if err != nil {
		line := 1
		if m := lineRE.FindStringSubmatch(err.Error()); m != nil {
			line, _ = strconv.Atoi(m[1])
		}
		w.errs = append(w.errs, Problem{File: name, Line: line, Col: 1, Path: "(syntax)", Message: err.Error()})
		return nil, w.errs
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		w.errs = append(w.errs, Problem{File: name, Line: 1, Col: 1, Path: "(file)", Message: "empty file: want a mapping with rules"})
		return nil, w.errs
	}
	c := &compiler{walker: w, reg: reg}
	cfg := c.file(doc.Content[0])
	if len(w.errs) > 0 {
		slices.SortStableFunc(w.errs, func(a, b Problem) int {
			if a.Line != b.Line {
				return a.Line - b.Line
			}
			return a.Col - b.Col
		})
		return nil, w.errs
	}
	return cfg, nil
}

var lineRE = regexp.MustCompile(`line (\d+)`)

// compiler turns the document into a Config, reporting problems to walker.
type compiler struct {
	*walker
	reg   *Registry
	names map[string]*yaml.Node
	// concPeriod is the slot lifetime of the Concurrency rule whose
	// overrides are being read.
	concPeriod time.Duration
	// seenLimits are the override limits of GCRA rules read so far, by
	// their text.
	seenLimits map[string]override
}

func (c *compiler) file(n *yaml.Node) *Config {
	f := c.fields(n, "", "version", "store", "timeout", "rules")
	if f == nil {
		return nil
	}
	if v, ok := f["version"]; ok {
		if n, ok := c.count(v.val, "version", 1); ok && n != 1 {
			c.fail(v.val, "version", "unsupported version %d (this release reads version 1)", n)
		}
	}
	cfg := &Config{Options: slices.Clip(c.reg.Options)}
	if c.reg.Clock != nil {
		cfg.Options = append(cfg.Options, ratelimit.WithClock(c.reg.Clock))
	}
	store := c.reg.defaultStore()
	if v, ok := f["store"]; ok {
		if s := c.store(v.val, "store"); s != nil {
			store = s
		}
	}
	cfg.Options = append(cfg.Options, ratelimit.WithStore(store))
	if v, ok := f["timeout"]; ok {
		if d, ok := c.duration(v.val, "timeout"); ok {
			cfg.Options = append(cfg.Options, ratelimit.WithTimeout(d))
		}
	}
	v, ok := f["rules"]
	if !ok {
		c.fail(n, "rules", "missing: a file needs at least one rule")
		return cfg
	}
	if v.val.Kind != yaml.SequenceNode || len(v.val.Content) == 0 {
		c.fail(v.val, "rules", "want a non-empty list of rules, got %s", kindName(v.val))
		return cfg
	}
	c.names = make(map[string]*yaml.Node, len(v.val.Content))
	var ents []entry
	for i, rn := range v.val.Content {
		path := fmt.Sprintf("rules[%d]", i)
		cr := c.rule(rn, path)
		fe := fileEntry{rule: -1, skip: cr.skip, name: cr.name, node: rn, path: path}
		if cr.skip == nil && cr.rule == nil {
			continue
		}
		if cr.rule != nil {
			cfg.Rules = append(cfg.Rules, *cr.rule)
			fe.rule, fe.name, fe.served, fe.ov = len(cfg.Rules)-1, cr.rule.Name, *cr.served, cr.ov
		}
		cfg.entries = append(cfg.entries, fe)
		cr.entry.limited = cr.rule != nil
		ents = append(ents, cr.entry)
	}
	if len(cfg.Rules) == 0 && len(c.errs) == 0 {
		c.fail(v.key, "rules", "every rule is unlimited: a file needs at least one limited rule")
	}
	if len(c.errs) == 0 {
		c.index(cfg, ents, v.key)
	}
	return cfg
}

// fileEntry ties an entry of the index to its rule.
type fileEntry struct {
	rule   int                      // in Config.Rules; -1 for an unlimited rule
	served ratelimit.Rule           // the rule as the groups of a Set check it
	ov     *overrides               // its per-key limits, for Set.Peek
	skip   func(*http.Request) bool // an unlimited rule's, in those groups
	name   string
	node   *yaml.Node
	path   string
}

// index builds cfg's index and reports every rule that would make a group
// hold more rules than one request may be checked against (among the
// first maxOverGroups such groups: the index stops there). The bound
// applies to the limited rules (one all-or-nothing check) and, apart, to
// the unlimited ones (each an exemption the request is tested against).
func (c *compiler) index(cfg *Config, ents []entry, at *yaml.Node) {
	x, groups, err := buildIndex(ents)
	if err != nil && !errors.Is(err, errOverBound) {
		c.fail(at, "rules", "%v", err)
		return
	}
	cfg.index, cfg.groups = x, groups
	reported := map[int32]bool{}
	var limited, unlimited []int32
	for _, g := range groups {
		limited, unlimited = limited[:0], unlimited[:0]
		for _, e := range g.entries {
			if cfg.entries[e].rule >= 0 {
				limited = append(limited, e)
			} else {
				unlimited = append(unlimited, e)
			}
		}
		c.overBound(cfg, g, limited, "rules", reported)
		c.overBound(cfg, g, unlimited, "unlimited rules", reported)
	}
}

// overBound reports the rule that takes the entries of group g, of one
// kind, past maxRules, once per rule.
func (c *compiler) overBound(cfg *Config, g groupSpec, ents []int32, kind string, reported map[int32]bool) {
	if len(ents) <= maxRules || reported[ents[maxRules]] {
		return
	}
	fe := cfg.entries[ents[maxRules]]
	reported[ents[maxRules]] = true
	var names []string
	for _, e := range ents[:min(len(ents), 20)] {
		names = append(names, cfg.entries[e].name)
	}
	if len(ents) > 20 {
		names = append(names, "...")
	}
	c.fail(fe.node, fe.path, "a request such as %s can match %d %s %v: a request is checked against at most %d; narrow the rules' match",
		g.example, len(ents), kind, names, maxRules)
}

func (c *compiler) store(n *yaml.Node, path string) ratelimit.Store {
	name, ok := c.str(n, path)
	if !ok {
		return nil
	}
	s, ok := c.reg.Stores[name]
	if !ok {
		c.fail(n, path, "unknown store %q (the registry has %v)", name, sortedKeys(c.reg.Stores))
		return nil
	}
	return s
}

func (c *compiler) failure(n *yaml.Node, path string) (ratelimit.FailurePolicy, bool) {
	s, ok := c.str(n, path)
	if !ok {
		return ratelimit.FailurePolicy{}, false
	}
	var word, arg string
	if _, err := fmt.Sscanf(s+" -", "%s %s", &word, &arg); err != nil {
		word = s
	}
	switch {
	case s == "open":
		return ratelimit.FailurePolicy{}, true
	case s == "closed":
		return ratelimit.FailurePolicy{Status: http.StatusServiceUnavailable}, true
	case word == "closed":
		// The statuses ratelimit.FailurePolicy answers with: any other
		// would make NewRules panic when the Set is built, in the middle
		// of a reload.
		code, err := strconv.Atoi(arg)
		if err != nil || code != http.StatusTooManyRequests && code != http.StatusServiceUnavailable {
			c.fail(n, path, "closed takes the status 429 or 503, got %q", arg)
			return ratelimit.FailurePolicy{}, false
		}
		return ratelimit.FailurePolicy{Status: code}, true
	case word == "fallback" && arg != "-":
		st, ok := c.reg.Stores[arg]
		if !ok {
			c.fail(n, path, "fallback to unknown store %q (the registry has %v)", arg, sortedKeys(c.reg.Stores))
			return ratelimit.FailurePolicy{}, false
		}
		return ratelimit.FailurePolicy{Fallback: st}, true
	}
	c.fail(n, path, "unknown failure policy %q: use open, closed, closed 429 or fallback <store>", s)
	return ratelimit.FailurePolicy{}, false
}

var calendarUnits = map[string]func(int, *time.Location) ratelimit.Quota{
	"day": ratelimit.Daily, "week": ratelimit.Weekly, "month": ratelimit.Monthly,
}

func (c *compiler) quota(n *yaml.Node, path string) (ratelimit.Quota, bool) {
	f := c.fields(n, path, "limit", "per", "time_zone")
	if f == nil {
		return ratelimit.Quota{}, false
	}
	good := true
	var count int
	if v, ok := f["limit"]; !ok {
		c.fail(n, path+".limit", "missing")
		good = false
	} else if count, ok = c.count(v.val, path+".limit", 1); !ok {
		good = false
	}
	var mk func(int, *time.Location) ratelimit.Quota
	if v, ok := f["per"]; !ok {
		c.fail(n, path+".per", "missing: day, week or month")
		good = false
	} else if mk = calendarUnits[v.val.Value]; mk == nil {
		c.fail(v.val, path+".per", "want day, week or month, got %s", kindName(v.val))
		good = false
	}
	loc := time.UTC
	if v, ok := f["time_zone"]; ok {
		if name, ok := c.str(v.val, path+".time_zone"); ok {
			l, err := time.LoadLocation(name)
			if err != nil {
				c.fail(v.val, path+".time_zone", "unknown time zone %q", name)
				good = false
			}
			loc = l
		}
	}
	if !good {
		return ratelimit.Quota{}, false
	}
	return mk(count, loc), true
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
