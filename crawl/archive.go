package crawl

import (
	"net/http"

	"github.com/swarmcrawl/swarmcrawl/store/warc"
)

// WARCExchange returns what to archive of p: the request as sent, the
// response as received (body still content-coded) and the page's main
// text (the whole visible text can be extracted again from the body).
func (p *Page) WARCExchange() warc.Exchange {
	return warc.Exchange{
		URL: p.Task.URL, Date: p.FetchedAt, RemoteAddr: p.RemoteAddr, Method: http.MethodGet,
		RequestHeader: p.Request, Proto: p.Proto, Status: p.Status, ResponseHeader: p.Header,
		Body: p.RawBody, Truncated: p.Truncated, Title: p.Title, Text: p.MainText, Simhash: p.Simhash,
		ResponseID: p.ResponseID, PayloadDigest: p.PayloadDigest,
	}
}
