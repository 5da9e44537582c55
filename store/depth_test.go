package store

import (
	"reflect"
	"testing"
	"time"
)

// TestSeenKeepsSmallestDepth: the seen set answers the smallest depth a URL
// was marked at, a shallower mark lowers it without counting the URL
// again, and the depth survives a restart.
func TestSeenKeepsSmallestDepth(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, testOptions(SeenExact))
	e := SeenEntry{Key: 1, URLHash: 2, URL: "http://a.test/", Depth: 5}
	for _, step := range []struct {
		depth   int
		isNew   bool
		results int
	}{{5, true, 5}, {7, false, 5}, {3, false, 3}, {4, false, 3}} {
		e.Depth = step.depth
		if got := markSeen(t, db, []SeenEntry{e}); got[0] != step.isNew {
			t.Errorf("mark at depth %d: new %v, want %v", step.depth, got[0], step.isNew)
		}
		if d, seen, err := db.SeenDepth(1, 2); err != nil || !seen || d != step.results {
			t.Errorf("after depth %d: SeenDepth = %d, %v, %v; want %d", step.depth, d, seen, err, step.results)
		}
	}
	if n := db.SeenCount(); n != 1 {
		t.Errorf("seen count %d, want 1", n)
	}
	db.Close()
	db = openTest(t, dir, testOptions(SeenExact))
	if d, _, _ := db.SeenDepth(1, 2); d != 3 {
		t.Errorf("after a restart the depth is %d, want 3", d)
	}
	if _, seen, _ := db.SeenDepth(1, 3); seen {
		t.Error("an unseen URL is seen")
	}
}

// TestURLMetaKeepsOutlinks: a page's links and how deep they were
// followed round-trip through the URL metadata, and a version 1 record
// (written before outlinks were kept) reads back with none known.
func TestURLMetaKeepsOutlinks(t *testing.T) {
	db := openTest(t, t.TempDir(), testOptions(SeenExact))
	m := URLMeta{URL: "http://a.test/", Status: 200, LastFetch: time.Unix(100, 0).UTC(), Fetches: 1,
		Outlinks: Outlinks{Known: true, Followed: false, Depth: 16, Links: []string{"http://a.test/x", "http://b.test/"}}}
	if err := db.PutURLMeta(1, 2, m); err != nil {
		t.Fatal(err)
	}
	got, ok, err := db.URLMeta(1, 2)
	if err != nil || !ok || !reflect.DeepEqual(got, m) {
		t.Errorf("URLMeta = %+v, %v, %v; want %+v", got, ok, err, m)
	}
	// Version 1 is version 2 without the outlinks: for none, a flags
	// byte, a zero depth and a zero count.
	v1 := encodeURLMeta(&URLMeta{URL: "http://a.test/", Status: 200})
	v1 = v1[:len(v1)-3]
	v1[0] = recordVersion1
	var old URLMeta
	if err := decodeURLMeta(v1, &old); err != nil || old.Outlinks.Known || old.Status != 200 {
		t.Errorf("version 1 record: %+v, %v", old, err)
	}
}

// TestFollowContent: the first page of a content has its links followed,
// a copy at the same depth or deeper does not, a shallower copy does (and
// becomes the one to compare with), and different content is apart.
func TestFollowContent(t *testing.T) {
	db := openTest(t, t.TempDir(), testOptions(SeenExact))
	for _, step := range []struct {
		hash, check uint64
		depth       int
		url         string
		dup         bool
	}{
		{1, 1, 3, "http://a.test/1", false},
		{1, 1, 3, "http://a.test/2", true},
		{1, 1, 5, "http://a.test/3", true},
		{1, 2, 5, "http://a.test/4", false}, // same body, other links
		{1, 1, 2, "http://a.test/5", false},
		{1, 1, 3, "http://a.test/6", true},
	} {
		first, dup, err := db.FollowContent(step.hash, step.check, step.depth, step.url)
		if err != nil || dup != step.dup || dup && first == "" {
			t.Errorf("%s at depth %d: first %q, dup %v, %v; want dup %v", step.url, step.depth, first, dup, err, step.dup)
		}
	}
}
