package synthweb

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// trackingParams are query keys (compared case-insensitively) that
// Canonical removes in addition to every key starting with "utm_".
var trackingParams = map[string]bool{
	"gclid":      true,
	"fbclid":     true,
	"sessionid":  true,
	"sid":        true,
	"phpsessid":  true,
	"jsessionid": true,
}

// Canonical returns the canonical form of an absolute http or https URL, the
// form used by GroundTruth, Pages and Seeds:
//
//   - scheme and host lowercased, userinfo dropped, default port (":80" for
//     http, ":443" for https) removed;
//   - fragment removed;
//   - duplicate slashes in the path collapsed, then dot segments removed
//     (RFC 3986 section 5.2.4); an empty path becomes "/";
//   - query parameters whose key starts with "utm_" or is one of gclid,
//     fbclid, sessionid, sid, phpsessid, jsessionid (keys compared
//     case-insensitively) removed; the remaining parameters are kept byte for
//     byte in their original order; an empty query is dropped with its "?".
//
// Percent-encoding is left as it is. Canonical fails for relative URLs,
// other schemes and URLs without a host.
func Canonical(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "", err
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", fmt.Errorf("synthweb: not an http(s) URL: %q", raw)
	}
	if u.Host == "" {
		return "", errors.New("synthweb: URL without host: " + raw)
	}
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	hostport := host
	if port != "" {
		hostport = net.JoinHostPort(host, port)
	} else if strings.Contains(host, ":") {
		hostport = "[" + host + "]"
	}
	s := scheme + "://" + hostport + canonicalPath(u.EscapedPath())
	if q := canonicalQuery(u.RawQuery); q != "" {
		s += "?" + q
	}
	return s, nil
}

// canonicalPath collapses duplicate slashes, removes dot segments and maps
// the empty path to "/".
func canonicalPath(p string) string {
	for strings.Contains(p, "//") {
		p = strings.ReplaceAll(p, "//", "/")
	}
	p = removeDotSegments(p)
	if p == "" || p[0] != '/' {
		p = "/" + p
	}
	return p
}

// removeDotSegments implements RFC 3986 section 5.2.4.
func removeDotSegments(in string) string {
	var out []string // output segments, each starting with "/" (or not, for a leading relative segment)
	for in != "" {
		switch {
		case strings.HasPrefix(in, "../"):
			in = in[3:]
		case strings.HasPrefix(in, "./"):
			in = in[2:]
		case strings.HasPrefix(in, "/./"):
			in = in[2:]
		case in == "/.":
			in = "/"
		case strings.HasPrefix(in, "/../"):
			in = in[3:]
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		case in == "/..":
			in = "/"
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		case in == "." || in == "..":
			in = ""
		default:
			start := 0
			if in[0] == '/' {
				start = 1
			}
			end := strings.IndexByte(in[start:], '/')
			if end < 0 {
				end = len(in)
			} else {
				end += start
			}
			out = append(out, in[:end])
			in = in[end:]
		}
	}
	return strings.Join(out, "")
}

// canonicalQuery removes tracking and session parameters, keeping the rest in
// order.
func canonicalQuery(q string) string {
	if q == "" {
		return ""
	}
	var kept []string
	for _, part := range strings.Split(q, "&") {
		if part == "" {
			continue
		}
		key, _, _ := strings.Cut(part, "=")
		if k, err := url.QueryUnescape(key); err == nil {
			key = k
		}
		key = strings.ToLower(key)
		if strings.HasPrefix(key, "utm_") || trackingParams[key] {
			continue
		}
		kept = append(kept, part)
	}
	return strings.Join(kept, "&")
}
