package urls

import (
	"net/url"
	"testing"
)

func BenchmarkNormalize(b *testing.B) {
	base, _ := url.Parse("http://www.example.com/news/2026/article.html")
	refs := []string{
		"../archive/index.html",
		"/search?q=crawler&utm_source=newsletter&page=2",
		"HTTPS://WWW.Example.COM:443/a/./b/../c//d#frag",
		"http://other.example/%7Euser/caf%c3%a9?sessionid=abc&x=1",
		"img/photo.jpg",
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := Normalize(base, refs[i%len(refs)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
