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

// hrefMix is the links of a typical news or blog page, in the proportions
// such pages have them: mostly relative and root-relative paths on the
// page's own host, some absolute links to it and to other hosts, queries
// with trackers, fragments, scheme-relative CDN links, an IDN, a link
// that is not http(s).
var hrefMix = []string{
	"/",
	"/news/",
	"/news/2026/04/a-rather-long-article-title-about-crawlers.html",
	"/tag/golang",
	"/author/jane-doe/",
	"article-2.html",
	"../archive/index.html",
	"./img/photo.jpg",
	"?page=3",
	"#comments",
	"/search?q=web+crawler&utm_source=newsletter&utm_medium=email&page=2",
	"article.html?id=12345&ref=home#top",
	"https://www.example.com/news/2026/04/another-article.html",
	"https://www.example.com/wp-content/uploads/2026/03/image-1024x768.jpg",
	"//cdn.example.net/static/app.js?v=1.2.3",
	"https://twitter.com/intent/tweet?url=https%3A%2F%2Fwww.example.com%2Fnews&text=Hello%20world",
	"https://www.facebook.com/sharer/sharer.php?u=https://www.example.com/news&fbclid=IwAR0abc",
	"HTTP://Other.Example.ORG:80/Some/Path/../Page.aspx;jsessionid=0A1B2C?x=1",
	"https://bücher.example/kategorie/romane",
	"mailto:editor@example.com",
}

// BenchmarkNormalizeHrefs is the cost of resolving and normalising one
// href of hrefMix on a page, as link extraction does for every link.
func BenchmarkNormalizeHrefs(b *testing.B) {
	base, _ := url.Parse("https://www.example.com/news/2026/04/article.html")
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		_, _ = Normalize(base, hrefMix[i%len(hrefMix)])
		i++
	}
}
