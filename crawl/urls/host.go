package urls

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// whatwgIDNA is UTS #46 ToASCII with the settings the URL Standard's
// "domain to ASCII" uses: CheckHyphens off, CheckBidi and CheckJoiners on,
// UseSTD3ASCIIRules off, nontransitional processing, VerifyDnsLength off.
var whatwgIDNA = idna.New(
	idna.MapForLookup(),
	idna.BidiRule(),
	idna.Transitional(false),
	idna.StrictDomainName(false),
	idna.CheckHyphens(false),
	idna.CheckJoiners(true),
	idna.VerifyDNSLength(false),
)

// parseHost is the URL Standard's host parser for http and https (a
// "special" scheme), followed by the crawler's own rules, and returns the
// host as a normalised URL writes it: an IPv6 address in brackets and
// compressed, an IPv4 address in dotted decimal whatever number form it was
// written in, a domain percent-decoded, mapped and converted to punycode
// by UTS #46 and lowercased. On top of the standard, one trailing dot of a
// domain is dropped (example.com. and example.com are one site), and a
// domain that still ends in a dot, or holds a byte net/url refuses in a
// host ("`", "{", "}"), is refused: the crawler could not parse its own
// output again.
func parseHost(host string) (string, error) {
	if host == "" {
		return "", ErrMissingHost
	}
	if host[0] == '[' {
		if host[len(host)-1] != ']' {
			return "", fmt.Errorf("invalid host %q: unclosed IPv6 address", host)
		}
		var a [8]uint16
		if err := parseIPv6(host[1:len(host)-1], &a); err != nil {
			return "", fmt.Errorf("invalid host %q: %w", host, err)
		}
		return string(appendIPv6(make([]byte, 0, 41), &a)), nil
	}
	domain := host
	if strings.IndexByte(host, '%') >= 0 {
		domain = percentDecode(host)
	}
	ascii := true
	for i := 0; i < len(domain); i++ {
		if domain[i] >= 0x80 {
			ascii = false
			break
		}
	}
	if !ascii || hasPunycodeLabel(domain) {
		if !utf8.ValidString(domain) {
			// The standard decodes it with U+FFFD for each bad sequence,
			// which UTS #46 disallows.
			return "", fmt.Errorf("invalid host %q: not UTF-8", host)
		}
		a, err := whatwgIDNA.ToASCII(domain)
		if err != nil {
			return "", fmt.Errorf("invalid host %q: %w", host, err)
		}
		domain = a
	}
	domain = lowerASCII(domain)
	if domain == "" {
		return "", ErrMissingHost
	}
	for i := 0; i < len(domain); i++ {
		if c := domain[i]; forbiddenDomain[c] {
			return "", fmt.Errorf("invalid host %q: forbidden character %q", host, c)
		}
	}
	if endsInNumber(domain) {
		v, err := parseIPv4(domain)
		if err != nil {
			return "", fmt.Errorf("invalid host %q: %w", host, err)
		}
		return string(appendIPv4(make([]byte, 0, 15), v)), nil
	}
	// The crawler's rules.
	domain = strings.TrimSuffix(domain, ".")
	if domain == "" {
		return "", ErrMissingHost
	}
	if domain[len(domain)-1] == '.' {
		return "", fmt.Errorf("invalid host %q: empty label", host)
	}
	for i := 0; i < len(domain); i++ {
		if c := domain[i]; c == '`' || c == '{' || c == '}' {
			return "", fmt.Errorf("invalid host %q: character %q, which net/url refuses", host, c)
		}
	}
	return domain, nil
}

// forbiddenDomain marks the URL Standard's forbidden domain code points
// among ASCII bytes: C0 controls, space, DEL and "#%/:<>?@[\]^|".
var forbiddenDomain = func() (f [256]bool) {
	for c := 0; c <= ' '; c++ {
		f[c] = true
	}
	f[0x7f] = true
	for _, c := range "#%/:<>?@[\\]^|" {
		f[c] = true
	}
	return f
}()

// hasPunycodeLabel reports whether a label of s starts with "xn--" in any
// case: such a domain goes through UTS #46 even when it is ASCII, so that
// bad punycode is refused.
func hasPunycodeLabel(s string) bool {
	for {
		if len(s) >= 4 && (s[0]|0x20) == 'x' && (s[1]|0x20) == 'n' && s[2] == '-' && s[3] == '-' {
			return true
		}
		i := strings.IndexByte(s, '.')
		if i < 0 {
			return false
		}
		s = s[i+1:]
	}
}

// lowerASCII lowercases the ASCII letters of s, allocating only when it
// has any uppercase.
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// percentDecode decodes every valid %XX escape of s and keeps the other
// bytes as they are.
func percentDecode(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
			continue
		}
		b = append(b, s[i])
	}
	return string(b)
}

// endsInNumber is the URL Standard's "ends in a number" checker: whether
// the last label (the one before a trailing dot) is decimal digits or an
// IPv4 number in any base, so that the host must be an IPv4 address.
func endsInNumber(s string) bool {
	if s[len(s)-1] == '.' {
		if len(s) == 1 {
			return false
		}
		s = s[:len(s)-1]
	}
	last := s[strings.LastIndexByte(s, '.')+1:]
	if last == "" {
		return false
	}
	digits := true
	for i := 0; i < len(last); i++ {
		if last[i] < '0' || last[i] > '9' {
			digits = false
			break
		}
	}
	if digits {
		return true
	}
	_, err := parseIPv4Number(last)
	return err == nil
}

// parseIPv4 is the URL Standard's IPv4 parser: one to four parts, each
// decimal, octal (a leading 0) or hexadecimal (a leading 0x), the last
// filling the bytes the others leave.
func parseIPv4(s string) (uint32, error) {
	if s[len(s)-1] == '.' && len(s) > 1 {
		s = s[:len(s)-1]
	}
	var parts [4]uint64
	n := 0
	for {
		i := strings.IndexByte(s, '.')
		part := s
		if i >= 0 {
			part = s[:i]
		}
		if n == 4 {
			return 0, fmt.Errorf("an IPv4 address of more than four parts")
		}
		v, err := parseIPv4Number(part)
		if err != nil {
			return 0, err
		}
		parts[n] = v
		n++
		if i < 0 {
			break
		}
		s = s[i+1:]
	}
	for i := 0; i < n-1; i++ {
		if parts[i] > 255 {
			return 0, fmt.Errorf("IPv4 part %d above 255", parts[i])
		}
	}
	if parts[n-1] >= 1<<(8*(5-n)) {
		return 0, fmt.Errorf("IPv4 address out of range")
	}
	ip := parts[n-1]
	for i := 0; i < n-1; i++ {
		ip += parts[i] << (8 * (3 - i))
	}
	return uint32(ip), nil
}

// parseIPv4Number parses one part of an IPv4 address. Values that do not
// fit 2^32 are clamped above it, which every caller refuses.
func parseIPv4Number(s string) (uint64, error) {
	if s == "" {
		return 0, fmt.Errorf("an empty IPv4 part")
	}
	base := uint64(10)
	switch {
	case len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'):
		base, s = 16, s[2:]
	case len(s) >= 2 && s[0] == '0':
		base, s = 8, s[1:]
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		var d uint64
		switch c := s[i]; {
		case '0' <= c && c <= '9':
			d = uint64(c - '0')
		case base == 16 && isHex(c):
			d = uint64(unhex(c))
		default:
			return 0, fmt.Errorf("%q is not an IPv4 number", s)
		}
		if d >= base {
			return 0, fmt.Errorf("%q is not an IPv4 number", s)
		}
		if v < 1<<40 {
			v = v*base + d
		}
	}
	return v, nil
}

func appendIPv4(b []byte, v uint32) []byte {
	for i := 3; i >= 0; i-- {
		b = strconv.AppendUint(b, uint64(v>>(8*i)&0xff), 10)
		if i > 0 {
			b = append(b, '.')
		}
	}
	return b
}

// parseIPv6 is the URL Standard's IPv6 parser (without the brackets).
func parseIPv6(s string, a *[8]uint16) error {
	piece, compress := 0, -1
	i := 0
	if i < len(s) && s[i] == ':' {
		if i+1 >= len(s) || s[i+1] != ':' {
			return fmt.Errorf("an IPv6 address starting with one colon")
		}
		i += 2
		piece++
		compress = piece
	}
	for i < len(s) {
		if piece == 8 {
			return fmt.Errorf("an IPv6 address of more than eight pieces")
		}
		if s[i] == ':' {
			if compress >= 0 {
				return fmt.Errorf("an IPv6 address with two :: compressions")
			}
			i++
			piece++
			compress = piece
			continue
		}
		v, n := uint16(0), 0
		for n < 4 && i < len(s) && isHex(s[i]) {
			v = v<<4 | uint16(unhex(s[i]))
			i++
			n++
		}
		if i < len(s) && s[i] == '.' {
			if n == 0 {
				return fmt.Errorf("an IPv6 address with an empty IPv4 part")
			}
			i -= n
			if piece > 6 {
				return fmt.Errorf("an IPv6 address with an IPv4 part too late")
			}
			seen := 0
			for i < len(s) {
				val := -1
				if seen > 0 {
					if s[i] == '.' && seen < 4 {
						i++
					} else {
						return fmt.Errorf("a bad IPv4 part in an IPv6 address")
					}
				}
				if i >= len(s) || s[i] < '0' || s[i] > '9' {
					return fmt.Errorf("a bad IPv4 part in an IPv6 address")
				}
				for i < len(s) && '0' <= s[i] && s[i] <= '9' {
					d := int(s[i] - '0')
					switch {
					case val < 0:
						val = d
					case val == 0:
						return fmt.Errorf("a leading zero in the IPv4 part of an IPv6 address")
					default:
						val = val*10 + d
					}
					if val > 255 {
						return fmt.Errorf("the IPv4 part of an IPv6 address out of range")
					}
					i++
				}
				a[piece] = a[piece]<<8 | uint16(val)
				seen++
				if seen == 2 || seen == 4 {
					piece++
				}
			}
			if seen != 4 {
				return fmt.Errorf("a short IPv4 part in an IPv6 address")
			}
			break
		}
		if i < len(s) && s[i] == ':' {
			i++
			if i >= len(s) {
				return fmt.Errorf("an IPv6 address ending in one colon")
			}
		} else if i < len(s) {
			if s[i] == '%' {
				return fmt.Errorf("an IPv6 zone")
			}
			return fmt.Errorf("character %q in an IPv6 address", s[i])
		}
		a[piece] = v
		piece++
	}
	if compress >= 0 {
		swaps := piece - compress
		piece = 7
		for piece != 0 && swaps > 0 {
			a[piece], a[compress+swaps-1] = a[compress+swaps-1], a[piece]
			piece--
			swaps--
		}
	} else if piece != 8 {
		return fmt.Errorf("an IPv6 address of fewer than eight pieces")
	}
	return nil
}

// appendIPv6 appends the URL Standard's serialisation of an IPv6 address
// in brackets: lowercase hex pieces without leading zeros, the first
// longest run of two or more zero pieces written "::".
func appendIPv6(b []byte, a *[8]uint16) []byte {
	start, length := -1, 1
	for i := 0; i < 8; {
		if a[i] != 0 {
			i++
			continue
		}
		j := i
		for j < 8 && a[j] == 0 {
			j++
		}
		if j-i > length {
			start, length = i, j-i
		}
		i = j
	}
	b = append(b, '[')
	for i := 0; i < 8; i++ {
		if i == start {
			if i == 0 {
				b = append(b, ':')
			}
			b = append(b, ':')
			i += length - 1
			continue
		}
		b = strconv.AppendUint(b, uint64(a[i]), 16)
		if i < 7 {
			b = append(b, ':')
		}
	}
	return append(b, ']')
}
