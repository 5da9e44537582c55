package crawl

// Temporary forwarding names for the code outside crawl (p2p, cmd,
// p2p/localswarm) that still spells these crawl.X after they moved to
// crawl/urls and crawl/frontier. Nothing inside crawl uses them. This file
// goes once those callers import the new packages themselves.

import (
	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
)

// Task is frontier.Task.
type Task = frontier.Task

// Outcome is frontier.Outcome.
type Outcome = frontier.Outcome

// KeyMode is urls.KeyMode.
type KeyMode = urls.KeyMode

// KeyHost and KeyURL are urls.KeyHost and urls.KeyURL.
const (
	KeyHost = urls.KeyHost
	KeyURL  = urls.KeyURL
)

// MaxURLLength is urls.MaxURLLength.
const MaxURLLength = urls.MaxURLLength

// Forwarded functions of crawl/urls.
var (
	Normalize    = urls.Normalize
	ParseKeyMode = urls.ParseKeyMode
	TaskKey      = urls.TaskKey
	HostKey      = urls.HostKey
	HostOf       = urls.HostOf
	URLHash      = urls.URLHash
)
