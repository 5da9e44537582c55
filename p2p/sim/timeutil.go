package sim

import "time"

// seconds converts a report's seconds back to a Duration for printing.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
