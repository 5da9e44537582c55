package node

import (
	"embed"
	"io/fs"
	"net/http"
)

// web holds the live dashboard the API serves at /: a page that polls
// /status every second and draws pages/s and the queue over time, coverage
// of the URLs discovered, errors by type, the top and hot hosts, and the
// node's ring view (neighbours and their connections, owned ranges with
// their epochs, replicas). Embedded in the binary: nothing is fetched from
// elsewhere.
//
//go:embed web
var web embed.FS

// dashboardHandler serves the dashboard's files.
func dashboardHandler() http.Handler {
	files, err := fs.Sub(web, "web")
	if err != nil {
		panic(err) // the embedded tree always has web/
	}
	fileServer := http.FileServerFS(files)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The page reads the API, and nothing else: no other origin may
		// frame it or feed it scripts.
		w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'; img-src 'self'; frame-ancestors 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		fileServer.ServeHTTP(w, r)
	})
}
