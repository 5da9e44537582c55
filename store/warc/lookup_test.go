package warc

import (
	"net/http"
	"testing"
	"time"
)

// TestReadExchangeAt: the location WriteExchangeAt returns reads back the
// exchange's records, the response with the preset ID and the body's
// payload digest (given by the caller, as the crawler gives it), from the file being written and after it is complete.
func TestReadExchangeAt(t *testing.T) {
	dir := t.TempDir()
	w, err := NewWriter(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	id, err := NewRecordID()
	if err != nil {
		t.Fatal(err)
	}
	body := []byte("<html><title>x</title>hello</html>")
	var locs []Location
	for i, u := range []string{"http://a.test/1", "http://a.test/2"} {
		ex := Exchange{URL: u, Date: time.Unix(100, 0), Status: 200, ResponseHeader: http.Header{"Content-Type": {"text/html"}},
			Body: body, Text: "hello"}
		if i == 1 {
			// As the crawler writes a capture: its ID and digest given.
			ex.ResponseID, ex.PayloadDigest = id, PayloadDigest(body)
		}
		loc, err := w.WriteExchangeAt(ex)
		if err != nil {
			t.Fatal(err)
		}
		locs = append(locs, loc)
	}
	check := func(when string) {
		b, err := ReadExchange(dir, locs[1], 1<<20)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		recs, err := ParseExchange(b)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		types := map[string]int{}
		for i, r := range recs {
			types[r.Type] = i
		}
		if len(recs) != 3 || len(types) != 3 || types["conversion"] == 0 && recs[0].Type != "conversion" {
			t.Fatalf("%s: records %v, want a request, a response and a conversion", when, types)
		}
		recs[1] = recs[types["response"]]
		if recs[1].ID != id || recs[1].TargetURI != "http://a.test/2" || recs[1].Header.Get("WARC-Payload-Digest") != PayloadDigest(body) {
			t.Errorf("%s: response %s of %s digest %s; want %s, http://a.test/2, %s", when, recs[1].ID, recs[1].TargetURI,
				recs[1].Header.Get("WARC-Payload-Digest"), id, PayloadDigest(body))
		}
	}
	check("open file")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	check("complete file")
	if _, err := ReadExchange(dir, Location{File: "../x", Offset: 0, Length: 10}, 1<<20); err == nil {
		t.Error("a path outside the archive was read")
	}
	if _, err := ReadExchange(dir, locs[1], locs[1].Length-1); err == nil {
		t.Error("an exchange over the cap was read")
	}
}
