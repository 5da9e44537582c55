package warc

// Test helpers for the external test package (crawl_warcio_test.go), which
// must be external because it crawls with package crawl, and crawl imports
// this package.
var (
	WarcioDirForTest = warcioDir
	RunWarcioForTest = runWarcio
	FilesForTest     = files
)
