package crawl

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/PuerkitoBio/goquery"
	"golang.org/x/net/html"

	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
)

// IsHTML reports whether a response is an HTML document worth parsing for
// links. The Content-Type header decides; only when it is missing is the
// body sniffed, because servers that send a type usually mean it and
// sniffing a PDF or an image for links is wasted work.
func IsHTML(contentType string, body []byte) bool {
	if strings.TrimSpace(contentType) == "" {
		contentType = http.DetectContentType(body)
	}
	mt, _, _ := strings.Cut(contentType, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	return mt == "text/html" || mt == "application/xhtml+xml"
}

// ExtractLinks parses an HTML document fetched from pageURL and returns its
// followable links, normalised, deduplicated and in document order.
//
// Links come from <a href> and <area href>, and from <frame src> and
// <iframe src> because framed documents are pages too. They are resolved
// against <base href> when the document has one. A link is skipped when its
// rel contains "nofollow", when it is empty (the page itself), when it is not
// http(s) (mailto:, javascript:, tel:, data: ...) or when it does not
// normalise; every link is skipped when a <meta name="robots"> or
// <meta name="uaToken"> says nofollow or none.
//
// Malformed HTML never panics and never fails: the HTML5 parser recovers
// from anything but nesting deeper than 512 elements, and such documents
// are scanned with the tokenizer instead.
func ExtractLinks(body []byte, pageURL *url.URL, uaToken string) (links []string, err error) {
	defer func() {
		if r := recover(); r != nil {
			links, err = nil, fmt.Errorf("parse html: panic: %v", r)
		}
	}()
	var refs []rawLink
	var base string
	var hasBase, nofollow bool
	doc, err := goquery.NewDocumentFromReader(bytes.NewReader(body))
	if err == nil {
		nofollow = metaNofollow(doc, uaToken)
		base, hasBase = doc.Find("base[href]").First().Attr("href")
		doc.Find("a[href], area[href], frame[src], iframe[src]").Each(func(_ int, s *goquery.Selection) {
			ref, ok := s.Attr("href")
			if !ok {
				ref = s.AttrOr("src", "")
			}
			refs = append(refs, rawLink{ref: ref, rel: s.AttrOr("rel", "")})
		})
	} else {
		refs, base, hasBase, nofollow = tokenizeLinks(body, uaToken)
	}
	if nofollow {
		return nil, nil
	}
	resolveAgainst := pageURL
	if hasBase {
		resolveAgainst = resolveBase(base, pageURL)
	}
	seen := make(map[string]struct{}, len(refs))
	for _, r := range refs {
		if strings.TrimSpace(r.ref) == "" || relNofollow(r.rel) || skipScheme(r.ref) {
			continue
		}
		n, err := urls.Normalize(resolveAgainst, r.ref)
		if err != nil {
			continue // unusable links are normal on the web, not errors
		}
		if _, dup := seen[n]; dup {
			continue
		}
		seen[n] = struct{}{}
		links = append(links, n)
	}
	return links, nil
}

// rawLink is a link as written in the document.
type rawLink struct {
	ref string
	rel string
}

// tokenizeLinks is the fallback for documents the tree parser refuses:
// a single pass over the tokens, which has no nesting limit. It finds the
// same elements and attributes as the goquery path.
func tokenizeLinks(body []byte, uaToken string) (refs []rawLink, base string, hasBase, nofollow bool) {
	z := html.NewTokenizer(bytes.NewReader(body))
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			return refs, base, hasBase, nofollow
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		name, hasAttr := z.TagName()
		if !hasAttr {
			continue
		}
		attrs := map[string]string{}
		for more := true; more; {
			var k, v []byte
			k, v, more = z.TagAttr()
			if _, dup := attrs[string(k)]; !dup { // the first one wins, as in the tree parser
				attrs[string(k)] = string(v)
			}
		}
		switch string(name) {
		case "a", "area":
			if href, ok := attrs["href"]; ok {
				refs = append(refs, rawLink{ref: href, rel: attrs["rel"]})
			}
		case "frame", "iframe":
			if src, ok := attrs["src"]; ok {
				refs = append(refs, rawLink{ref: src})
			}
		case "base":
			if href, ok := attrs["href"]; ok && !hasBase {
				base, hasBase = href, true
			}
		case "meta":
			if metaSaysNofollow(attrs["name"], attrs["content"], uaToken) {
				nofollow = true
			}
		}
	}
}

// metaNofollow reports whether the page forbids following its links, for
// all robots or for ours by name.
func metaNofollow(doc *goquery.Document, uaToken string) bool {
	nofollow := false
	doc.Find("meta[name]").EachWithBreak(func(_ int, s *goquery.Selection) bool {
		nofollow = metaSaysNofollow(s.AttrOr("name", ""), s.AttrOr("content", ""), uaToken)
		return !nofollow
	})
	return nofollow
}

// metaSaysNofollow reports whether one <meta name content> addresses us
// ("robots" or our token) and contains nofollow or none.
func metaSaysNofollow(name, content, uaToken string) bool {
	name = strings.ToLower(strings.TrimSpace(name))
	if name != "robots" && (uaToken == "" || name != uaToken) {
		return false
	}
	for _, d := range strings.FieldsFunc(strings.ToLower(content), isDirectiveSep) {
		if d == "nofollow" || d == "none" {
			return true
		}
	}
	return false
}

func isDirectiveSep(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }

// resolveBase returns the URL relative links resolve against: the <base
// href> (itself resolved against the page) if it is a usable http(s) URL,
// the page URL otherwise.
func resolveBase(href string, pageURL *url.URL) *url.URL {
	n, err := urls.Normalize(pageURL, href)
	if err != nil {
		return pageURL
	}
	u, err := url.Parse(n)
	if err != nil {
		return pageURL
	}
	return u
}

// relNofollow reports whether a rel attribute contains the nofollow token.
func relNofollow(rel string) bool {
	if rel == "" {
		return false
	}
	for _, t := range strings.Fields(rel) {
		if strings.EqualFold(t, "nofollow") {
			return true
		}
	}
	return false
}

// skipScheme filters the non-web schemes that are common in hrefs before
// they reach Normalize, where they would only produce errors to discard.
func skipScheme(ref string) bool {
	ref = strings.TrimLeft(ref, " \t\r\n")
	if len(ref) < 4 {
		return false
	}
	for _, p := range [...]string{"mailto:", "javascript:", "tel:", "data:"} {
		if len(ref) >= len(p) && strings.EqualFold(ref[:len(p)], p) {
			return true
		}
	}
	return false
}
