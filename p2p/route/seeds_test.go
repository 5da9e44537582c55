package route

import (
	"context"
	"strings"
	"testing"
)

// goodSeeds honours a statement "good:URL" over URL alone.
type goodSeeds struct{}

func (goodSeeds) Honours(u, proof string) bool { return proof == "good:"+u }

// TestOwnerVerifiesSeeds: with a seed policy, an owner marks a task a seed
// only when the policy honours the statement it carries over its URL,
// stores that statement with the record, and stores no statement with
// anything else: a statement replayed onto another URL, a seed without
// one, and a link that carries one are no seeds. A URL first taken
// unmarked is marked when its signed seed comes, and in one batch the
// signed copy of a URL marks it.
func TestOwnerVerifiesSeeds(t *testing.T) {
	c := newCluster(t, 3, 1)
	n := c.nodes[0]
	n.owner.VerifySeeds(goodSeeds{})
	ctx := context.Background()
	res, err := n.owner.Accept(ctx, []Task{
		{URL: "http://a.test/", SeedProof: "good:http://a.test/"},
		{URL: "http://b.test/", SeedProof: "good:http://a.test/"},
		{URL: "http://c.test/"},
		{URL: "http://d.test/x", Depth: 1, SeedProof: "good:http://d.test/x"},
		{URL: "http://e.test/"},
		{URL: "http://e.test/", SeedProof: "good:http://e.test/"},
	}, true, false)
	if err != nil || res.Accepted != 5 || res.Duplicates != 1 {
		t.Fatalf("result %+v, %v; want 5 accepted, 1 duplicate", res, err)
	}
	check := func(u string, seed bool) {
		t.Helper()
		key, _ := testURLs{}.Key(u)
		r, ok := n.q.st.Record(key, sum64(u))
		wantProof := ""
		if seed {
			wantProof = "good:" + u
		}
		if !ok || r.Seed != seed || string(r.SeedProof) != wantProof {
			t.Errorf("record of %s: %+v (stored %v); want seed %v with statement %q", u, r, ok, seed, wantProof)
		}
	}
	check("http://a.test/", true)
	check("http://b.test/", false)
	check("http://c.test/", false)
	check("http://d.test/x", false)
	check("http://e.test/", true)

	// Taken unmarked first, marked when its signed seed comes.
	if _, err := n.owner.Accept(ctx, []Task{{URL: "http://f.test/"}}, true, false); err != nil {
		t.Fatal(err)
	}
	check("http://f.test/", false)
	res, err = n.owner.Accept(ctx, []Task{{URL: "http://f.test/", SeedProof: "good:http://f.test/"}}, true, false)
	if err != nil || res.Accepted != 1 {
		t.Fatalf("the signed seed of a URL taken unmarked: %+v, %v; want it accepted again", res, err)
	}
	check("http://f.test/", true)

	// A scoped owner hears which tasks are seeds.
	var judged []string
	scoped := NewOwner(n.m, n.m, NewIntake(n.q, n.q, 10), testURLs{}, judgeFunc(func(u string, seed bool) {
		if seed {
			judged = append(judged, u)
		}
	}), 10)
	scoped.VerifySeeds(goodSeeds{})
	if _, err := scoped.Accept(ctx, []Task{{URL: "http://g.test/", SeedProof: "good:http://g.test/"}, {URL: "http://h.test/", SeedProof: "forged"}}, true, false); err != nil {
		t.Fatal(err)
	}
	if strings.Join(judged, " ") != "http://g.test/" {
		t.Errorf("the scope judged %q seeds, want http://g.test/ alone", judged)
	}
}

type judgeFunc func(u string, seed bool)

func (f judgeFunc) Judge(u string, seed bool, _, _ int) (string, error) { f(u, seed); return "", nil }
