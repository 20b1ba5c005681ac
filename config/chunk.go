package config

import (
	"bytes"
	"runtime"
	"sync"

	"go.yaml.in/yaml/v3"
)

// parseYAML parses data into a document node, as yaml.Unmarshal does. The
// YAML parser is most of the cost of compiling a large file, so a file in
// the plain layout rules files are written in is read by fastParse; a
// large file that is not has its rules list cut into pieces at its items,
// parsed in parallel (see parseInPieces); any file neither fits, or any
// piece that fails, is parsed whole, so errors are the parser's.
func parseYAML(data []byte) (*yaml.Node, error) {
	if doc, ok := fastParse(data); ok {
		return doc, nil
	}
	if doc, ok := parseInPieces(data, 64<<10, runtime.GOMAXPROCS(0)); ok {
		return doc, nil
	}
	var doc yaml.Node
	err := yaml.Unmarshal(data, &doc)
	return &doc, err
}

// parseInPieces parses data in pieces when it is at least minSize long and
// plainly laid out: a top-level "rules:" line at column 0 with nothing
// after it but a comment, then block items ("- ") at one indentation,
// every other line of the list indented deeper, no directives, document
// markers, tabs or carriage returns. The rest of the file is parsed with
// the list left out (its lines kept blank, so positions hold), each piece
// on its own with its line numbers shifted back, and the pieces' items
// are joined in the list. It reports false when it did not parse.
func parseInPieces(data []byte, minSize, pieces int) (*yaml.Node, bool) {
	if len(data) < minSize || pieces < 2 || bytes.ContainsAny(data, "\r\t") ||
		bytes.HasPrefix(data, []byte("%")) || bytes.Contains(data, []byte("\n%")) ||
		bytes.HasPrefix(data, []byte("---")) || bytes.Contains(data, []byte("\n---")) ||
		bytes.HasPrefix(data, []byte("...")) || bytes.Contains(data, []byte("\n...")) {
		return nil, false
	}
	items, start, end, ok := rulesItems(data)
	if !ok || len(items) < 2*pieces {
		return nil, false
	}
	skeleton := make([]byte, 0, start+bytes.Count(data[start:end], []byte("\n"))+len(data)-end)
	skeleton = append(skeleton, data[:start]...)
	skeleton = append(skeleton, bytes.Repeat([]byte("\n"), bytes.Count(data[start:end], []byte("\n")))...)
	skeleton = append(skeleton, data[end:]...)

	cuts := []item{} // the first item of each piece
	per := (end - start) / pieces
	for _, it := range items {
		if len(cuts) == 0 || it.off-cuts[len(cuts)-1].off >= per {
			cuts = append(cuts, it)
		}
	}
	docs := make([]yaml.Node, len(cuts)+1)
	errs := make([]error, len(cuts)+1)
	var wg sync.WaitGroup
	for i := range cuts {
		to := end
		if i+1 < len(cuts) {
			to = cuts[i+1].off
		}
		wg.Go(func() { errs[i] = yaml.Unmarshal(data[cuts[i].off:to], &docs[i]) })
	}
	errs[len(cuts)] = yaml.Unmarshal(skeleton, &docs[len(cuts)])
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, false
		}
	}
	doc := &docs[len(cuts)]
	slot := rulesValue(doc)
	if slot == nil {
		return nil, false
	}
	var list *yaml.Node
	for i := range cuts {
		d := &docs[i]
		if d.Kind != yaml.DocumentNode || len(d.Content) != 1 || d.Content[0].Kind != yaml.SequenceNode {
			return nil, false
		}
		shift(d.Content[0], cuts[i].line-1)
		if list == nil {
			list = d.Content[0]
		} else {
			list.Content = append(list.Content, d.Content[0].Content...)
		}
	}
	*slot = list
	return doc, true
}

// item is where a list item starts: its byte offset and line.
type item struct{ off, line int }

// rulesItems finds the items of the top-level rules list, and the offsets
// where the list's lines start and end.
func rulesItems(data []byte) (items []item, start, end int, ok bool) {
	line, ind, inList, found := 0, -1, false, false
	for off := 0; off < len(data); {
		nl := bytes.IndexByte(data[off:], '\n')
		next := len(data)
		if nl >= 0 {
			next = off + nl + 1
		}
		text := bytes.TrimRight(data[off:next], "\n")
		line++
		body := bytes.TrimLeft(text, " ")
		k := len(text) - len(body)
		blank := len(body) == 0 || body[0] == '#'
		switch {
		case blank:
		case !found && !inList && k == 0 && isRulesKey(body):
			found, inList = true, true
		case inList && ind < 0 && (bytes.HasPrefix(body, []byte("- ")) || bytes.Equal(body, []byte("-"))):
			ind, start = k, off
			items = append(items, item{off, line})
		case inList && ind < 0:
			return nil, 0, 0, false // not a block list
		case inList && (k < ind || (k == ind && !bytes.HasPrefix(body, []byte("- ")) && !bytes.Equal(body, []byte("-")))):
			if k != 0 {
				return nil, 0, 0, false // only a top-level key ends the list plainly
			}
			inList, end = false, off
		case inList && k == ind:
			items = append(items, item{off, line})
		case !inList && k == 0 && isRulesKey(body):
			return nil, 0, 0, false // rules given twice
		}
		off = next
	}
	if inList {
		end = len(data)
	}
	return items, start, end, found && ind >= 0
}

func isRulesKey(body []byte) bool {
	rest, ok := bytes.CutPrefix(body, []byte("rules:"))
	rest = bytes.TrimLeft(rest, " ")
	return ok && (len(rest) == 0 || rest[0] == '#')
}

// rulesValue returns where the skeleton's top-level rules value is held,
// nil unless it is a mapping whose rules key has no value.
func rulesValue(doc *yaml.Node) **yaml.Node {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil
	}
	m := doc.Content[0]
	var slot **yaml.Node
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "rules" {
			if slot != nil || m.Content[i+1].Tag != "!!null" || m.Content[i+1].Value != "" {
				return nil
			}
			slot = &m.Content[i+1]
		}
	}
	return slot
}

// shift moves every node of n down by lines.
func shift(n *yaml.Node, lines int) {
	n.Line += lines
	for _, c := range n.Content {
		shift(c, lines)
	}
}
