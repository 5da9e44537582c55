package node_test

import "go.uber.org/goleak"

// goleakIgnores lists goroutines that libraries start once per process and
// never stop; they are not owned by any node.
func goleakIgnores() []goleak.Option {
	return []goleak.Option{
		// goleveldb lets this drain loop linger up to a second after Close.
		goleak.IgnoreAnyFunction("github.com/syndtr/goleveldb/leveldb.(*DB).mpoolDrain"),
		goleak.IgnoreAnyFunction("github.com/ipfs/go-log/v2/writer.(*MirrorWriter).logRoutine"),
		goleak.IgnoreAnyFunction("go.opencensus.io/stats/view.(*worker).start"),
	}
}
