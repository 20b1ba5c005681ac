package clientip

import "strings"

// RFC 7239 grammar, as far as it matters here:
//
//	Forwarded         = 1#forwarded-element
//	forwarded-element = [ forwarded-pair ] *( ";" [ forwarded-pair ] )
//	forwarded-pair    = token "=" value
//	value             = token / quoted-string
//	node              = nodename [ ":" node-port ]
//	nodename          = IPv4address / "[" IPv6address "]" / "unknown" / obfnode
//	obfnode           = "_" 1*( ALPHA / DIGIT / "." / "_" / "-")
//	node-port         = port / obfport
//	obfport           = "_" 1*(ALPHA / DIGIT / "." / "_" / "-")
//
// Elements are found from the right of each line, so that the elements a
// trusted proxy appended are read exactly as it wrote them whatever a client
// put to their left: an unbalanced quote or a stray backslash in the client's
// part can only make the client's own element fail, never swallow or shift the
// proxies' elements.

// lastElement splits the last forwarded-element off line s. It returns the
// element, the rest of the line before the separating comma, and last=true
// when the element starts at the beginning of s. ok is false when a quote is
// unbalanced or escaped outside a quoted string.
//
// A double quote delimits a quoted-string when an even number of backslashes
// precede it (each pair is an escaped backslash); with an odd number it is an
// escaped quote, legal only inside a quoted-string. The scan touches each
// byte at most twice.
func lastElement(s string) (elem, rest string, last, ok bool) {
	inQuote := false
	for i := len(s) - 1; i >= 0; i-- {
		switch s[i] {
		case '"':
			j := i - 1
			for j >= 0 && s[j] == '\\' {
				j--
			}
			if (i-1-j)%2 == 0 {
				inQuote = !inQuote
			} else if !inQuote {
				return "", "", false, false
			}
		case ',':
			if !inQuote {
				return s[i+1:], s[:i], false, true
			}
		}
	}
	if inQuote {
		return "", "", false, false
	}
	return s, "", true, true
}

// forValue parses one forwarded-element and returns the content of its for=
// parameter (unquoted). It fails closed with Malformed on any syntax error, on
// a parameter given twice, and on a for= value with escapes (no address needs
// one); with NoFor when the element has no for= parameter.
func forValue(elem string) (string, Reason) {
	var (
		forv  string
		found bool
		seen  uint8 // bit set of for, by, host, proto
	)
	rest := elem
	for {
		rest = trimLeftOWS(rest)
		if rest == "" {
			break
		}
		if rest[0] == ';' { // empty pair
			rest = rest[1:]
			continue
		}
		n := tokenLen(rest)
		if n == 0 || n == len(rest) || rest[n] != '=' {
			return "", Malformed
		}
		name := rest[:n]
		val, escaped, after, ok := pairValue(rest[n+1:])
		if !ok {
			return "", Malformed
		}
		rest = trimLeftOWS(after)
		if rest != "" {
			if rest[0] != ';' {
				return "", Malformed
			}
			rest = rest[1:]
		}
		bit := paramBit(name)
		if seen&bit != 0 {
			return "", Malformed // RFC 7239: each parameter at most once per element
		}
		seen |= bit
		if bit == paramFor {
			if escaped {
				return "", Malformed
			}
			forv, found = val, true
		}
	}
	if !found {
		return "", NoFor
	}
	return forv, OK
}

// The bits of the parameters RFC 7239 defines; other names map to 0.
const (
	paramFor uint8 = 1 << iota
	paramBy
	paramHost
	paramProto
)

// paramBit returns the bit of a Forwarded parameter name (case-insensitive),
// or 0 for an extension parameter, which may repeat.
func paramBit(name string) uint8 {
	switch {
	case strings.EqualFold(name, "for"):
		return paramFor
	case strings.EqualFold(name, "by"):
		return paramBy
	case strings.EqualFold(name, "host"):
		return paramHost
	case strings.EqualFold(name, "proto"):
		return paramProto
	}
	return 0
}

// pairValue reads the value of one parameter, a token or a quoted-string, from
// the start of s, and returns the input after it. escaped reports a
// quoted-pair (backslash escape) in a quoted-string; ok is false for an empty,
// unterminated or otherwise malformed value.
func pairValue(s string) (val string, escaped bool, rest string, ok bool) {
	if s == "" || s[0] != '"' {
		n := tokenLen(s)
		if n == 0 {
			return "", false, s, false
		}
		return s[:n], false, s[n:], true
	}
	j := 1
	for ; j < len(s); j++ {
		c := s[j]
		if c == '\\' {
			j++
			if j == len(s) || !quotedPairChar(s[j]) {
				return "", false, s, false
			}
			escaped = true
			continue
		}
		if c == '"' {
			break
		}
		if !qdtext(c) {
			return "", false, s, false
		}
	}
	if j >= len(s) {
		return "", false, s, false // unterminated
	}
	return s[1:j], escaped, s[j+1:], true
}

// parseForNode parses the (unquoted) value of a for= parameter.
func parseForNode(v string) (Node, Reason) {
	if v == "" {
		return Node{}, Malformed
	}
	if v[0] == '_' {
		if !obfChars(v[1:]) {
			return Node{}, Malformed
		}
		return Node{}, Obfuscated
	}
	if strings.EqualFold(v, "unknown") {
		return Node{}, Unknown
	}
	var host, port string
	if v[0] == '[' {
		end := strings.IndexByte(v, ']')
		if end < 0 {
			return Node{}, Malformed
		}
		host = v[1:end]
		if strings.IndexByte(host, ':') < 0 {
			return Node{}, Malformed // brackets hold IPv6 only
		}
		if r := v[end+1:]; r != "" {
			if r[0] != ':' {
				return Node{}, Malformed
			}
			port = r[1:]
			if port == "" {
				return Node{}, Malformed
			}
		}
	} else {
		// RFC 7239 requires brackets around IPv6, so a bare nodename holds no
		// colon except before the port.
		host = v
		if i := strings.IndexByte(v, ':'); i >= 0 {
			host, port = v[:i], v[i+1:]
			if port == "" {
				return Node{}, Malformed
			}
		}
		if strings.IndexByte(host, '.') < 0 {
			return Node{}, Malformed
		}
	}
	if port != "" {
		if port[0] == '_' {
			if !obfChars(port[1:]) {
				return Node{}, Malformed
			}
		} else if !validPort(port) {
			return Node{}, Malformed
		}
	}
	addr, canon, ok := ParseIP(host)
	if !ok {
		return Node{}, Malformed
	}
	if i := strings.IndexByte(host, '%'); i >= 0 {
		host = host[:i]
	}
	return Node{Host: host, Addr: addr, Canon: canon}, OK
}

// obfChars reports whether s is 1*(ALPHA / DIGIT / "." / "_" / "-").
func obfChars(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// tokenLen returns the length of the RFC 9110 token at the start of s.
func tokenLen(s string) int {
	for i := 0; i < len(s); i++ {
		if !tchar(s[i]) {
			return i
		}
	}
	return len(s)
}

// tchar reports whether c is an RFC 9110 token character.
func tchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}

// qdtext reports whether c may appear unescaped in a quoted-string.
func qdtext(c byte) bool {
	return c == '\t' || c == ' ' || c == 0x21 || (0x23 <= c && c <= 0x5B) || (0x5D <= c && c <= 0x7E) || c >= 0x80
}

// quotedPairChar reports whether c may follow a backslash in a quoted-string.
func quotedPairChar(c byte) bool {
	return c == '\t' || (0x20 <= c && c <= 0x7E) || c >= 0x80
}

// trimLeftOWS removes leading SP and HTAB.
func trimLeftOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	return s
}
